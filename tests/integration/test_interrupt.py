"""Ctrl-C (issue 12 item 3): SIGINT to a working ``kb`` stops it within a few seconds with
"interrupted" and exit 130, leaves no lock held and no temporary index folder, and keeps what it
had reported done. Each test interrupts the process where it spends its time: embedding during
an index build (also the tail of ``kb run`` and ``kb memory ingest``), waiting for the lock."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from kb.evidence import load_ledger
from kb.repo import Repo
from kb.retrieval.build import index_status
from kb.retrieval.store import TMP_PREFIX, index_store
from kb.scaffold import init_repository
from tests.builders import write_chat
from tests.integration.processes import finish, start_kb, unreviewed_on_main

BOUND_S = 3.0  # generous: the embedding threads stop within one layer of one forward pass
WORDS = "travel hotel flight budget receipt approval manager limit policy expense meal taxi train visa".split()


def _document(n: int) -> str:
    paragraphs = []
    for p in range(6):
        words = [WORDS[(n * 7 + p * 3 + i * i) % len(WORDS)] for i in range(90)]
        paragraphs.append(f"Rule {n}.{p}: " + " ".join(words) + ".")
    return f"# Policy {n}\n\n" + "\n\n".join(paragraphs) + "\n"


def _documents(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(count):
        path = folder / f"policy-{n}.md"
        path.write_text(_document(n))
        paths.append(path)
    return paths


def _add(repo: Repo, files: list[Path]) -> None:
    code, _, err = finish(start_kb("evidence", "add", *map(str, files), cwd=repo.root))
    assert code == 0, err


def _interrupt_when(process: subprocess.Popen[str], marker: str) -> tuple[int, float, str, str]:
    """Wait for ``marker`` at the start of a stderr line, send SIGINT; (exit code, seconds the
    process took to end after the signal, stdout, stderr)."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if line.startswith(marker):
            break
    else:
        out, _ = process.communicate()
        raise AssertionError(f"the process ended before {marker!r}: {''.join(seen)}{out}")
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return process.returncode, time.monotonic() - sent, out, "".join(seen) + err


def _assert_clean(repo: Repo) -> None:
    """No lock held or named, no temporary index folder, no half-written file."""
    free = Repo(repo.root, lock_wait=0)
    with free.write_lock(), free.lock("index"):  # ConflictError if still held
        pass
    for name in ("write.lock", "index.lock"):
        lock = repo.root / ".kb" / name
        assert not lock.exists() or lock.read_text() == "", f"{name} still names a holder"
    store = index_store(repo)
    leftovers = [p.name for p in store.root.rglob(f"{TMP_PREFIX}*")] if store.root.exists() else []
    assert leftovers == []
    assert repo.dirty_paths() == []


def test_sigint_during_index_build_stops_at_once_and_cleans_up(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    _add(repo, _documents(tmp_path / "in", 12))
    process = start_kb("index", "build", cwd=repo.root, KB_PROGRESS_AFTER="0")
    code, seconds, _, err = _interrupt_when(process, "embed: 0/")
    assert (code, err.splitlines()[-1]) == (130, "interrupted"), err
    assert seconds < BOUND_S
    # a progressive build published the text index before it embedded: the new commit serves,
    # searched by BM25 alone, every chunk still waiting for its vector; nothing half-written
    status = index_status(repo)
    assert status.served_commit == str(repo.head().id) and status.dense_pending == status.counts["chunks"] > 0  # type: ignore[union-attr]
    _assert_clean(repo)


def test_sigint_during_run_keeps_the_reported_merge(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    _add(repo, _documents(tmp_path / "in", 8))
    process = start_kb("run", cwd=repo.root, KB_PROGRESS_AFTER="0")
    code, seconds, out, err = _interrupt_when(process, "embed: 0/")
    assert (code, err.splitlines()[-1]) == (130, "interrupted"), err
    assert seconds < BOUND_S
    merged = [line for line in out.splitlines() if line.startswith("merged as ")]
    assert merged, out  # reported before the index build began ...
    head = repo.head()
    assert head is not None and str(head.id).startswith(merged[0].split()[2].rstrip(";"))  # ... and kept
    assert unreviewed_on_main(repo.root) == []
    assert [b for b in repo.git.branches.local if b.startswith("kb/")] == [] and repo.git.list_worktrees() == []
    _assert_clean(repo)


def test_sigint_during_memory_ingest_keeps_the_reported_merge(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    sessions = []
    for n in range(4):
        said = [("user", f"I always book an aisle seat and I am vegetarian; note {n}: " + _document(n)), ("assistant", "Noted.")]
        sessions.append(write_chat(tmp_path / f"s{n}.json", said, f"2026-0{n + 1}-02T10:00:00Z"))
    process = start_kb("memory", "ingest", "--user", "alice", *map(str, sessions), cwd=repo.root, KB_PROGRESS_AFTER="0")
    code, seconds, out, err = _interrupt_when(process, "embed: 0/")
    assert (code, err.splitlines()[-1]) == (130, "interrupted"), err
    assert seconds < BOUND_S
    assert "4 session(s): 4 new" in out and "merged as " in out, out
    assert len([e for e in load_ledger(repo.root) if e.scope == "user:alice"]) == 4
    assert list((repo.root / "users" / "alice").glob("*.md")) != []
    _assert_clean(repo)


def test_sigint_while_evidence_add_waits_for_the_lock_adds_nothing(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    files = _documents(tmp_path / "in", 3)
    with repo.write_lock():
        process = start_kb("evidence", "add", *map(str, files), cwd=repo.root)
        code, seconds, out, err = _interrupt_when(process, "waiting for the repository lock")
    assert (code, err.splitlines()[-1], out) == (130, "interrupted", ""), err
    assert seconds < BOUND_S
    assert load_ledger(repo.root) == []
    _assert_clean(repo)
    _add(repo, files)  # the next add runs at once
    assert len(load_ledger(repo.root)) == 3
