"""The GitHub test double's branch protection and the answers that break a client on real GitHub:
required checks (statuses or check runs), required review, "not up to date", merge methods and
linear history, ``mergeable: null`` while computing, dismissal on push, secondary rate limits
with ``Retry-After``, ``Link`` pagination."""

from __future__ import annotations

import pygit2
import pytest

from kb.errors import ForgeError
from kb.repo import Repo
from pipeline.forge.remote import GitRemote
from tests.builders import commit
from tests.forge.github_double import Protection
from tests.pipeline.forge.conftest import ForgeSetup

PREFIX = "/repos/acme/kb"


def _pull(github: ForgeSetup, branch: str = "person/evidence") -> int:
    """A person's branch with one evidence file, pushed and opened as a pull request."""
    double = github.double
    double.bare.branches.local.create(branch, double.bare.references["refs/heads/main"].peel())
    double.commit_as_person(branch, "evidence/bob.md", "Bob moved to Lyon.\n", "Add evidence")
    answer = github.double.api("POST", f"{PREFIX}/pulls", {}, {"head": branch, "base": "main", "title": "t"}, "tok-person")
    assert answer.status == 201, answer.body
    return int(answer.body["number"])


def _merge(github: ForgeSetup, number: int, method: str = "merge") -> tuple[int, str]:
    answer = github.double.api("PUT", f"{PREFIX}/pulls/{number}/merge", {}, {"merge_method": method}, "tok-person")
    return answer.status, str(answer.body.get("message", ""))


def _approve(github: ForgeSetup, number: int) -> None:
    answer = github.double.api("POST", f"{PREFIX}/pulls/{number}/reviews", {}, {"event": "APPROVE"}, "tok-reviewer")
    assert answer.status == 200, answer.body


def test_required_checks_review_and_methods_are_enforced(github: ForgeSetup) -> None:
    double = github.double
    double.add_token("tok-person", "alice")
    double.protection = Protection(required_contexts=("kb-check", "kb/gate"), linear_history=True)
    number = _pull(github)
    head = double.pulls[number].head_sha
    assert double.api("GET", f"{PREFIX}/pulls/{number}", {}, {}, "tok-person").body["mergeable"] is None  # computing
    assert double.api("GET", f"{PREFIX}/pulls/{number}", {}, {}, "tok-person").body["mergeable"] is True
    assert _merge(github, number, "squash") == (405, "At least 1 approving review is required by reviewers with write access.")
    _approve(github, number)
    assert _merge(github, number, "squash") == (405, "2 of 2 required status checks are expected.")
    double.add_check_run(head, "kb-check", status="in_progress")
    assert _merge(github, number, "squash") == (405, "2 of 2 required status checks are expected.")  # running: not there yet
    double.api("POST", f"{PREFIX}/statuses/{head}", {}, {"state": "success", "context": "kb/gate"}, "tok-reviewer")
    assert _merge(github, number, "squash") == (405, 'Required status check "kb-check" is expected.')
    double.add_check_run(head, "kb-check")
    assert _merge(github, number)[0] == 405  # linear history: no merge commit
    double.allow_squash_merge = False
    assert _merge(github, number, "squash") == (405, "Squash merges are not allowed on this repository.")
    status, _ = _merge(github, number, "rebase")
    assert status == 200
    main = double.bare.references["refs/heads/main"].peel()
    assert len(main.parents) == 1 and double.file_at("main", "evidence/bob.md") is not None
    rules = double.api("GET", f"{PREFIX}/rules/branches/main", {}, {}, "tok-person").body
    assert [r["type"] for r in rules] == ["required_status_checks", "pull_request", "required_linear_history"]
    assert double.api("GET", PREFIX, {}, {}, "tok-person").body["allow_squash_merge"] is False


def test_strict_checks_a_push_dismissal_and_a_second_pull_for_the_head(github: ForgeSetup) -> None:
    double = github.double
    double.add_token("tok-person", "alice")
    double.protection = Protection(required_contexts=("kb/gate",), strict=True)
    number = _pull(github)
    again = double.api("POST", f"{PREFIX}/pulls", {}, {"head": "person/evidence", "base": "main"}, "tok-person")
    assert again.status == 422 and "already exists" in again.body["errors"][0]["message"]
    _approve(github, number)
    branch = double.pulls[number].head
    moved = double.commit_as_person(branch, "notes.txt", "x\n", "A push")
    double.api("GET", f"{PREFIX}/pulls/{number}", {}, {}, "tok-person")
    assert [r["state"] for r in double.pulls[number].reviews] == ["DISMISSED"]
    assert str(double.bare.references[f"refs/pull/{number}/head"].target) == moved
    _approve(github, number)
    double.api("POST", f"{PREFIX}/statuses/{moved}", {}, {"state": "success", "context": "kb/gate"}, "tok-reviewer")
    double.commit_as_person("main", "other.txt", "y\n", "main moves")
    assert _merge(github, number) == (405, "Head branch is not up to date with the base branch.")


