"""Copies of short values that survive `kb forget`, found by an independent full scan.

    python bench/forget_copies.py --before-src /tmp/kb-main [--workdir /tmp/kb-forget-copies]

A repository with two users is built by the real ingest (offline agents, gate, merge); the
first user's phone, employer, daughter's name and badge id are then copied on their own into a
committed file, a tree entry's name (a file later deleted), two commit messages (so also
COMMIT_EDITMSG and the reflogs), an annotated tag's message, a note under `refs/notes/custom`,
a stash and a file under `.kb/runs/`; the profile's L0 and its folder index entry already copy
them (derived text). Each target (`--user pat`, `kb forget ITEM` of the item holding them,
`--match` of the phone) is run on a fresh copy by each checkout's `kb forget` (`--before-src`:
another checkout, e.g. `git -C /work/main archive main | tar -x -C /tmp/kb-main`; after: this
one), then every git object (`git cat-file --batch-all-objects --batch`, a tree as its entry
names) and every file under `.git` and `.kb` is searched for the values (names case-folded,
digits with any separators between them removed). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAT_1 = [
    ("user", "My daughter is called Wilhelmina and she is seven."),
    ("user", "I work at Globex Corporation, my phone is +1 415 555 0134 and my badge id is EMP-48213."),
]
PAT_2 = [("user", "I started learning the cello last spring.")]
BOB = [("user", "I live in Oslo and my car is a 2020 Volvo XC40.")]
NAMES = ["wilhelmina", "globex", "4155550134", "emp-48213"]
TARGETS = {
    "user": (["--user", "pat"], "Wilhelmina, Globex, 415-555-0134, EMP-48213", "Wilhelmina at Globex.txt", NAMES),
    "item": ([], "(415) 555 0134 / Globex / Wilhelmina / emp-48213", "globex-Wilhelmina.md", NAMES),
    "match": (["--match", "+1 415 555 0134"], "+1 (415) 555-0134", "+1 415 555 0134.txt", ["14155550134"]),
}
ENV = {
    "GIT_AUTHOR_NAME": "Ops",
    "GIT_AUTHOR_EMAIL": "ops@example.org",
    "GIT_COMMITTER_NAME": "Ops",
    "GIT_COMMITTER_EMAIL": "ops@example.org",
}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, env=os.environ | ENV, check=True).stdout


def base_repo(folder: Path) -> tuple[Path, str]:
    """The ingested repository (this checkout's code: ingest is not what is compared)."""
    from kb.evidence import ledger_at
    from kb.scaffold import init_repository
    from pipeline.memory import ingest
    from tests.builders import write_chat

    repo = init_repository(folder / "kb")
    ingest(
        repo,
        "pat",
        [write_chat(folder / "p1.json", PAT_1, "2024-03-01T10:00:00Z"), write_chat(folder / "p2.json", PAT_2, "2024-04-02T10:00:00Z")],
    )
    ingest(repo, "bob", [write_chat(folder / "b.json", BOB, "2024-05-05T08:00:00Z")])
    item = next(e.id for e in ledger_at(repo, repo.head()) if e.scope == "user:pat" and e.meta.get("first_time", "").startswith("2024-03"))
    return repo.root, item


def plant(root: Path, copy: str, name: str) -> None:
    scratch = root / "scratch"
    scratch.mkdir()
    (scratch / "todo.md").write_text(f"# Todo\n\nRing {copy} about the contract.\n")
    (scratch / name).write_text("attachment\n")
    git(root, "add", "scratch")
    git(root, "commit", "-q", "-m", f"scratch: notes on {copy}")
    git(root, "tag", "-a", "handover", "-m", f"handover to {copy}")
    git(root, "notes", "--ref=custom", "add", "-m", f"contact {copy}", "HEAD")
    git(root, "rm", "-q", str(scratch / name))
    git(root, "commit", "-q", "-m", f"scratch: {copy} sent it")
    (scratch / "todo.md").write_text(f"# Todo\n\nAlso {copy}.\n")
    git(root, "stash", "-q")
    (root / ".kb" / "runs").mkdir(parents=True, exist_ok=True)
    (root / ".kb" / "runs" / "planted.log").write_text(f"tool said {copy}\n")


def survivors(root: Path, forms: list[str]) -> Counter[str]:
    """Places holding any form, by kind: git object kinds, `.git/<file>`, `.kb/<folder>`."""
    raw = subprocess.run(["git", "-C", str(root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True).stdout
    places: list[tuple[str, bytes]] = []
    pos = 0
    while pos < len(raw):
        end = raw.index(b"\n", pos)
        _, kind, size = raw[pos:end].split(b" ")
        body = raw[end + 1 : end + 1 + int(size)]
        pos = end + 2 + int(size)
        if kind == b"tree":
            body = b"\n".join(m.group(1) for m in re.finditer(rb"\d+ ([^\0]*)\0.{20}", body, re.S))
        places.append((kind.decode(), body))
    for folder in (".git", ".kb"):
        for p in (root / folder).rglob("*"):
            if p.is_file():
                rel = p.relative_to(root).parts
                places.append(("/".join(rel[:2]) if folder == ".kb" or rel[1] != "logs" else ".git/logs", p.read_bytes()))
    found: Counter[str] = Counter()
    for where, body in places:
        text = body.decode("utf-8", "replace").casefold()
        digits = re.sub(r"(?<=\d)[\s().+\-/]+(?=\d)", "", text)
        if any(form in (digits if form.isdigit() else text) for form in forms):
            found[where] += 1
    return found


def run(src: Path, root: Path, args: list[str]) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run(
        [sys.executable, "-m", "kb", "--repo", str(root), "forget", *args], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    verdict = next((line.split(": ", 1)[1].split(" (")[0] for line in proc.stdout.splitlines() if line.startswith("verification:")), "")
    return proc.returncode, verdict or proc.stderr.strip().splitlines()[-1][:60]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before-src", type=Path, required=True, help="the checkout to compare with (e.g. main)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kb-forget-copies"))
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    base, item = base_repo(args.workdir / "base")
    print(
        "| target | code | `kb forget` exit, verdict | places holding a value before | after: places holding a value (independent scan) |"
    )
    print("|---|---|---|---|---|")
    for target, (targs, copy, name, forms) in TARGETS.items():
        for label, src in (("before", args.before_src.resolve()), ("after", ROOT)):
            root = args.workdir / f"{target}-{label}"
            shutil.copytree(base, root, symlinks=True)
            plant(root, copy, name)
            before = survivors(root, forms)
            code, verdict = run(src, root, targs or [item])
            after = survivors(root, forms)
            where = ", ".join(f"{k} {v}" for k, v in sorted(after.items())) or "none"
            print(f"| {target} | {label} | {code}, {verdict} | {sum(before.values())} | **{sum(after.values())}**: {where} |")


if __name__ == "__main__":
    main()
