"""A merge killed while it moves main (issue 10, item 8): ``Repo.move_head`` journals the move,
writes each file atomically, and the next writing command finishes it, touching only the paths
of that merge; rerunning the merge reports it merged; nothing needs a manual step."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

import kb.repo
from ci.run import run_checks
from kb.repo import HEAD_MOVE, Repo
from pipeline.merge import merge_branch
from pipeline.propose import propose
from pipeline.review import review_branch


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (not even ``finally`` blocks that catch Exception)."""


def _approved(repo: Repo) -> str:
    branch = propose(repo).branch
    assert review_branch(repo, branch).verdict == "approve"
    return branch


def _kill_at_write(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """The ``n``-th atomic write of the merge dies half way: a truncated temporary file, no rename."""
    real = kb.repo.atomic_write
    calls = {"n": 0}

    def dying(path: Path, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == n:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.with_name(f".{path.name}.tmp-4242").write_bytes(data[: len(data) // 2])
            raise Killed
        real(path, data)

    monkeypatch.setattr(kb.repo, "atomic_write", dying)


def _assert_merged_once_and_clean(repo: Repo, branch: str) -> None:
    repo = Repo(repo.root)
    head = repo.head()
    assert head.message.startswith(f"Merge {branch}\n") and len(head.parents) == 2
    line = []
    commit: pygit2.Commit | None = head
    while commit is not None:
        line.append(commit.message.splitlines()[0])
        commit = commit.parents[0] if commit.parents else None
    assert line.count(f"Merge {branch}") == 1
    assert branch not in repo.git.branches.local and repo.git.list_worktrees() == []
    assert not (repo.state_dir / HEAD_MOVE).exists()
    assert repo.dirty_paths() == []  # no truncated page, no temporary file, nothing untracked
    assert run_checks(repo).ok


@pytest.mark.parametrize("n", [1, 2, 3], ids=["journal", "first-file", "second-file"])
def test_a_merge_killed_mid_write_is_finished_by_the_rerun(sample_repo, monkeypatch, cli, n: int) -> None:
    repo, _ = sample_repo
    branch = _approved(repo)
    _kill_at_write(monkeypatch, n)
    with pytest.raises(Killed):
        merge_branch(repo, branch, build_index=False)
    monkeypatch.undo()
    assert repo.dirty_paths() == [] if n == 1 else repo.dirty_paths() != []  # the kill left a mess
    result = cli("--repo", str(repo.root), "merge", branch, "--no-index")
    assert result.code == 0, result.err
    expected = f"merged {branch} as" if n == 1 else f"{branch} is already merged as"  # a journal was written: finished first
    assert expected in result.out
    _assert_merged_once_and_clean(repo, branch)


def test_a_merge_killed_after_moving_main_is_finished_by_an_add(sample_repo, monkeypatch, cli, tmp_path: Path) -> None:
    repo, _ = sample_repo
    branch = _approved(repo)

    def dying_rmtree(*_args: object, **_kwargs: object) -> None:
        raise Killed

    monkeypatch.setattr(kb.repo.shutil, "rmtree", dying_rmtree)  # main moved; the branch not yet dropped
    with pytest.raises(Killed):
        merge_branch(repo, branch, build_index=False)
    monkeypatch.undo()
    assert (repo.state_dir / HEAD_MOVE).exists() and branch in repo.git.branches.local
    note = tmp_path / "note.md"
    note.write_text("# After\n\nAdded after the killed merge.\n")
    result = cli("--repo", str(repo.root), "evidence", "add", str(note))
    assert result.code == 0, result.err
    assert Repo(repo.root).head().message.startswith("evidence: add")
    assert Repo(repo.root).head().parents[0].message.startswith(f"Merge {branch}\n")
    assert branch not in repo.git.branches.local and repo.git.list_worktrees() == []
    assert Repo(repo.root).dirty_paths() == [] and run_checks(Repo(repo.root)).ok


def test_a_stale_journal_of_a_head_moved_otherwise_is_dropped_untouched(sample_repo, cli, tmp_path: Path) -> None:
    repo, _ = sample_repo
    journal = repo.state_dir / HEAD_MOVE
    journal.write_text('{"old": "' + "1" * 40 + '", "new": "' + "2" * 40 + '", "paths": ["knowledge/index.md"]}')
    before = (repo.root / "knowledge/index.md").read_bytes()
    note = tmp_path / "note.md"
    note.write_text("# N\n\nA note.\n")
    assert cli("--repo", str(repo.root), "evidence", "add", str(note)).code == 0
    assert not journal.exists() and (repo.root / "knowledge/index.md").read_bytes() == before
    journal.write_text('{"old": "')  # cut short by a kill while it was written: nothing had moved
    assert cli("--repo", str(repo.root), "evidence", "add", str(note)).code == 0
    assert not journal.exists()


def test_the_branch_of_a_killed_run_is_dropped_and_its_evidence_proposed_again(sample_repo, cli) -> None:
    from pipeline.propose import OPEN_BRANCH

    repo, _ = sample_repo
    abandoned = propose(repo, for_run=True)  # a run killed after proposing: the journal stays
    assert (repo.state_dir / OPEN_BRANCH).exists()
    result = cli("--repo", str(repo.root), "run", "--no-index")
    assert result.code == 0 and "merged as" in result.out, result.err
    # its evidence was proposed again and merged (the new proposal may reuse the name and, made in
    # the same second from the same evidence, even be the very same commit)
    merged = Repo(repo.root).head()
    assert len(merged.parents) == 2 and all(e in merged.message for e in abandoned.evidence_ids)
    assert [b for b in repo.git.branches.local if b.startswith("kb/")] == []
    assert not (repo.state_dir / OPEN_BRANCH).exists()
    assert Repo(repo.root).dirty_paths() == [] and run_checks(Repo(repo.root)).ok


def test_a_dropped_branch_takes_its_review_notes_with_it(sample_repo) -> None:
    """A run killed after its review: the next proposal of the same evidence may be the very
    same commit under another branch name, so the old notes (naming the old branch) must go."""
    from pipeline.propose import drop_abandoned_branch
    from pipeline.records import reviews_of

    repo, _ = sample_repo
    abandoned = propose(repo, for_run=True)
    assert review_branch(repo, abandoned.branch).verdict == "approve"
    assert [r.branch for r in reviews_of(repo, abandoned.head)] == [abandoned.branch]
    assert drop_abandoned_branch(repo) == abandoned.branch
    assert reviews_of(repo, abandoned.head) == []
    assert abandoned.branch not in repo.git.branches.local


def test_a_branch_left_for_a_human_or_by_a_plain_propose_is_kept(sample_repo) -> None:
    from pipeline.propose import OPEN_BRANCH, drop_abandoned_branch
    from pipeline.records import set_status

    repo, _ = sample_repo
    proposal = propose(repo, for_run=True)
    set_status(repo, str(proposal.head), "needs-human", {"branch": proposal.branch})  # killed just after marking it
    assert drop_abandoned_branch(repo) is None
    assert proposal.branch in repo.git.branches.local and not (repo.state_dir / OPEN_BRANCH).exists()
    kept = propose(repo, ids=[proposal.evidence_ids[0]])  # `kb propose` leaves its branch for review
    assert not (repo.state_dir / OPEN_BRANCH).exists() and drop_abandoned_branch(repo) is None
    assert kept.branch in repo.git.branches.local
