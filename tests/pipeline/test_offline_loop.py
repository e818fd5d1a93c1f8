"""The whole change loop on the built-in offline agents, with real git repositories."""

from __future__ import annotations

import json

import pygit2
import pytest

from ci.run import run_checks
from kb.errors import ConfigError, GateError
from kb.page import parse_page
from kb.repo import Repo
from pipeline.loop import RunStatus, run_loop
from pipeline.merge import merge_branch
from pipeline.propose import propose
from pipeline.records import ReviewRecord, ReviewSigner, add_review, parse_trailers, reviews_of, status_of
from pipeline.review import review_branch
from pipeline.roles import make_agents
from pipeline.workspace import open_workspace
from tests.agents.scripted import Call, scripted_provider
from tests.builders import add_evidence


def test_run_merges_and_git_alone_tells_the_story(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, ids = sample_repo
    result = run_loop(repo, build_index=False)
    assert result.status is RunStatus.MERGED, result.reason
    merge = repo.head()
    assert len(merge.parents) == 2
    trailers = parse_trailers(merge.message)
    assert set(trailers["Kb-Evidence"].split(", ")) == set(ids.values())
    assert trailers["Kb-Proposer-Family"] == "kb-extractive" and trailers["Kb-Reviewer-Family"] == "kb-deterministic"
    assert trailers["Kb-Verdicts"] == "r1:approve" and trailers["Kb-Rounds"] == "1"
    assert trailers["Kb-Base"] == str(merge.parents[0].id)
    record = json.loads(repo.read_at(merge, trailers["Kb-Review-Record"]))
    assert record["reviews"][0]["head"] == str(merge.parents[1].id) == trailers["Kb-Head"]
    assert reviews_of(repo, trailers["Kb-Head"])[0].verdict == "approve"
    assert run_checks(repo).ok
    assert repo.dirty_paths() == []
    assert not [b for b in repo.git.branches.local if b.startswith("kb/")]


def test_a_newer_statement_closes_the_older_claim_both_cited(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, ids = sample_repo
    run_loop(repo, build_index=False)
    profile = parse_page((repo.root / "users/alice/profile.md").read_text(), "users/alice/profile.md")
    homes = [f for f in profile.meta["facts"] if f["key"] == "home"]
    assert [(f["value"], f.get("valid_to")) for f in homes] == [("Berlin", "2025-06-18"), ("Munich", None)]
    assert homes[0]["source"].startswith(ids["s1"]) and homes[1]["source"].startswith(ids["s2"])
    history = profile.section_text("history")
    assert "Berlin" in history and "no longer current since 2025-06-18" in history


def test_proposing_twice_changes_nothing(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample_repo
    run_loop(repo, build_index=False)
    head = repo.head().id
    again = propose(repo)
    assert again.head is None and again.notes[0].startswith("no new evidence")
    assert repo.head().id == head
    assert not [b for b in repo.git.branches.local if b.startswith("kb/")]


def test_merge_refuses_without_approval_and_with_a_stale_one(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample_repo
    proposal = propose(repo)
    with pytest.raises(GateError, match="never reviewed"):
        merge_branch(repo, proposal.branch, build_index=False)
    assert review_branch(repo, proposal.branch).verdict == "approve"
    workspace = open_workspace(repo, proposal.branch, create=False)
    path = "users/alice/travel.md"
    text = workspace.read_text(path)
    workspace.write_page(path, text.replace("# Alice: travel", "# Alice: travel and trips"))
    workspace.commit("Edit after review")
    with pytest.raises(GateError, match="stale approval"):
        merge_branch(repo, proposal.branch, build_index=False)


def test_merge_refuses_when_checks_fail_even_with_an_approval(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample_repo
    proposal = propose(repo)
    workspace = open_workspace(repo, proposal.branch, create=False)
    path = "users/alice/travel.md"
    workspace.write_page(path, workspace.read_text(path).replace("LH-992-114-07", "LH-992-114-08"))
    head = workspace.commit("Break a quote")
    approval = ReviewRecord(
        proposal.branch,
        head,
        proposal.base,
        1,
        "approve",
        "kb-offline/deterministic",
        "kb-deterministic",
        "kb-offline/extractive",
        "kb-extractive",
        "2025-01-01T00:00:00Z",
    )
    add_review(repo, ReviewSigner(repo).sign(approval))  # a genuine signature: the checks still decide
    with pytest.raises(GateError, match="checks fail"):
        merge_branch(repo, proposal.branch, build_index=False)


def test_merge_refuses_an_approval_from_the_proposers_family(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample_repo
    proposal = propose(repo)
    # main's Reviewer is declared in the proposer's family (make_agents would refuse the pair; a
    # branch proposed before the config changed still meets it at merge)
    config = repo.root / "kb.config.yaml"
    config.write_text(
        config.read_text().replace(
            "  allow_same_family: false", "  reviewer: {model: scripted/r, family: kb-extractive}\n  allow_same_family: false"
        )
    )
    repo.commit_worktree_paths(["kb.config.yaml"], "configure a reviewer\n")
    repo = Repo(repo.root)
    same = ReviewRecord(
        proposal.branch,
        proposal.head,
        proposal.base,
        1,
        "approve",
        "scripted/r",
        "kb-extractive",
        "kb-offline/extractive",
        "kb-extractive",
        "2025-01-01T00:00:00Z",
    )
    add_review(repo, ReviewSigner(repo).sign(same))
    with pytest.raises(GateError, match="proposer's own family"):
        merge_branch(repo, proposal.branch, build_index=False)


def test_same_family_roles_are_refused_unless_allowed(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample_repo
    config = repo.root / "kb.config.yaml"
    text = config.read_text().replace(
        "  allow_same_family: false", "  proposer: {model: openai/gpt-4o}\n  reviewer: {model: gpt-4o-mini}\n  allow_same_family: false"
    )
    config.write_text(text)
    with pytest.raises(ConfigError, match="openai"):
        make_agents(Repo(repo.root).config)
    config.write_text(text.replace("allow_same_family: false", "allow_same_family: true"))
    agents = make_agents(Repo(repo.root).config)
    assert agents.proposer.identity.family == agents.reviewer.identity.family == "openai"


def test_over_deletion_does_not_converge_and_is_marked_needs_human(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, ids = sample_repo
    run_loop(repo, ids=[ids["policy"]], build_index=False)
    # a later change that deletes a supported claim: the offline reviewer refuses, the offline
    # proposer cannot restore it, so the branch is left for a human
    extra = add_evidence(
        repo, b"# Company travel policy\n\n## Hotels\n\nHotels up to 150 EUR per night are allowed.\n", "policy-2.md", "document"
    )

    path = "knowledge/travel-policy.md"
    kept = [line for line in (repo.root / path).read_text().splitlines() if "meal allowance" not in line]
    submit = Call("submit", json.dumps({"title": "Tidy the policy", "rationale": "Shorter.", "evidence_ids": [extra]}))
    # round 1 deletes a supported claim; the revisions change nothing more
    turns = [Call("write_page", json.dumps({"path": path, "content": "\n".join(kept) + "\n"})), submit, submit, submit]
    config = repo.root / "kb.config.yaml"
    config.write_text(
        config.read_text().replace(
            "  allow_same_family: false", "  proposer: {model: scripted/p, family: scripted}\n  allow_same_family: false"
        )
    )
    repo.commit_worktree_paths(["kb.config.yaml"], "configure a scripted proposer\n")
    repo = Repo(repo.root)
    with scripted_provider({"p": turns}):
        result = run_loop(repo, ids=[extra], build_index=False)
    assert result.status is RunStatus.NEEDS_HUMAN
    assert result.reason == "round 1: the Proposer made no change in response to the review"
    assert "over-deletion" in " ".join(c.message for c in result.reviews[0].comments)
    branch_head = repo.git.branches.local[result.proposal.branch].peel(pygit2.Commit)
    assert status_of(repo, str(branch_head.id))["status"] == "needs-human"
    assert parse_trailers(repo.head().message).get("Kb-Evidence", "").find(extra) == -1
