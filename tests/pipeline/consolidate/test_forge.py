"""Consolidation through the GitHub forge (the test double on loopback): each batch's branch is
a pull request opened, reviewed (a revision round on the same pull request) and merged on the
forge, with the coverage record pushed to ``refs/kb/consolidation`` (main, protected with no
bypass for kb, changes only by the merges); the same inputs never open a second pull
request, and one a person closed is not reopened, not even by the next cycle."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pygit2
import pytest

from kb.repo import Repo
from pipeline.consolidate.cycle import run_consolidation
from pipeline.consolidate.record import current_cycle
from pipeline.consolidate.status import cycle_status
from pipeline.forge.remote import GitRemote
from tests.builders import commit, index_text
from tests.forge.github_double import GitHubDouble
from tests.pipeline.consolidate.test_revision import FOLDER, TODAY, seed
from tests.pipeline.forge.conftest import TOKENS, forge_config


@pytest.fixture
def double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHubDouble]:
    server = GitHubDouble(tmp_path / "github").start()
    server.add_token("tok-proposer", "kb-proposer")
    server.add_token("tok-reviewer", "kb-reviewer")
    for name, value in TOKENS.items():
        monkeypatch.setenv(name, value)
    try:
        yield server
    finally:
        server.stop()


def on_forge(root: Path, double: GitHubDouble, max_rounds: int | None = None, extra: str = "") -> Repo:
    repo = seed(root, max_rounds)
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + forge_config(double.api_url, extra), encoding="utf-8")
    repo.commit_worktree_paths(["kb.config.yaml"], "Use the GitHub forge")
    repo.git.remotes.create("origin", double.git_url)
    GitRemote(repo.root, "origin", "tok-proposer").push_branch("main")
    double.add_token("tok-admin", "octo-admin")  # a person on the bypass list: only they push main
    double.protection = replace(double.protection, push_bypass=("octo-admin",))
    return Repo(repo.root)


def remote_main(double: GitHubDouble) -> pygit2.Commit:
    return double.bare.references["refs/heads/main"].peel(pygit2.Commit)


def test_a_cycle_goes_through_pull_requests_on_the_forge(tmp_path: Path, double: GitHubDouble) -> None:
    repo = on_forge(tmp_path / "kb", double)
    report = run_consolidation(repo, today=TODAY, build_index=False)
    assert report.status == "complete" and report.needs_human == [] and len(report.merged) == 1, report.found
    [number] = list(double.pulls)  # one pull request, revised in place
    pull = double.pulls[number]
    assert pull.merged and pull.head == report.merged[0] and "kb" in pull.labels
    assert [r["state"] for r in pull.reviews] == ["CHANGES_REQUESTED", "APPROVED"]
    assert all(r["_login"] == "kb-reviewer" for r in pull.reviews)
    # main on the forge holds the merge and the complete coverage record; local main is the same commit
    main = remote_main(double)
    head = repo.head()
    assert head is not None and head.id == main.id
    merges = [c for c in repo.git.walk(main.id) if c.message.startswith(f"Merge {pull.head}")]
    assert len(merges) == 1 and str(merges[0].parents[1].id) == pull.head_sha
    # main changed only by the pull request's merge: the record is on the forge's own ref
    assert [c.message.splitlines()[0] for c in repo.git.walk(main.id)][:1] == [merges[0].message.splitlines()[0]]
    assert "consolidation" not in main.tree
    assert not any(c.message.startswith("Consolidation ") for c in repo.git.walk(main.id))  # no record commit on main
    record = double.bare.references["refs/kb/consolidation"].peel(pygit2.Commit)
    assert record.id == repo.git.references["refs/kb/consolidation"].peel().id
    current = json.loads(record.tree["consolidation"]["current.json"].data)  # type: ignore[index]
    assert current["status"] == "complete" and cycle_status(repo)["disputed"] == [f"{FOLDER}/hours.md"]
    assert pull.head not in repo.git.branches.local and double.branch_sha(pull.head) is None


def test_same_inputs_never_open_a_second_pull_request_and_a_closed_one_is_not_reopened(tmp_path: Path, double: GitHubDouble) -> None:
    repo = on_forge(tmp_path / "kb", double, max_rounds=1, extra="  max_open_prs: 1\n")
    first = run_consolidation(repo, today=TODAY, build_index=False)
    [branch] = first.needs_human  # refused after its one round: the pull request waits for a person
    [number] = list(double.pulls)
    assert double.pulls[number].state == "open" and double.pulls[number].head == branch

    again = run_consolidation(repo, today=TODAY, build_index=False)
    assert again.status == "open" and list(double.pulls) == [number]  # still waiting: no second pull request

    double.close(number)  # a person closes it
    closed = run_consolidation(repo, today=TODAY, build_index=False)
    assert closed.status == "complete" and list(double.pulls) == [number] and double.pulls[number].state == "closed"
    status = cycle_status(repo)
    assert status["batches"].get("declined") == 1 and status["waiting"] == []
    # what the declined batch covered was never checked on main: kept, and not counted as covered
    record = current_cycle(repo)
    assert record is not None
    entries = list(record.pages.values()) + list(record.claims.values())
    unchecked = [e for e in entries if e.action == "kept" and (e.reason or "").startswith("not re-checked: ")]
    assert unchecked and all(e.reason and "was declined" in e.reason for e in unchecked)
    assert closed.covered == closed.total - len(unchecked) and closed.percent < 100.0

    # a new cycle (new knowledge elsewhere) proposes the same change under the same name: not reopened
    commit(repo, {"knowledge/note.md": (repo.root / f"{FOLDER}/pricing.md").read_text().replace(f"{FOLDER}/pricing", "knowledge/note")})
    GitRemote(repo.root, "origin", "tok-admin").push_branch("main", force=False)
    later = run_consolidation(repo, today=TODAY, build_index=False)
    assert later.cycle != first.cycle and later.stopped == ""
    assert list(double.pulls) == [number] and double.pulls[number].state == "closed"
    assert any(f.kind == "declined" and "not reopened" in f.detail for f in later.found)


def test_no_pull_request_is_opened_past_max_open_prs(tmp_path: Path, double: GitHubDouble) -> None:
    repo = on_forge(tmp_path / "kb", double, max_rounds=1, extra="  max_open_prs: 1\n")
    # a second folder (after knowledge/policies) with a stale L0 of its own
    pricing = (repo.root / f"{FOLDER}/pricing.md").read_text(encoding="utf-8").replace(f"{FOLDER}/pricing", "knowledge/zz/fees")
    commit(
        repo,
        {
            "knowledge/zz/fees.md": pricing,
            "knowledge/zz/index.md": index_text(
                "knowledge/zz", "Fees", "Fees.", "system", {"knowledge/zz/fees": "The annual fee is 100 euros."}
            ),
            "knowledge/index.md": index_text(
                "knowledge",
                "Knowledge",
                "Shared knowledge.",
                "system",
                {f"{FOLDER}/index": "Company policies.", "knowledge/zz/index": "Fees."},
            ),
        },
    )
    GitRemote(repo.root, "origin", "tok-admin").push_branch("main", force=False)
    report = run_consolidation(repo, today=TODAY, build_index=False)
    assert report.stopped == "forge.max_open_prs (1) kb pull requests are open" and report.status == "open"
    assert len(double.pulls) == 1 and double.pulls[next(iter(double.pulls))].state == "open"  # the policies one, waiting
    record = cycle_status(repo)
    assert record["batches"].get("pending", 0) >= 1
