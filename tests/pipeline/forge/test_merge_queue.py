"""The GitHub double's merge queue ("Require merge queue" in a ruleset): a direct merge is
refused (405, kb's merge included), ``enqueuePullRequest`` builds the queue's temporary ref and
sends ``merge_group`` ``checks_requested``; the base moves there only once every required check
passed on that ref, and a failed check takes the pull request out of the queue."""

from __future__ import annotations

import pygit2
import pytest

from kb.repo import Repo
from pipeline.forge.base import ChecksPendingError
from pipeline.forge.changes import merge_change
from pipeline.forge.github import GitHubForge
from tests.forge.github_double import Protection
from tests.pipeline.forge.conftest import TOKENS, ForgeSetup
from tests.pipeline.forge.test_double_protection import PREFIX, _approve, _merge, _pull
from tests.pipeline.forge.test_protected_merge import _protected

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


def test_a_kb_change_reaches_main_through_the_merge_queue(github: ForgeSetup) -> None:
    """kb's merge on a branch requiring the queue (and kb-check, kb/gate, an approval): a direct
    merge would be refused (405), so kb enqueues the approved head and waits while CI runs the
    required checks on the queue's ref (``merge_group``); main moves to the queue's commit."""
    repo, head = _protected(github)
    double = github.double
    double.protection.merge_queue = True
    double.add_check_run(head, "kb-check")
    ci_runs: list[str] = []

    def ci_on_merge_group(_seconds: float) -> None:  # the workflows on merge_group report both checks
        group = next(e["merge_group"] for e in reversed(double.events) if e["action"] == "checks_requested")
        ci_runs.append(group["head_sha"])
        double.add_check_run(group["head_sha"], "kb-check")
        double.api("POST", f"{PREFIX}/statuses/{group['head_sha']}", {}, {"state": "success", "context": "kb/gate"}, "tok-proposer")

    forge = GitHubForge(repo.config.forge, TOKENS, base_delay_s=0.01, sleep=ci_on_merge_group)
    outcome = merge_change(repo, "1", forge, build_index=False, sleep=ci_on_merge_group)
    main = double.bare.references["refs/heads/main"].peel(pygit2.Commit)
    assert str(main.id) == outcome.commit == ci_runs[0] and [str(p.id) for p in main.parents][1] == head
    assert double.pulls[1].merged and not [c for c in double.calls if c.endswith("/merge")]  # no direct merge tried
    assert str(Repo(repo.root).head().id) == outcome.commit


def test_a_queue_that_has_not_merged_yet_is_waiting_for_checks(github: ForgeSetup) -> None:
    repo, head = _protected(github, wait_s=20)
    github.double.protection.merge_queue = True
    github.double.add_check_run(head, "kb-check")
    waits: list[float] = []
    with pytest.raises(ChecksPendingError, match=r"waiting for checks on #1: it is in the merge queue of main"):
        merge_change(repo, "1", GitHubForge(repo.config.forge, TOKENS, sleep=waits.append), build_index=False, sleep=waits.append)
    assert waits == [10.0, 10.0] and [e.pull for e in github.double.queue] == [1] and not github.double.pulls[1].merged
