"""`kb run` through pull requests against the GitHub test double over loopback (real git smart-HTTP,
GitHub's rules): evidence -> PR with its body -> gate status -> request changes with line
comments -> the revision pushed to the same PR -> an approval made stale by a push, refused ->
approve -> merge through the API -> `kb sync` -> `kb search` at the merged commit. Once with the
offline agents, once with models scripted through litellm's provider interface."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pygit2
import pytest

import ci.gate
from ci.findings import Finding
from ci.rules.grounding import check_page_grounding
from ci.snapshot import Snapshot
from kb.page import Page
from kb.repo import Repo
from pipeline.forge.authority import record_in
from pipeline.forge.remote import GitRemote
from pipeline.records import parse_trailers
from tests.agents.scripted import Call, scripted_provider
from tests.conftest import CliResult
from tests.forge.github_double import GitHubDouble, Pull
from tests.integration.test_model_loop import MODELS, food_page, proposer_turns, submit, verdict
from tests.pipeline.forge.conftest import ForgeSetup

Cli = Callable[..., CliResult]
POLICY = "knowledge/travel-policy.md"
FLAGGED = "Receipts must be submitted"


def _flag_receipts(snapshot: Snapshot, page: Page) -> list[Finding]:
    """The gate's grounding, plus one finding on the receipts claim (a failure injected for the test)."""
    found = check_page_grounding(snapshot, page)
    for claim in page.structure.claims:
        if FLAGGED in claim.text:
            found.append(Finding(page.path, claim.line, "grounding.number", f"[^{claim.labels[0]}] flagged for the test"))  # type: ignore[arg-type]
    return found


def _push_after_the_approval(double: GitHubDouble, path: str, old: str, new: str) -> None:
    """A person edits the pull request's branch on github.com just as kb merges the approved head."""

    def edit(pull: Pull) -> None:
        text = double.file_at(pull.head, path)
        assert text is not None and old in text
        double.commit_as_person(pull.head, path, text.replace(old, new, 1), "Edit on github.com")

    double.meanwhile.append(("merge", edit))


def _reviews(pull: Pull) -> list[tuple[str, str, int]]:
    return [(r["state"], r["commit_id"], len(r["_comments"])) for r in pull.reviews]


def _merged_main(double: GitHubDouble) -> pygit2.Commit:
    return double.bare.references["refs/heads/main"].peel(pygit2.Commit)


def test_kb_run_through_a_pull_request_with_the_offline_agents(github: ForgeSetup, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, double = github.repo, github.double
    monkeypatch.setattr(ci.gate, "check_page_grounding", _flag_receipts)
    _push_after_the_approval(double, POLICY, "title: Company travel policy", "title: Company travel policy (2025)")

    result = cli("run", "--forge", "github", "--no-index", cwd=repo.root)
    assert result.code == 0, result.out + result.err
    assert list(double.pulls) == [1]  # one pull request for the whole run, revisions included
    pull = double.pulls[1]
    assert pull.merged and "pull request #1 " in result.out and "merged #1 as " in result.out
    for evidence in github.ids.values():
        assert f"`{evidence}`" in pull.body
    assert sorted(pull.labels) == ["kb", "scope:knowledge", "scope:user:alice"]

    (first, first_at, comments), (approved, stale_at, _), (again, head, _) = _reviews(pull)
    assert (first, approved, again) == ("CHANGES_REQUESTED", "DISMISSED", "APPROVED")  # a push dismissed the stale one
    assert comments >= 1 and all(c["path"] == POLICY for c in pull.reviews[0]["_comments"])
    assert "flagged for the test" in pull.reviews[0]["_comments"][0]["body"]
    assert record_in(pull.reviews[0]["body"], "test").verdict == "request_changes"
    assert len({first_at, stale_at, head}) == 3  # the revision, then the person's push, moved the head
    assert double.statuses[first_at][0]["state"] == "failure" and double.statuses[head][0]["state"] == "success"
    assert all(t.resolved for t in pull.threads)  # the withdrawn claim's thread is resolved on approval
    assert (
        f"round 2: the approval of {stale_at[:10]} is stale, refused: GitHub refused to merge #1 (409): Head branch was modified"
        in result.out
    )

    main = _merged_main(double)
    assert str(main.parents[1].id) == head and pull.merge_sha == str(main.id)
    trailers = parse_trailers(main.message)
    assert trailers["Kb-Head"] == head and trailers["Kb-Verdicts"] == "r1:request_changes, r2:approve, r3:approve"
    assert str(Repo(repo.root).head().id) == str(main.id)
    policy = double.file_at("main", POLICY)
    assert policy is not None and FLAGGED not in policy and "(2025)" in policy

    assert cli("sync").code == 0
    found = cli("search", "travel desk 14 days", "--as", "system")
    assert found.code == 0 and "[page] knowledge/travel-policy ›" in found.out
    assert cli("pr", "list").out.strip() == "no open kb pull requests"


def _use_scripted_models(github: ForgeSetup) -> Repo:
    repo = github.repo
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text().replace("  allow_same_family: false", MODELS + "  allow_same_family: false"))
    repo.commit_worktree_paths(["kb.config.yaml"], "configure scripted models\n")
    GitRemote(repo.root, "origin", "tok-proposer").push_branch("main")
    return Repo(repo.root)


