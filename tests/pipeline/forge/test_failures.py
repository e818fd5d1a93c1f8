"""The forge's failures against the GitHub test double: each one line quoting GitHub, saying what to
do, with exit 18 (ForgeError) or the refusal's own code; retries on 5xx and on rate limits."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import pytest

from kb.errors import ConflictError, ForgeError
from kb.repo import Repo
from pipeline.forge.base import LineComment, ReviewSubmission
from pipeline.forge.changes import open_change
from pipeline.forge.github import GitHubForge
from pipeline.propose import propose
from tests.conftest import CliResult
from tests.forge.github_double import Answer, Pull
from tests.pipeline.forge.conftest import TOKENS, ForgeSetup

Cli = Callable[..., CliResult]


def test_no_token_names_the_variable(github: ForgeSetup, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    branch = propose(github.repo).branch
    monkeypatch.delenv("KB_PROPOSER_TOKEN")
    result = cli("pr", "open", branch, cwd=github.repo.root)
    assert result.code == 18 and "environment variable KB_PROPOSER_TOKEN is not set" in result.err
    assert github.double.pulls == {}


@pytest.mark.parametrize(
    ("change", "status", "quoted"),
    [
        ({"repository": "acme/other"}, 404, "Not Found"),
        ({}, 403, "Resource not accessible by personal access token"),
    ],
)
def test_wrong_repository_and_missing_permission(github: ForgeSetup, change: dict[str, str], status: int, quoted: str) -> None:
    branch = propose(github.repo).branch
    config = github.repo.config.forge.model_copy(update=change)
    env = TOKENS if change else TOKENS | {"KB_PROPOSER_TOKEN": "tok-reader"}
    forge = GitHubForge(config, env, base_delay_s=0.01)
    with pytest.raises(ForgeError) as caught:
        open_change(github.repo, branch, forge)
    assert f"({status}): {quoted}" in caught.value.message
    assert ("forge.repository (acme/other)" if status == 404 else "permissions docs/github.md lists") in caught.value.hint


def test_a_bad_token_is_401_with_what_to_do(github: ForgeSetup) -> None:
    forge = github.forge(KB_PROPOSER_TOKEN="expired")
    with pytest.raises(ForgeError, match=r"\(401\): Bad credentials") as caught:
        forge.find_changes()
    assert "set $KB_PROPOSER_TOKEN to a valid token" in caught.value.hint


def test_rate_limit_and_server_errors_are_retried_then_succeed(github: ForgeSetup) -> None:
    reset = str(int(time.time()) + 1)
    github.double.fail_next = [
        Answer(403, {"message": "API rate limit exceeded for user"}, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}),
        Answer(502, {"message": "Server Error"}),
    ]
    assert github.forge().find_changes() == []
    assert github.double.calls == ["GET /repos/acme/kb/pulls"] * 3


def test_a_rate_limit_longer_than_the_wait_allowed_is_an_error(github: ForgeSetup) -> None:
    github.double.fail_next = [Answer(429, {"message": "API rate limit exceeded"}, {"retry-after": "3600"})]
    with pytest.raises(ForgeError, match=r"\(429\): API rate limit exceeded") as caught:
        github.forge().find_changes()
    assert "rate limit" in caught.value.hint and len(github.double.calls) == 1


def test_a_pull_request_a_person_closed_is_not_reopened_nor_reviewed(github: ForgeSetup, cli: Cli) -> None:
    branch = propose(github.repo).branch
    assert cli("pr", "open", branch, cwd=github.repo.root).code == 0
    github.double.close(1)
    again = cli("pr", "open", branch)
    assert again.code == 8 and "closed without merging by a person" in again.err
    review = cli("pr", "review", "1")
    assert review.code == 8 and "#1 is closed" in review.err
    assert list(github.double.pulls) == [1] and github.double.pulls[1].reviews == []


def test_a_pull_request_not_made_by_kb_is_refused(github: ForgeSetup, cli: Cli) -> None:
    double = github.double
    main = double.branch_sha("main")
    assert main is not None
    double.pulls[7] = Pull(7, "A person's change", "", "feature", "main", "alice", main)
    for command in (("pr", "review", "7"), ("pr", "merge", "7")):
        result = cli(*command, cwd=github.repo.root)
        assert result.code == 18 and "#7 (feature) was not made by kb" in result.err


def test_the_limit_on_open_kb_pull_requests(github: ForgeSetup) -> None:
    config = github.repo.root / "kb.config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "  max_open_prs: 1\n", encoding="utf-8")
    github.repo.commit_worktree_paths(["kb.config.yaml"], "One open kb pull request at a time")
    repo, ids = Repo(github.repo.root), github.ids
    first = propose(repo, [ids["policy"]]).branch
    second = propose(repo, [ids["s1"]]).branch
    forge = GitHubForge(repo.config.forge, TOKENS)
    open_change(repo, first, forge)
    with pytest.raises(ConflictError, match=r"1 kb pull requests are open already \(forge.max_open_prs is 1\)"):
        open_change(repo, second, forge)
    assert list(github.double.pulls) == [1]


def test_github_rules_of_the_double_reach_the_user(github: ForgeSetup) -> None:
    """A comment outside the diff rejects the whole review; nobody approves their own PR."""
    branch = propose(github.repo).branch
    forge = github.forge()
    change = open_change(github.repo, branch, forge).change
    outside = ReviewSubmission("request_changes", "see the comment", (LineComment("kb.config.yaml", 1, "not in the diff"),))
    with pytest.raises(ForgeError, match=r"\(422\): Unprocessable Entity \(Pull request review thread line must be part of the diff\)"):
        forge.submit_review(change, outside)
    self_approval = github.forge(KB_REVIEWER_TOKEN="tok-proposer")
    with pytest.raises(ForgeError, match="Can not approve your own pull request"):
        self_approval.submit_review(change, ReviewSubmission("approve", "fine"))
    with pytest.raises(ForgeError, match="Body is required when using REQUEST_CHANGES"):
        forge.submit_review(change, ReviewSubmission("request_changes", ""))
    assert github.double.pulls[1].reviews == []
    with pytest.raises(ForgeError, match=r"\(405\): At least 1 approving review is required"):
        forge.merge(replace(change), change.head, "t", "m")
