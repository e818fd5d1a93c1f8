"""A re-review after a push answers in the Reviewer's own threads instead of posting the same
comments again, and resolves the threads whose comment it no longer makes; a person's thread is
left alone. GitHub has threads and their resolution only in GraphQL: the double serves
``reviewThreads`` and ``resolveReviewThread`` with GitHub's shapes and errors."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agents.llm import Usage
from agents.schemas import Comment
from ci.gate import GateReport
from kb.errors import ForgeError
from kb.repo import Repo
from pipeline.forge.base import Hunk, LineComment, ReviewThread
from pipeline.forge.changes import comment_text, open_change, plan_review
from pipeline.propose import propose
from pipeline.records import ReviewRecord
from pipeline.review import ReviewResult
from pipeline.workspace import open_workspace
from tests.conftest import CliResult
from tests.forge.github_double import Answer, Thread
from tests.pipeline.forge.conftest import ForgeSetup

Cli = Callable[..., CliResult]
TRAVEL = "users/alice/travel.md"


def _edit(repo: Repo, branch: str, old: str, new: str) -> str:
    workspace = open_workspace(repo, branch, create=False)
    workspace.write_page(TRAVEL, workspace.read_text(TRAVEL).replace(old, new))
    head = workspace.commit(f"Replace {old}")
    assert head is not None
    return head


def test_a_re_review_replies_in_its_threads_and_resolves_what_no_longer_applies(github: ForgeSetup, cli: Cli) -> None:
    repo, double = github.repo, github.double
    branch = propose(repo, [github.ids["s1"]]).branch  # alice's first chat: users/alice/travel.md
    _edit(repo, branch, "LH-992-114-07", "LH-992-114-08")  # a quote the evidence does not say
    assert cli("pr", "open", branch, cwd=repo.root).code == 0
    first = cli("pr", "review", "1")
    assert first.code == 1, first.err
    pull = double.pulls[1]
    posted = len(pull.reviews[0]["_comments"])
    assert posted >= 1 and len(pull.threads) == posted
    main = double.branch_sha("main")
    assert main is not None
    person = Thread("PRRT_person", TRAVEL, 1, main, "---", [{"id": 7, "body": "Why this page?", "_login": "alice"}])
    pull.threads.append(person)

    # a push that does not fix the quote: the same comments, answered in their threads
    head = _edit(repo, branch, 'title: "Alice: travel"', 'title: "Alice: travel notes"')
    assert cli("pr", "open", branch).code == 0
    second = cli("pr", "review", "1")
    assert (
        second.code == 1 and "0 line comment(s)" in second.out and f"earlier threads: {posted} replies, 0 thread(s) resolved" in second.out
    )
    assert pull.reviews[1]["state"] == "CHANGES_REQUESTED" and pull.reviews[1]["_comments"] == []
    assert f"Earlier threads: {posted} still apply (answered there), 0 resolved." in pull.reviews[1]["body"]
    mine = pull.threads[:posted]
    assert len(pull.threads) == posted + 1 and not any(t.resolved for t in pull.threads)
    for thread in mine:
        assert [c["_login"] for c in thread.comments] == ["kb-reviewer", "kb-reviewer"]
        assert thread.comments[1]["in_reply_to_id"] == thread.comments[0]["id"]
        assert thread.comments[1]["body"].startswith(f"Still applies at {head[:10]}")

    # the fix: the Reviewer approves and resolves its threads, never the person's
    _edit(repo, branch, "LH-992-114-08", "LH-992-114-07")
    assert cli("pr", "open", branch).code == 0
    third = cli("pr", "review", "1")
    assert third.code == 0 and f"earlier threads: 0 replies, {posted} thread(s) resolved" in third.out
    assert all(t.resolved for t in mine) and not person.resolved
    assert cli("pr", "merge", "1").code == 0


def test_graphql_refusals_are_one_line_errors(github: ForgeSetup) -> None:
    repo = github.repo
    branch = propose(repo).branch
    forge = github.forge()
    change = open_change(repo, branch, forge).change
    limited = {"errors": [{"type": "RATE_LIMITED", "message": "API rate limit exceeded for user ID 1."}]}
    github.double.fail_next = [Answer(200, limited, {"retry-after": "0"})]
    assert forge.review_threads(change) == []  # GraphQL's rate limit (status 200) is waited out, then retried
    assert github.double.calls[-2:] == ["POST /graphql", "POST /graphql"]
    github.double.fail_next = [Answer(200, limited, {"retry-after": "3600"})]
    with pytest.raises(ForgeError, match=r"API rate limit exceeded for user ID 1") as limit:
        forge.review_threads(change)  # longer than forge.max_wait_s: an error saying so
    assert "rate limit for the reviewer token" in limit.value.hint
    elsewhere = type(forge)(repo.config.forge.model_copy(update={"repository": "acme/other"}), forge.env)
    with pytest.raises(ForgeError, match=r"GraphQL API refused to read the review threads of #1: Could not resolve to a Repository"):
        elsewhere.review_threads(change)
    reader = github.forge(KB_REVIEWER_TOKEN="tok-reader")
    thread = ReviewThread("PRRT_missing", 1, TRAVEL, 1, "x", "kb-reviewer")
    with pytest.raises(ForgeError, match="Could not resolve to a node with the global id of 'PRRT_missing'") as caught:
        reader.resolve(thread)
    assert "$KB_REVIEWER_TOKEN" in caught.value.hint
    with pytest.raises(ForgeError, match=r"reply in a review thread of #1 \(404\): Not Found"):
        forge.reply(change, thread, "still so")


def _review(verdict: str, comments: list[Comment]) -> ReviewResult:
    record = ReviewRecord(
        branch="kb/x", head="a" * 40, base="b" * 40, round=2, verdict=verdict,  # type: ignore[arg-type]
        reviewer_model="m", reviewer_family="f", proposer_model="p", proposer_family="q", at="2025-06-18T12:00:00+00:00",
    )  # fmt: skip
    return ReviewResult("kb/x", "a" * 40, "b" * 40, verdict, "s", tuple(comments), GateReport([], 0), record, Usage())  # type: ignore[arg-type]


def test_plan_review_matches_threads_by_file_and_text_whatever_the_bot_suffix() -> None:
    """The pure decision: GraphQL's ``kb-reviewer`` is REST's ``kb-reviewer[bot]``; a comment made
    again is answered in its thread (outdated or not, saying so), a new one anchored if its line
    is in the diff, else put in the body; the Reviewer's other open threads are resolved."""
    again = Comment(path=TRAVEL, line=20, message="Wrong number.", evidence="ev-1#L6")
    new = Comment(path=TRAVEL, line=5, message="Too vague.")
    outside = Comment(path="kb.config.yaml", line=1, message="Not in the diff.")
    text = comment_text(again.message, "ev-1#L6", "")
    threads = [
        ReviewThread("T1", 11, TRAVEL, None, text, "kb-reviewer", outdated=True),
        ReviewThread("T2", 12, TRAVEL, 9, "Fixed since.", "kb-reviewer"),
        ReviewThread("T3", 13, TRAVEL, 9, "Fixed long ago.", "kb-reviewer", resolved=True),
        ReviewThread("T4", 14, TRAVEL, 5, text, "alice"),
    ]
    plan = plan_review(_review("request_changes", [again, new, outside]), [Hunk(TRAVEL, 1, 30)], threads, "kb-reviewer[bot]")
    assert [(t.id, body) for t, body in plan.replies] == [
        ("T1", f"Still applies at {'a' * 10}, now at line 20 (the line this thread was on has changed since).")
    ]
    assert [t.id for t in plan.resolve] == ["T2"]
    assert plan.submission.comments == (LineComment(TRAVEL, 5, "Too vague."),)
    assert plan.in_body == 1 and "`kb.config.yaml:1`: Not in the diff." in plan.submission.body
    assert "Earlier threads: 1 still apply (answered there), 1 resolved." in plan.submission.body
    unknown = plan_review(_review("approve", []), [], threads, None)  # no reviewer_login: no thread is known to be kb's
    assert unknown.replies == () and unknown.resolve == ()
