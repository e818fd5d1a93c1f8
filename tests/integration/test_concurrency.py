"""Concurrent writers (issue 10, items 2 and 9): every writing command takes the one repository
lock and waits for it (bounded, with a message) instead of failing; nothing but a merge or an
evidence add lands on main; two `kb run`s and a merge racing an add end without a crash."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci.run import run_checks
from kb.config import parse_config
from kb.errors import ConfigError, ConflictError
from kb.evidence import load_ledger, verify_chain
from kb.repo import Repo, describe_holder
from kb.scaffold import init_repository
from pipeline.propose import propose, unused_branch
from pipeline.review import review_branch
from pipeline.workspace import open_workspace
from tests.builders import add_file
from tests.integration.processes import ROOT, finish, kb_env, main_line, start_kb, unreviewed_on_main


def _notes(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    notes = []
    for n in range(count):
        note = folder / f"note-{n}.md"
        note.write_text(f"# Note {n}\n\nParallel note number {n}.\n")
        notes.append(note)
    return notes


def test_parallel_adds_all_land_one_commit_each(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    notes = _notes(tmp_path / "in", 6)
    with repo.write_lock():  # held until the first add says it waits: the adds surely overlap
        processes = [start_kb("--repo", str(repo.root), "evidence", "add", str(note), cwd=tmp_path) for note in notes]
        assert processes[0].stderr is not None
        first_line = processes[0].stderr.readline()
    assert first_line.startswith("waiting for the repository lock held by pid"), first_line
    results = [finish(p) for p in processes]
    assert [code for code, _, _ in results] == [0] * len(notes), [err for _, _, err in results]
    entries = load_ledger(repo.root)
    assert sorted(e.source for e in entries) == sorted(n.name for n in notes)
    assert verify_chain(entries) == []
    assert main_line(repo.root).count("evidence: add 1 item(s)") == len(notes)
    assert unreviewed_on_main(repo.root) == []
    assert repo.dirty_paths() == []


def _sample(root: Path) -> Repo:
    repo = init_repository(root)
    add_file(repo, "travel-policy.md", "document")
    add_file(repo, "alice-2025-03-02.json", "conversation", "alice")
    return repo


def test_two_parallel_runs_put_only_merges_on_main_and_do_not_crash(tmp_path: Path) -> None:
    repo = _sample(tmp_path / "kb")
    processes = [start_kb("--repo", str(repo.root), "run", "--no-index", cwd=tmp_path) for _ in range(2)]
    results = sorted(finish(p) for p in processes)
    codes = [code for code, _, _ in results]
    # one run merges; the other waits for it and then finds nothing left to propose (not an error)
    assert codes == [0, 0], results
    outputs = sorted(out for _, out, _ in results)
    assert "merged as" in outputs[1] and outputs[0].startswith("nothing to do: no new evidence"), results
    assert unreviewed_on_main(repo.root) == []
    assert [s for s in main_line(repo.root) if s.startswith("Merge kb/")] != []
    assert [b for b in repo.git.branches.local if b.startswith("kb/")] == []
    assert repo.git.list_worktrees() == []
    assert repo.dirty_paths() == [] and run_checks(repo).ok


def test_merge_racing_adds_all_land(tmp_path: Path) -> None:
    repo = _sample(tmp_path / "kb")
    proposal = propose(repo)
    assert review_branch(repo, proposal.branch).verdict == "approve"
    notes = _notes(tmp_path / "in", 3)
    merge = start_kb("--repo", str(repo.root), "merge", proposal.branch, "--no-index", cwd=tmp_path)
    adds = [start_kb("--repo", str(repo.root), "evidence", "add", str(note), cwd=tmp_path) for note in notes]
    merge_code, merge_out, merge_err = finish(merge)
    added = [finish(add) for add in adds]
    assert merge_code == 0 and f"merged {proposal.branch}" in merge_out, merge_err
    assert [code for code, _, _ in added] == [0] * len(notes), [err for _, _, err in added]
    assert {n.name for n in notes} <= {e.source for e in load_ledger(repo.root)}
    assert f"Merge {proposal.branch}" in main_line(repo.root) and unreviewed_on_main(repo.root) == []
    assert repo.dirty_paths() == [] and run_checks(repo).ok


def test_a_writer_waits_for_the_lock_with_a_message_and_gives_up_when_told(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    (note,) = _notes(tmp_path / "in", 1)
    add = ("--repo", str(repo.root), "evidence", "add", str(note))
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text().replace("lock_wait_s: 300", "lock_wait_s: 0.3"))
    holder = Repo(repo.root, command="kb run (held by the test)")
    with holder.write_lock():
        # from the option, the environment and the config, in that order of precedence
        for extra, env, wait in (
            (("--lock-wait", "0.4"), {"KB_LOCK_WAIT": "60"}, "0.4"),
            ((), {"KB_LOCK_WAIT": "0.2"}, "0.2"),
            ((), {}, "0.3"),
        ):
            code, _, err = finish(start_kb(*extra, *add, cwd=tmp_path, **env))
            lines = err.splitlines()
            assert code == 8, err
            assert (
                lines[0]
                == f"waiting for the repository lock held by pid {os.getpid()} (command kb run (held by the test)) (up to {wait} s)"
            )
            assert lines[1].startswith(f"error: the repository lock is still held by pid {os.getpid()}")
            assert "--lock-wait SECONDS, KB_LOCK_WAIT or lock_wait_s" in lines[2]
        assert load_ledger(repo.root) == []
        waiting = start_kb("--lock-wait", "60", *add, cwd=tmp_path)
        assert waiting.stderr is not None
        assert waiting.stderr.readline().startswith("waiting for the repository lock held by pid")
    code, out, err = finish(waiting)
    assert code == 0 and "added ev-" in out, err
    assert [e.source for e in load_ledger(repo.root)] == ["note-0.md"]


def test_a_killed_holder_blocks_nobody_and_is_not_named(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    script = "import sys, time; from kb.repo import Repo\nwith Repo(__import__('pathlib').Path(sys.argv[1])).write_lock():\n    print('held', flush=True); time.sleep(60)\n"
    holder = subprocess.Popen([sys.executable, "-c", script, str(repo.root)], cwd=ROOT, env=kb_env(), stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    lock_file = repo.root / ".kb" / "write.lock"
    assert describe_holder(lock_file).startswith(f"pid {holder.pid} (command ")
    with pytest.raises(ConflictError, match="still held by pid"), Repo(repo.root, lock_wait=0).write_lock():
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert describe_holder(lock_file) == "another kb process"  # its metadata outlives it, and is not believed
    started = time.monotonic()
    with Repo(repo.root, lock_wait=0).write_lock():
        assert describe_holder(lock_file).startswith(f"pid {os.getpid()} ")
    assert time.monotonic() - started < 5
    assert lock_file.read_text() == ""  # released cleanly: no holder named


def test_the_lock_is_reentrant_in_one_thread_and_the_index_lock_is_not(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    with repo.write_lock(), Repo(repo.root, lock_wait=0).write_lock():
        pass
    with repo.lock("index"), pytest.raises(ConflictError, match="this process already holds the index lock"):
        with Repo(repo.root).lock("index"):
            pass


def test_lock_wait_in_the_config_is_validated() -> None:
    assert parse_config("version: 1\nlock_wait_s: 2.5\n").lock_wait_s == 2.5
    assert parse_config("version: 1\n").lock_wait_s == 300
    for bad in ("-1", "forever", "100000"):
        with pytest.raises(ConfigError, match="lock_wait_s"):
            parse_config(f"version: 1\nlock_wait_s: {bad}\n")


def test_two_proposals_in_one_second_get_two_branches(tmp_path: Path) -> None:
    repo = _sample(tmp_path / "kb")
    repo.git.branches.local.create("kb/same", repo.head())
    assert unused_branch(repo, "kb/same") == "kb/same-2"
    assert unused_branch(repo, "kb/other") == "kb/other"


def test_a_worktree_that_lost_its_git_file_never_commits_to_main(tmp_path: Path) -> None:
    repo = _sample(tmp_path / "kb")
    workspace = open_workspace(repo, "kb/broken")
    (workspace.root / ".git").unlink()  # what a concurrent removal left: git now finds the main repository
    (workspace.root / "knowledge" / "stray.md").write_text("# Stray\n")
    head = repo.head().id
    with pytest.raises(ConflictError, match="is not the worktree of kb/broken"):
        workspace.commit("wip")
    assert Repo(repo.root).head().id == head