def test_kb_run_through_a_pull_request_with_scripted_models(github: ForgeSetup, cli: Cli) -> None:
    repo, double, ev = _use_scripted_models(github), github.double, github.ids["s1"]
    food = "users/alice/food.md"
    line = food_page(ev).splitlines().index("- Alice is vegetarian.[^2]") + 1
    comment = Call("comment", json.dumps({"path": food, "line": line, "message": "Say when she said it.", "evidence": f"{ev}#L5"}))
    fix = Call(
        "edit_page", json.dumps({"path": food, "old": "- Alice is vegetarian.[^2]", "new": "- Alice is vegetarian (she said so).[^2]"})
    )
    _push_after_the_approval(double, food, "title: Alice's food and drink", "title: Alice's food and drinks")
    turns: dict[str, list[Any]] = {
        "proposer": [*proposer_turns(ev), fix, submit(ev)],
        "reviewer": [comment, verdict("request_changes", "One qualifier missing."), verdict("approve"), verdict("approve")],
    }
    with scripted_provider(turns) as llm:
        result = cli("run", "--evidence", ev, "--no-index", cwd=repo.root)  # the configured forge: github
    assert result.code == 0, result.out + result.err
    assert llm.remaining("proposer") == llm.remaining("reviewer") == 0

    pull = double.pulls[1]
    assert list(double.pulls) == [1] and pull.merged
    assert [state for state, _, _ in _reviews(pull)] == ["CHANGES_REQUESTED", "DISMISSED", "APPROVED"]
    posted = pull.reviews[0]["_comments"]
    assert [(c["path"], c["line"]) for c in posted] == [(food, line)]
    assert "Say when she said it." in posted[0]["body"] and f"`{ev}#L5`" in posted[0]["body"]
    assert "scripted/proposer" in pull.body and "scripted-a" in pull.body and "`users/alice/food.md`" in pull.body
    assert all(t.resolved for t in pull.threads)
    revision_prompt = json.dumps(llm.requests_for("proposer")[5].messages)
    assert "Say when she said it." in revision_prompt

    main = _merged_main(double)
    trailers = parse_trailers(main.message)
    assert trailers["Kb-Proposer-Model"] == "scripted/proposer" and trailers["Kb-Reviewer-Family"] == "scripted-b"
    assert trailers["Kb-Verdicts"] == "r1:request_changes, r2:approve, r3:approve"
    page = double.file_at("main", food)
    assert page is not None and "she said so" in page and "food and drinks" in page

    assert cli("sync").code == 0
    found = cli("search", "vegetarian", "--as", "user:alice")
    assert found.code == 0 and "users/alice/food" in found.out
