"""kb's merge against the GitHub test double with branch protection on (required ``kb-check`` and
``kb/gate``, one required approval): the merge waits for the required checks (a check run that
arrives during the wait), ends in "waiting for checks" after the bound (its own exit code, no new
push), refuses a failed check at once, and on a linear-history branch merges by squash with kb's
merge record in the commit; a repository that allows only rebase merges is refused."""

from __future__ import annotations

import json
from collections.abc import Callable

import pygit2
import pytest

from kb.errors import ForgeError, GateError
from kb.repo import Repo
from pipeline.forge.base import ChecksPendingError
from pipeline.forge.changes import merge_change, open_change, review_change
from pipeline.forge.remote import GitRemote
from pipeline.propose import propose
from pipeline.records import parse_trailers
from tests.conftest import CliResult
from tests.forge.github_double import Protection
from tests.pipeline.forge.conftest import ForgeSetup

Cli = Callable[..., CliResult]
REQUIRED = ("kb-check", "kb/gate")


def _protected(github: ForgeSetup, wait_s: float = 30, linear: bool = False) -> tuple[Repo, str]:
    """Protection on, kb's config requiring both checks; a kb change opened (kb/gate set by kb) and
    approved by the Reviewer; the head of its pull request #1."""
    github.double.protection = Protection(required_contexts=REQUIRED, linear_history=linear)
    config = github.repo.root / "kb.config.yaml"
    extra = f"  required_checks: [{', '.join(REQUIRED)}]\n  checks_wait_s: {wait_s}\n"
    config.write_text(config.read_text(encoding="utf-8") + extra, encoding="utf-8")
    github.repo.commit_worktree_paths(["kb.config.yaml"], "Require kb-check and kb/gate")
    GitRemote(github.repo.root, "origin", "tok-proposer").push_branch("main")
    repo = Repo(github.repo.root)
    proposal = propose(repo)
    assert proposal.head is not None
    open_change(repo, proposal.branch, github.forge())
    assert review_change(repo, "1", github.forge()).review.verdict == "approve"
    return repo, proposal.head


def _record(commit: pygit2.Commit) -> dict[str, object]:
    return dict(json.loads(commit.message.split("Kb-Merge-Record (JSON):\n", 1)[1].split("\n\n", 1)[0]))


def test_the_merge_waits_for_the_required_check_and_reaches_main(github: ForgeSetup) -> None:
    repo, head = _protected(github)
    waits: list[float] = []

    def ci_finishes(seconds: float) -> None:  # kb-check runs, then succeeds, while kb waits
        waits.append(seconds)
        github.double.add_check_run(head, "kb-check", status="in_progress", conclusion=None)
        if len(waits) == 2:
            github.double.add_check_run(head, "kb-check")

    outcome = merge_change(repo, "1", github.forge(), build_index=False, sleep=ci_finishes)
    assert waits == [10.0, 10.0]
    main = github.double.bare.references["refs/heads/main"].peel(pygit2.Commit)
    assert str(main.id) == outcome.commit and [str(p.id) for p in main.parents][1] == head  # a merge commit
    assert parse_trailers(main.message)["Kb-Head"] == head and _record(main)["head"] == head
    assert github.double.pulls[1].merged and str(Repo(repo.root).head().id) == outcome.commit


def test_a_pending_check_ends_in_waiting_for_checks_after_the_bound(github: ForgeSetup, cli: Cli) -> None:
    repo, head = _protected(github)
    github.double.add_check_run(head, "kb-check", status="queued", conclusion=None)
    waits: list[float] = []
    with pytest.raises(ChecksPendingError, match=r"waiting for checks on #1 .* after 30s: kb-check \(queued\)"):
        merge_change(repo, "1", github.forge(), build_index=False, sleep=waits.append)
    assert waits == [10.0, 10.0, 10.0]  # bounded by forge.checks_wait_s

    no_wait = repo.root / "kb.config.yaml"
    no_wait.write_text(no_wait.read_text(encoding="utf-8").replace("checks_wait_s: 30", "checks_wait_s: 0"), encoding="utf-8")
    repo.commit_worktree_paths(["kb.config.yaml"], "Do not wait for checks")
    pending = cli("pr", "merge", "1", cwd=repo.root)
    assert pending.code == ChecksPendingError.exit_code == 19, pending.err
    assert "waiting for checks on #1" in pending.err and "Traceback" not in pending.err + pending.out
    pull = github.double.pulls[1]
    assert not pull.merged and pull.head_sha == head == github.double.branch_sha(pull.head)  # no new push
    assert not [call for call in github.double.calls if call.endswith("/merge")]  # no merge was tried


def test_a_failed_required_check_is_refused_at_once(github: ForgeSetup) -> None:
    repo, head = _protected(github)
    github.double.add_check_run(head, "kb-check", conclusion="failure")
    with pytest.raises(GateError, match=r"a required check failed on #1 at \w+: kb-check \(failure\)"):
        merge_change(repo, "1", github.forge(), build_index=False, sleep=lambda _s: pytest.fail("no wait for a failed check"))
    assert not github.double.pulls[1].merged


def test_linear_history_merges_by_squash_with_the_record_intact(github: ForgeSetup) -> None:
    repo, head = _protected(github, linear=True)
    github.double.add_check_run(head, "kb-check")
    outcome = merge_change(repo, "1", github.forge(), build_index=False)
    main = github.double.bare.references["refs/heads/main"].peel(pygit2.Commit)
    assert str(main.id) == outcome.commit and len(main.parents) == 1  # a squash: no merge commit
    trailers = parse_trailers(main.message)
    assert trailers["Kb-Head"] == head and trailers["Kb-Reviewer-Family"] == "kb-deterministic"
    record = _record(main)
    assert record["head"] == head and [r["verdict"] for r in record["reviews"]] == ["approve"]  # type: ignore[attr-defined]
    assert main.tree.id == github.double.bare[head].peel(pygit2.Commit).tree.id  # the change's content reached main


def test_a_repository_that_allows_only_rebase_merges_is_refused(github: ForgeSetup) -> None:
    repo, head = _protected(github)
    github.double.add_check_run(head, "kb-check")
    github.double.allow_merge_commit = github.double.allow_squash_merge = False
    with pytest.raises(ForgeError, match="allows no merge method that keeps kb's merge record"):
        merge_change(repo, "1", github.forge(), build_index=False)
    assert not github.double.pulls[1].merged
