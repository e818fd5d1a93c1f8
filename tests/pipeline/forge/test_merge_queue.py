"""The GitHub double's merge queue ("Require merge queue" in a ruleset): a direct merge is
refused (405, kb's merge included), ``enqueuePullRequest`` builds the queue's temporary ref and
sends ``merge_group`` ``checks_requested``; the base moves there only once every required check
passed on that ref, and a failed check takes the pull request out of the queue."""

from __future__ import annotations

import pygit2
import pytest

from kb.errors import ForgeError
from pipeline.forge.changes import merge_change, open_change, review_change
from pipeline.propose import propose
from tests.forge.github_double import Protection
from tests.pipeline.forge.conftest import ForgeSetup
from tests.pipeline.forge.test_double_protection import PREFIX, _approve, _merge, _pull

ENQUEUE = "mutation($id: ID!, $head: GitObjectID) { enqueuePullRequest(input: {pullRequestId: $id, expectedHeadOid: $head}) { mergeQueueEntry { id position state } } }"
REQUIRED = ("kb-check", "kb/gate")


def _enqueue(github: ForgeSetup, number: int, head: str | None = None) -> dict[str, object]:
    variables = {"pullRequestId": f"PR_{number}", "expectedHeadOid": head}
    answer = github.double.graphql({"query": ENQUEUE, "variables": variables}, "tok-person")
    assert answer.status == 200
    return dict(answer.body)


def _ready(github: ForgeSetup) -> tuple[int, str]:
    """A person's pull request, approved, its required checks passed on its head."""
    double = github.double
    double.add_token("tok-person", "alice")
    double.protection = Protection(required_contexts=REQUIRED, merge_queue=True)
    number = _pull(github)
    head = double.pulls[number].head_sha
    _approve(github, number)
    double.add_check_run(head, "kb-check")
    double.api("POST", f"{PREFIX}/statuses/{head}", {}, {"state": "success", "context": "kb/gate"}, "tok-reviewer")
    return number, head


def test_a_pull_request_merges_through_the_queue_after_the_checks_on_its_ref(github: ForgeSetup) -> None:
    double = github.double
    number, head = _ready(github)
    main_before = double.branch_sha("main")
    assert _merge(github, number) == (405, "Changes must be made through the merge queue")
    rules = double.api("GET", f"{PREFIX}/rules/branches/main", {}, {}, "tok-person").body
    assert rules[-1]["type"] == "merge_queue" and rules[-1]["parameters"]["merge_method"] == "MERGE"
    stale = _enqueue(github, number, "0" * 40)
    assert stale["data"] == {"enqueuePullRequest": None} and "Head ref was modified" in stale["errors"][0]["message"]  # type: ignore[index]
    queued = _enqueue(github, number, head)
    assert queued["data"] == {"enqueuePullRequest": {"mergeQueueEntry": {"id": f"MQE_{number}", "position": 1, "state": "AWAITING_CHECKS"}}}
    event = double.events[-1]
    group = event["merge_group"]
    assert (event["action"], group["base_sha"], group["base_ref"]) == ("checks_requested", main_before, "refs/heads/main")
    assert group["head_ref"] == f"refs/heads/gh-readonly-queue/main/pr-{number}-{main_before}"
    queue_commit = double.bare[group["head_sha"]].peel(pygit2.Commit)
    assert [str(p.id) for p in queue_commit.parents] == [main_before, head]
    double.add_check_run(group["head_sha"], "kb-check")
    assert double.branch_sha("main") == main_before and not double.pulls[number].merged  # kb/gate not yet on the queue's ref
    double.api("POST", f"{PREFIX}/statuses/{group['head_sha']}", {}, {"state": "success", "context": "kb/gate"}, "tok-reviewer")
    double.api("GET", f"{PREFIX}/pulls/{number}", {}, {}, "tok-person")
    assert double.branch_sha("main") == group["head_sha"] and double.pulls[number].merged
    assert double.events[-1]["action"] == "destroyed" and double.events[-1]["reason"] == "merged"
    assert group["head_ref"] not in double.bare.references and double.file_at("main", "evidence/bob.md") is not None


def test_a_failed_check_on_the_queue_ref_takes_the_pull_request_out(github: ForgeSetup) -> None:
    double = github.double
    number, _ = _ready(github)
    main_before = double.branch_sha("main")
    _enqueue(github, number)
    sha = double.events[-1]["merge_group"]["head_sha"]
    double.add_check_run(sha, "kb-check", conclusion="failure")
    assert double.queue == [] and double.events[-1]["reason"] == "dequeued"
    assert double.branch_sha("main") == main_before and not double.pulls[number].merged


def test_a_pull_request_without_its_checks_cannot_enter_the_queue(github: ForgeSetup) -> None:
    double = github.double
    double.add_token("tok-person", "alice")
    double.protection = Protection(required_contexts=REQUIRED, merge_queue=True)
    number = _pull(github)
    _approve(github, number)
    refused = _enqueue(github, number)
    assert refused["errors"][0]["message"] == "2 of 2 required status checks are expected."  # type: ignore[index]
    assert double.queue == []


def test_kbs_direct_merge_is_refused_by_a_merge_queue_rule(github: ForgeSetup) -> None:
    """The rule that refuses kb today: a branch requiring the merge queue answers kb's merge 405."""
    github.double.protection = Protection(required_contexts=("kb/gate",), merge_queue=True)
    repo = github.repo
    proposal = propose(repo)
    open_change(repo, proposal.branch, github.forge())
    assert review_change(repo, "1", github.forge()).review.verdict == "approve"
    with pytest.raises(ForgeError, match=r"\(405\): Changes must be made through the merge queue"):
        merge_change(repo, "1", github.forge(), build_index=False)
    assert not github.double.pulls[1].merged
