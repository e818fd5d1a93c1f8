"""An add killed after its commit but before git's index was written (found by the kill trials,
bench/kill_trials.py): the items and ledger are committed and on disk as committed, only the index
lags. The next add brings the index up to date instead of refusing the committed items as
foreign changes."""

from __future__ import annotations

from pathlib import Path

from ci.run import run_checks
from kb.evidence import add_items, load_ledger
from kb.intake import prepare
from tests.builders import make_repo


def test_the_next_add_resyncs_an_index_the_killed_add_did_not_write(cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb")
    before = repo.head()
    first = prepare(b"# First\n\nCommitted, then killed.\n", "first.md", "document", "system")
    added = add_items(repo, [first])
    index = repo.git.index
    index.read_tree(before.tree)  # git's index as it was before the commit
    index.write()
    assert sorted(repo.dirty_paths()) == sorted([added.added[0].path, "evidence/ledger.jsonl"])
    note = tmp_path / "second.md"
    note.write_text("# Second\n\nAdded after the kill.\n")
    result = cli("--repo", str(repo.root), "evidence", "add", str(note))
    assert result.code == 0, result.err
    assert "cleaned up after an interrupted add" in result.err
    assert [e.source for e in load_ledger(repo.root)] == ["first.md", "second.md"]
    assert repo.dirty_paths() == [] and run_checks(repo).ok


def test_git_lock_files_of_a_writer_killed_holding_the_lock_are_removed(cli, tmp_path: Path) -> None:
    import json
    import time

    repo = make_repo(tmp_path / "kb")
    started = time.time() - 5
    (repo.state_dir / "write.lock").write_text(json.dumps({"pid": 2**22 + 7, "command": "kb evidence add x", "since": started}))
    stale = repo.root / ".git" / "index.lock"  # a kill inside libgit2's index write
    stale.write_bytes(b"DIRC")
    note = tmp_path / "n.md"
    note.write_text("# N\n\nAfter the kill.\n")
    result = cli("--repo", str(repo.root), "evidence", "add", str(note))
    assert result.code == 0, result.err
    assert not stale.exists() and repo.dirty_paths() == []
    assert (repo.state_dir / "write.lock").read_text() == ""  # released cleanly


def test_git_lock_files_are_left_alone_after_a_clean_release(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb")
    with repo.write_lock():
        pass
    mine = repo.root / ".git" / "index.lock"  # e.g. a git command of the user's, running now
    mine.write_bytes(b"DIRC")
    with repo.write_lock():
        assert mine.exists()
