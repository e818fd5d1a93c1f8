"""The whole pull-request loop against the GitHub test double over loopback (real git smart-HTTP,
the REST subset with GitHub's rules), through the `kb` CLI: open (twice: one PR), request changes
with line comments, a blocked and a stale merge, the revision on the same PR, approve, merge,
search at the merged commit."""

from __future__ import annotations

import json
from collections.abc import Callable

import pygit2
import pytest

from kb.errors import StaleApprovalError
from kb.repo import Repo
from pipeline.forge.authority import record_in
from pipeline.propose import propose
from pipeline.records import parse_trailers, reviews_of
from pipeline.workspace import open_workspace
from tests.conftest import CliResult
from tests.pipeline.forge.conftest import ForgeSetup

Cli = Callable[..., CliResult]
TRAVEL = "users/alice/travel.md"


def _edit(repo: Repo, branch: str, old: str, new: str, message: str) -> str:
    workspace = open_workspace(repo, branch, create=False)
    workspace.write_page(TRAVEL, workspace.read_text(TRAVEL).replace(old, new))
    head = workspace.commit(message)
    assert head is not None
    return head


def test_the_pull_request_loop_from_evidence_to_search(github: ForgeSetup, cli: Cli) -> None:  # noqa: PLR0915 (one story, told in order)
    repo, double = github.repo, github.double
    proposal = propose(repo)
    assert proposal.head is not None
    branch = proposal.branch

    first = cli("pr", "open", branch, cwd=repo.root)
    again = cli("pr", "open", branch)
    assert first.code == 0 and first.out.startswith("opened #1"), first.err
    assert again.code == 0 and again.out.startswith("updated #1"), again.err
    assert list(double.pulls) == [1]  # twice: one pull request
    pull = double.pulls[1]
    assert pull.head_sha == proposal.head == double.branch_sha(branch)
    assert sorted(pull.labels) == ["kb", "scope:knowledge", "scope:user:alice"]
    for evidence in proposal.evidence_ids:
        assert f"`{evidence}`" in pull.body
    assert "kb-offline/extractive" in pull.body and "| added | `users/alice/travel.md:" in pull.body
    assert "passed:" in pull.body
    assert double.statuses[proposal.head][0]["context"] == "kb/gate" and double.statuses[proposal.head][0]["state"] == "success"

    # a broken quote: the Reviewer requests changes with a line comment on the page line
    broken = _edit(repo, branch, "LH-992-114-07", "LH-992-114-08", "Break a quote")
    assert cli("pr", "open", branch).out.startswith("updated #1")
    assert double.pulls[1].reviews == [] and double.branch_sha(branch) == broken
    review = cli("pr", "review", "1")
    assert review.code == 1 and "request_changes" in review.out, review.err
    posted = double.pulls[1].reviews[-1]
    assert posted["state"] == "CHANGES_REQUESTED" and posted["commit_id"] == broken and posted["_login"] == "kb-reviewer"
    assert posted["_comments"] and all(c["path"] == TRAVEL for c in posted["_comments"])
    assert record_in(posted["body"], "test").verdict == "request_changes"
    assert reviews_of(repo, broken)[-1].verdict == "request_changes"  # the verdict is kept in git too

    blocked = cli("pr", "merge", "1")
    assert blocked.code == 11 and "a required check failed on #1" in blocked.err and "kb/gate (failure)" in blocked.err

    # the revision goes to the same pull request; the old verdict is stale, GitHub refuses the old head
    fixed = _edit(repo, branch, "LH-992-114-08", "LH-992-114-07", "Restore the quote")
    assert cli("pr", "open", branch).out.startswith("updated #1")
    stale = cli("pr", "merge", "1")
    assert stale.code == 11 and "stale" in stale.err
    change = github.forge().get_change("1")
    with pytest.raises(StaleApprovalError, match=r"\(409\): Head branch was modified"):
        github.forge().merge(change, broken, "t", "m")

    approve = cli("pr", "review", "1")
    assert approve.code == 0 and f"0 replies, {len(posted['_comments'])} thread(s) resolved" in approve.out, approve.out
    assert all(t.resolved for t in double.pulls[1].threads)  # the quote is fixed: its threads are resolved
    assert "approved" in cli("pr", "status", "1").out
    merged = cli("pr", "merge", "1")
    assert merged.code == 0 and merged.out.startswith("merged #1"), merged.err

    main = double.bare.references["refs/heads/main"].peel(pygit2.Commit)
    assert [str(p.id) for p in main.parents][1] == fixed
    trailers = parse_trailers(main.message)
    assert trailers["Kb-Head"] == fixed and trailers["Kb-Reviewer-Family"] == "kb-deterministic"
    assert trailers["Kb-Proposer-Family"] == "kb-extractive" and trailers["Kb-Verdicts"] == "r1:request_changes, r1:approve"
    record = json.loads(main.message.split("Kb-Merge-Record (JSON):\n", 1)[1].split("\n\n", 1)[0])
    assert record["head"] == fixed and [r["verdict"] for r in record["reviews"]] == ["request_changes", "approve"]
    assert str(Repo(repo.root).head().id) == str(main.id)  # main synced after the merge
    assert double.branch_sha(branch) is None and branch not in Repo(repo.root).git.branches.local

    assert cli("sync").code == 0
    found = cli("search", "travel desk 14 days", "--as", "system")
    assert found.code == 0 and "[page] knowledge/travel-policy ›" in found.out
    assert cli("pr", "list").out.strip() == "no open kb pull requests"