def test_secondary_rate_limit_is_waited_and_lists_carry_link_headers(github: ForgeSetup) -> None:
    double = github.double
    head = str(github.repo.head().id)
    for n in range(3):
        double.add_check_run(head, f"job-{n}")
    page = double.api("GET", f"{PREFIX}/commits/{head}/check-runs", {"per_page": ["2"]}, {}, "tok-proposer")
    assert page.body["total_count"] == 3 and len(page.body["check_runs"]) == 2
    assert 'rel="next"' in page.headers["Link"] and "page=2" in page.headers["Link"]
    double.secondary_rate_limit(retry_after=0)
    checks = github.forge().checks(head)  # githubkit parses the check runs; the 403 with Retry-After is retried
    assert checks.states == {"job-0": "success", "job-1": "success", "job-2": "success"}
    assert double.calls.count(f"GET {PREFIX}/commits/{head}/status") == 2


def test_an_app_token_without_checks_read_is_refused_the_check_runs(github: ForgeSetup) -> None:
    """An installation token with contents, pull requests and statuses but no ``checks: read``:
    GitHub answers 403 on check runs (naming the permission), and kb says which permission."""
    double = github.double
    app = {"contents": "write", "pull_requests": "write", "statuses": "write", "metadata": "read"}
    double.add_token("tok-app", "kb-proposer[bot]", permissions=app)
    head = str(github.repo.head().id)
    refused = double.api("GET", f"{PREFIX}/commits/{head}/check-runs", {}, {}, "tok-app")
    assert refused.status == 403 and refused.body["message"] == "Resource not accessible by integration"
    assert refused.headers["x-accepted-github-permissions"] == "checks=read"
    assert double.api("GET", f"{PREFIX}/commits/{head}/status", {}, {}, "tok-app").status == 200
    with pytest.raises(ForgeError, match=r"read the checks of \w+ \(403\): Resource not accessible by integration") as caught:
        github.forge(KB_PROPOSER_TOKEN="tok-app").checks(head)
    assert "permissions docs/github.md lists" in (caught.value.hint or "")
    reader = {"contents": "read", "pull_requests": "read", "checks": "read", "statuses": "read"}
    double.add_token("tok-ro-app", "kb-reader[bot]", permissions=reader)
    assert github.forge(KB_PROPOSER_TOKEN="tok-ro-app").checks(head).states == {}
    merge = double.api("PUT", f"{PREFIX}/pulls/1/merge", {}, {}, "tok-ro-app")
    assert merge.status == 403 and merge.headers["x-accepted-github-permissions"] == "contents=write"


def test_a_push_to_the_protected_branch_is_refused_unless_the_pusher_may_bypass(github: ForgeSetup) -> None:
    """GitHub refuses a push to a branch whose rules require pull requests or status checks
    (GH006, the pre-receive hook) from anyone not on the bypass list; other branches take pushes."""
    double, repo = github.double, github.repo
    double.add_token("tok-admin", "octo-admin")
    before = double.branch_sha("main")
    commit(repo, {"knowledge/note.md": "# Note\n"})
    double.protection = Protection(required_contexts=("kb-check", "kb/gate"), push_bypass=("octo-admin",))
    with pytest.raises(ForgeError, match="failed") as refused:
        GitRemote(repo.root, "origin", "tok-proposer").push_branch("main", force=False)
    assert "GH006: Protected branch update failed for refs/heads/main." in str(refused.value)
    assert "Changes must be made through a pull request." in str(refused.value)
    assert double.branch_sha("main") == before  # nothing moved
    double.protection = Protection(required_contexts=("kb/gate",), required_approvals=0, push_bypass=())
    with pytest.raises(ForgeError):
        GitRemote(repo.root, "origin", "tok-proposer").push_branch("main", force=False)  # status checks alone refuse it too
    head = Repo(repo.root).head()
    assert head is not None
    repo.git.branches.local.create("person/side", repo.git[head.id].peel(pygit2.Commit))
    GitRemote(repo.root, "origin", "tok-proposer").push_branch("person/side", force=False)  # any other branch: pushed
    assert double.branch_sha("person/side") == str(head.id)
    double.protection = Protection(required_contexts=("kb-check", "kb/gate"), push_bypass=("octo-admin",))
    GitRemote(repo.root, "origin", "tok-admin").push_branch("main", force=False)  # the bypass list's admin
    assert double.branch_sha("main") == str(head.id)
