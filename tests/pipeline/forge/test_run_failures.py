"""`kb run` through a pull request when things go wrong meanwhile: a person closes or merges the
pull request, the default branch moves into a conflict (proposed again from the new base, onto
the same pull request), the loop does not converge (the pull request stays open, labelled
needs-human, exit 1 as locally), and a forge that is not configured."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

import ci.gate
from ci.findings import Finding
from ci.rules.grounding import check_page_grounding
from ci.snapshot import Snapshot
from kb.page import Page
from kb.repo import Repo
from kb.scaffold import init_repository
from pipeline.records import parse_trailers, status_of
from tests.conftest import CliResult
from tests.forge.github_double import Pull
from tests.pipeline.forge.conftest import ForgeSetup

Cli = Callable[..., CliResult]
INDEX = "knowledge/index.md"


def test_a_pull_request_a_person_closes_meanwhile_is_not_reopened(github: ForgeSetup, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    double = github.double

    def flag_all(snapshot: Snapshot, page: Page) -> list[Finding]:  # round 1 asks for changes
        found = check_page_grounding(snapshot, page)
        return found + [Finding(page.path, c.line, "grounding.number", f"[^{c.labels[0]}] flagged") for c in page.structure.claims[:1]]  # type: ignore[arg-type]

    monkeypatch.setattr(ci.gate, "check_page_grounding", flag_all)
    double.meanwhile.append(("review", lambda pull: double.close(pull.number)))
    result = cli("run", "--evidence", github.ids["policy"], "--no-index", cwd=github.repo.root)
    assert result.code == 8 and "#1 for the same evidence was closed without merging by a person; kb does not reopen it" in result.err
    pull = double.pulls[1]
    assert pull.state == "closed" and not pull.merged and len(pull.reviews) == 1 and list(double.pulls) == [1]


def test_a_pull_request_a_person_merges_meanwhile_is_left_to_them(github: ForgeSetup, cli: Cli) -> None:
    double = github.double
    double.meanwhile.append(("review", lambda pull: double.merge_as_person(pull.number)))
    result = cli("run", "--evidence", github.ids["policy"], "--no-index", cwd=github.repo.root)
    assert result.code == 8 and "#1 is merged" in result.err and "Traceback" not in result.err
    assert double.pulls[1].merged and len(double.pulls[1].reviews) == 1
    main = double.bare.references["refs/heads/main"].peel(pygit2.Commit)
    assert main.message == "Merge pull request #1\n"  # the person's merge stands; kb made none


def test_a_conflict_with_a_moved_default_branch_is_proposed_again_from_the_new_base(github: ForgeSetup, cli: Cli) -> None:
    double = github.double
    repo = github.repo

    def person_edits_main(pull: Pull) -> None:
        del pull  # the person edits the default branch, not the pull request
        text = double.file_at("main", INDEX)
        assert text is not None
        double.commit_as_person("main", INDEX, text + "Maintained by the travel team.\n", "Note who keeps the index")

    double.meanwhile.append(("review", person_edits_main))
    old_base = double.branch_sha("main")
    result = cli("run", "--evidence", github.ids["policy"], "--no-index", cwd=repo.root)
    assert result.code == 0, result.out + result.err
    assert (
        "round 1: #1 (kb/" in result.out and "conflicts with main, which moved since it was proposed, in knowledge/index.md" in result.out
    )
    assert "proposed again from the new base" in result.out
    pull = double.pulls[1]
    assert list(double.pulls) == [1] and pull.merged  # the same pull request, its head replaced
    first, second = pull.reviews[0]["commit_id"], pull.reviews[1]["commit_id"]
    assert first != second and [r["state"] for r in pull.reviews] == ["DISMISSED", "APPROVED"]  # the push dismissed it
    new_base = double.bare.references["refs/heads/main"].peel(pygit2.Commit).parents[0]
    assert str(new_base.id) != old_base and new_base.message == "Note who keeps the index\n"
    assert double.bare.descendant_of(second, new_base.id) and not double.bare.descendant_of(first, new_base.id)
    merged = double.file_at("main", INDEX)
    assert merged is not None and "Maintained by the travel team." in merged and "[[knowledge/travel-policy]]" in merged
    assert parse_trailers(double.bare.references["refs/heads/main"].peel(pygit2.Commit).message)["Kb-Base"] == str(new_base.id)


def test_no_convergence_leaves_the_pull_request_open_labelled_needs_human(
    github: ForgeSetup, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    def rule_bug(snapshot: Snapshot, page: Page) -> list[Finding]:  # fires on every claim: the revision keeps them
        found = check_page_grounding(snapshot, page)
        return found + [Finding(page.path, c.line, "grounding.negation", f"[^{c.labels[0]}] flagged") for c in page.structure.claims]  # type: ignore[arg-type]

    monkeypatch.setattr(ci.gate, "check_page_grounding", rule_bug)
    result = cli("run", "--forge", "github", "--evidence", github.ids["policy"], "--no-index", cwd=github.repo.root)
    assert result.code == 1, result.out + result.err
    assert "needs-human: round 1: the Proposer made no change in response to the review" in result.out, result.out
    assert "pull request #1 (kb/" in result.out and "left open, labelled needs-human" in result.out
    pull = github.double.pulls[1]
    assert pull.state == "open" and not pull.merged and "needs-human" in pull.labels and "kb" in pull.labels
    assert [(r["state"], r["commit_id"]) for r in pull.reviews] == [("CHANGES_REQUESTED", pull.head_sha)]
    repo = Repo(github.repo.root)
    head = repo.git.branches.local[pull.head].peel()
    assert str(head.id) == pull.head_sha and status_of(repo, str(head.id))["status"] == "needs-human"
    assert github.double.branch_sha("main") == str(repo.head().id)  # nothing merged


def test_the_forge_option_needs_a_configured_forge(cli: Cli, tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    result = cli("run", "--forge", "github", cwd=repo.root)
    assert result.code == 4 and "the GitHub forge needs forge.repository (owner/name) in kb.config.yaml" in result.err
    bad = cli("run", "--forge", "gitlab")
    assert bad.code == 2 and "unknown forge 'gitlab'" in bad.err


def test_the_run_reads_the_config_of_the_default_branch_it_synced(github: ForgeSetup, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A person lowered loop.max_rounds on github.com: the run, synced first, stops after one round."""
    double = github.double
    config = double.file_at("main", "kb.config.yaml")
    assert config is not None and "max_rounds: 3" in config
    double.commit_as_person("main", "kb.config.yaml", config.replace("max_rounds: 3", "max_rounds: 1"), "One round")

    def rule_bug(snapshot: Snapshot, page: Page) -> list[Finding]:
        found = check_page_grounding(snapshot, page)
        return found + [Finding(page.path, c.line, "grounding.negation", f"[^{c.labels[0]}] flagged") for c in page.structure.claims]  # type: ignore[arg-type]

    monkeypatch.setattr(ci.gate, "check_page_grounding", rule_bug)
    result = cli("run", "--evidence", github.ids["policy"], "--no-index", cwd=github.repo.root)
    assert result.code == 1 and "needs-human: not approved after 1 round(s)" in result.out, result.out + result.err
    assert len(double.pulls[1].reviews) == 1


