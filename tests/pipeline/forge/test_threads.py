"""A re-review after a push answers in the Reviewer's own threads instead of posting the same
comments again, and resolves the threads whose comment it no longer makes; a person's thread is
left alone. GitHub has threads and their resolution only in GraphQL: the double serves
``reviewThreads`` and ``resolveReviewThread`` with GitHub's shapes and errors."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kb.errors import ForgeError
from kb.repo import Repo
from pipeline.forge.base import ReviewThread
from pipeline.propose import propose
from pipeline.workspace import open_workspace
from tests.conftest import CliResult
from tests.forge.github_double import Thread
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
    branch = propose(repo).branch
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
    from pipeline.forge.changes import open_change

    change = open_change(repo, branch, forge).change
    assert forge.review_threads(change) == []
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
