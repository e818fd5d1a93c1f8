"""`kb forget` where short values (a phone, an employer, a name, an id) were copied on their own
into every kind of git object (a blob, a tree entry's name, a commit message, a tag message, a
note under a custom notes ref, a stash), into a file under .kb/ and a git-dir file, and into text
derived from the item (the profile's L0, its folder index entry, its Overview): after
`kb forget --user`, `kb forget ITEM` and `kb forget --match`, an independent scan written here
(every object from `git cat-file --batch-all-objects`, every file under .git and .kb) finds none
of them, and `kb forget --verify` agrees. An untracked file stops the rewrite after the material
is hidden; the same command completes it once the file is gone."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from ci.run import run_checks
from kb.errors import NotFoundError
from kb.evidence import ledger_at
from kb.repo import Repo
from kb.retrieval.reading import read_page
from kb.retrieval.search import make_query, search
from kb.scaffold import init_repository
from pipeline.memory import ingest
from tests.builders import write_chat

PAT_1 = [
    ("user", "My daughter is called Wilhelmina and she is seven."),
    ("user", "I work at Globex Corporation, my phone is +1 415 555 0134 and my badge id is EMP-48213."),
]
PAT_2 = [("user", "I started learning the cello last spring.")]
BOB = [("user", "I live in Oslo and my car is a 2020 Volvo XC40.")]
ENV = {
    "GIT_AUTHOR_NAME": "Ops",
    "GIT_AUTHOR_EMAIL": "ops@example.org",
    "GIT_COMMITTER_NAME": "Ops",
    "GIT_COMMITTER_EMAIL": "ops@example.org",
}

# what each target forgets, what is planted, and the forms the independent scan looks for
# (names case-folded; digits with any separators between them removed)
CASES = {
    "user": (
        "Wilhelmina, Globex, 415-555-0134, EMP-48213",
        "Wilhelmina at Globex.txt",
        ["wilhelmina", "globex", "4155550134", "emp-48213"],
    ),
    "item": (
        "(415) 555 0134 / Globex / Wilhelmina / emp-48213",
        "globex-Wilhelmina.md",
        ["wilhelmina", "globex", "4155550134", "emp-48213"],
    ),
    "match": ("+1 (415) 555-0134", "+1 415 555 0134.txt", ["14155550134"]),
}


def _git(repo: Repo, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo.root), *args], capture_output=True, text=True, env=os.environ | ENV, check=True)
    return proc.stdout


def _objects(root: Path) -> list[tuple[str, bytes]]:
    """Every object git holds, reachable or not, as (kind, text to search): a tree as its entry
    names, anything else as its raw content."""
    raw = subprocess.run(["git", "-C", str(root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True).stdout
    out, pos = [], 0
    while pos < len(raw):
        end = raw.index(b"\n", pos)
        _, kind, size = raw[pos:end].split(b" ")
        body = raw[end + 1 : end + 1 + int(size)]
        pos = end + 2 + int(size)
        if kind == b"tree":
            body = b"\n".join(m.group(1) for m in re.finditer(rb"\d+ ([^\0]*)\0.{20}", body, re.S))
        out.append((kind.decode(), body))
    return out


def _survivors(root: Path, forms: list[str]) -> list[str]:
    """Where any of ``forms`` is found: every git object, every file under .git and .kb."""
    places = [(f"{kind} object", body) for kind, body in _objects(root)]
    places += [(p.relative_to(root).as_posix(), p.read_bytes()) for d in (".git", ".kb") for p in (root / d).rglob("*") if p.is_file()]
    found = []
    for where, body in places:
        text = body.decode("utf-8", "replace").casefold()
        digits = re.sub(r"(?<=\d)[\s().+\-/]+(?=\d)", "", text)
        found += [f"{form} in {where}" for form in forms if form in (digits if form.isdigit() else text)]
    return found


def _plant(repo: Repo, copy: str, name: str) -> None:
    """The values copied into every git object kind, a .kb/ file and git-dir files."""
    scratch = repo.root / "scratch"
    scratch.mkdir()
    (scratch / "todo.md").write_text(f"# Todo\n\nRing {copy} about the contract.\n")
    (scratch / name).write_text("attachment\n")
    _git(repo, "add", "scratch")
    _git(repo, "commit", "-q", "-m", f"scratch: notes on {copy}")  # a commit message, COMMIT_EDITMSG, reflog
    _git(repo, "tag", "-a", "handover", "-m", f"handover to {copy}")  # a tag message
    _git(repo, "notes", "--ref=custom", "add", "-m", f"contact {copy}", "HEAD")  # a note under a custom ref
    _git(repo, "rm", "-q", str(scratch / name))
    _git(repo, "commit", "-q", "-m", f"scratch: {copy} sent it")  # the name stays in history only
    (scratch / "todo.md").write_text(f"# Todo\n\nAlso {copy}.\n")
    _git(repo, "stash", "-q")  # a stash
    (repo.root / ".kb" / "runs").mkdir(parents=True, exist_ok=True)
    (repo.root / ".kb" / "runs" / "planted.log").write_text(f"tool said {copy}\n")


def _repo(tmp: Path, case: str) -> tuple[Repo, str]:
    repo = init_repository(tmp / "kb")
    p1 = write_chat(tmp / "p1.json", PAT_1, "2024-03-01T10:00:00Z")
    p2 = write_chat(tmp / "p2.json", PAT_2, "2024-04-02T10:00:00Z")
    ingest(repo, "pat", [p1, p2])
    ingest(repo, "bob", [write_chat(tmp / "b.json", BOB, "2024-05-05T08:00:00Z")])
    copy, name, _ = CASES[case]
    _plant(repo, copy, name)
    item = next(e.id for e in ledger_at(repo, repo.head()) if e.scope == "user:pat" and e.meta.get("first_time", "").startswith("2024-03"))
    return repo, item


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_copy_of_a_short_value_survives_by_an_independent_full_scan(tmp_path: Path, cli, case: str) -> None:
    repo, item = _repo(tmp_path, case)
    forms = CASES[case][2]
    profile = (repo.root / "users/pat/profile.md").read_text()
    summary = next(line for line in profile.splitlines() if line.startswith("summary:"))
    assert "Globex" in summary and "415 555 0134" in summary  # derived text: the L0 copies the values
    assert "Globex" in (repo.root / "users/pat/index.md").read_text()  # and the folder index copies the L0
    before = _survivors(repo.root, forms)
    for where in ("blob object", "tree object", "commit object", "tag object", ".git/COMMIT_EDITMSG", ".git/logs/", ".kb/runs/planted.log"):
        assert any(where in f for f in before), where

    args = {"user": ["--user", "pat"], "item": [item], "match": ["--match", "+1 415 555 0134"]}[case]
    result = cli("--repo", str(repo.root), "forget", *args)
    assert result.code == 0 and "verification: clean" in result.out, result.out + result.err
    assert _survivors(repo.root, forms) == []
    verified = cli("--repo", str(repo.root), "forget", "--verify")
    assert verified.code == 0 and "copies-remain" not in verified.out

    head = repo.head()
    assert head is not None
    assert "Oslo" in (repo.root / "users/bob/profile.md").read_text()  # the other user stays
    if case != "user":  # the user's other memory stays, and the pages still pass the checks
        assert "cello" in (repo.root / "users/pat/notes.md").read_text()
        text = (repo.root / "users/pat/profile.md").read_text()
        assert "summary:" in text and "415 555 0134" not in text and ("Globex" in text) == (case == "match")
        assert run_checks(repo).ok
    assert _git(repo, "tag", "-l") == "handover\n"  # the tag stays, rewritten

    # a copy made afterwards: --verify finds what the independent scan finds
    _git(repo, "notes", "--ref=later", "add", "-m", f"call {CASES[case][0]}", "HEAD")
    assert [f for f in _survivors(repo.root, forms) if "blob object" in f]
    verified = cli("--repo", str(repo.root), "forget", "--verify")
    assert verified.code == 1 and "copies-remain" in verified.out and "copy: blob " in verified.out


@pytest.mark.parametrize("cleanup", ["delete", "commit"])
def test_an_untracked_file_stops_the_rewrite_after_hiding_and_a_rerun_completes_it(tmp_path: Path, cli, cleanup: str) -> None:
    repo = init_repository(tmp_path / "kb")
    ingest(repo, "pat", [write_chat(tmp_path / "p1.json", PAT_1, "2024-03-01T10:00:00Z")])
    head = repo.head()
    assert head is not None and search(repo, make_query("Globex phone", "user:pat", 3))
    (repo.root / "draft.txt").write_text("unrelated draft\n")

    result = cli("--repo", str(repo.root), "forget", "--user", "pat")
    assert result.code == 8 and "draft.txt" in result.err and "hidden" in result.err and "hint:" in result.err
    assert repo.head() is not None and repo.head().id == head.id  # nothing rewritten yet
    assert not [
        h for h in search(repo, make_query("Globex phone Wilhelmina", "user:pat", 10, include_evidence=True)) if h.scope == "user:pat"
    ]
    with pytest.raises(NotFoundError):
        read_page(repo, "users/pat/profile", "user:pat")

    assert cli("--repo", str(repo.root), "forget", "--user", "pat").code == 8  # still there: refused again
    if cleanup == "delete":
        (repo.root / "draft.txt").unlink()
    else:  # HEAD moves: the forgetting is planned again from it, under the same id
        _git(repo, "add", "draft.txt")
        _git(repo, "commit", "-q", "-m", "draft")
    again = cli("--repo", str(repo.root), "forget", "--user", "pat")
    assert again.code == 0 and "verification: clean" in again.out, again.out + again.err
    assert _survivors(repo.root, ["wilhelmina", "globex", "4155550134"]) == []
    assert len(list((repo.root / ".kb/forget").glob("fg-*.json"))) == 1  # the same forgetting, completed