def test_a_push_after_the_approval_is_reviewed_again_before_any_merge(github: ForgeSetup, cli: Cli) -> None:
    """kb itself refuses the stale approval (the PR's head is not the approved one) before asking
    GitHub to merge; the loop reviews the new head and merges that."""
    double = github.double
    policy = "knowledge/travel-policy.md"

    def person_pushes(pull: Pull) -> None:
        text = double.file_at(pull.head, policy)
        assert text is not None
        double.commit_as_person(pull.head, policy, text.replace("title: Company travel policy", "title: Travel policy"), "Shorter title")

    double.meanwhile.append(("review", person_pushes))
    result = cli("run", "--evidence", github.ids["policy"], "--no-index", cwd=github.repo.root)
    assert result.code == 0, result.out + result.err
    pull = double.pulls[1]
    approved, pushed = pull.reviews[0]["commit_id"], pull.reviews[1]["commit_id"]
    assert f"round 1: the approval of {approved[:10]} is stale, refused: #1 moved to {pushed[:10]} after the review" in result.out
    assert [r["state"] for r in pull.reviews] == ["DISMISSED", "APPROVED"] and pull.merged  # the push dismissed the first
    assert "PUT /repos/acme/kb/pulls/1/merge" in double.calls and double.calls.count("PUT /repos/acme/kb/pulls/1/merge") == 1
    main = double.bare.references["refs/heads/main"].peel(pygit2.Commit)
    assert parse_trailers(main.message)["Kb-Head"] == pushed and parse_trailers(main.message)["Kb-Verdicts"] == "r1:approve, r2:approve"
