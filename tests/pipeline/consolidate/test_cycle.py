"""Issue 15 acceptance: one cycle over a repository seeded with a defect of each kind finds and
fixes each one through reviewed merges, with coverage 100%; a killed cycle resumes without
redoing finished batches; a second cycle with nothing new proposes nothing; replay refuses a
change that hides an answer."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from ci.run import run_checks
from kb.page import parse_page
from kb.repo import Repo
from pipeline.consolidate import cycle as cycle_module
from pipeline.consolidate.cycle import run_consolidation
from pipeline.consolidate.record import Batch, BatchState, Cycle, CycleStatus, current_cycle
from pipeline.consolidate.status import cycle_status
from tests.pipeline.consolidate.seeded import FOLDER, TODAY, seed


def page(repo: Repo, name: str) -> object:
    return parse_page((repo.root / FOLDER / f"{name}.md").read_text(encoding="utf-8"), f"{FOLDER}/{name}.md")


def merges(repo: Repo) -> list[pygit2.Commit]:
    head = repo.head()
    assert head is not None
    return [c for c in repo.git.walk(head.id) if c.message.startswith("Merge kb/consolidate-")]


def test_one_cycle_finds_and_fixes_each_seeded_defect_through_reviewed_merges(tmp_path: Path) -> None:
    repo, ev = seed(tmp_path / "kb")
    report = run_consolidation(repo, batch_pages=4, today=TODAY, build_index=False)

    assert report.status == "complete" and report.percent == 100.0 and report.needs_human == []
    kinds = {(f.kind, f.fixed) for f in report.found}
    for kind in ("grounding", "duplicate", "expired", "conflict", "link", "l0", "index", "oversized", "tiny", "l1"):
        assert (kind, True) in kinds, kind
    # every change went through review and merge: a merge commit per branch, with the Reviewer's trailers
    done = merges(repo)
    assert len(done) == len(report.merged) >= 5
    assert all("Kb-Reviewer-Family: kb-deterministic" in c.message and "Kb-Proposer-Family: kb-consolidate" in c.message for c in done)
    # duplicates: support.md said only what contact.md says -> deprecated, successor named; office.md keeps its own claim
    support = page(repo, "support")
    assert support.status == "deprecated" and support.meta["superseded_by"] == [f"{FOLDER}/contact"]
    office = (repo.root / FOLDER / "office.md").read_text()
    assert "open on weekdays" not in office.split("## Related")[0] and f"[[{FOLDER}/contact]]" in office
    # expired fact: moved to History, still cited
    team = (repo.root / FOLDER / "team.md").read_text()
    history = team.split("## History")[1]
    assert "Maria Lopez led the Berlin team" in history and "Maria" not in team.split("## History")[0].split("---")[2]
    # stale L0s rewritten from the current claims
    assert "100" not in page(repo, "pricing").summary and "Maria" not in page(repo, "team").summary
    # ungrounded claim restated from its evidence
    assert 'In the source: "Support answers within one business day"' in (repo.root / FOLDER / "pricing.md").read_text()
    # contradiction with a condition: qualified; without: both kept, disputed
    assert page(repo, "refunds-eu").meta["facts"][0]["condition"] == "for EU customers"
    assert page(repo, "refunds-us").meta["facts"][0]["key"] == "refund-window:for-us-customers"
    assert page(repo, "office").status == "disputed" and page(repo, "office-notes").status == "disputed"
    assert page(repo, "office").meta["facts"][0]["value"] == "9am" and page(repo, "office-notes").meta["facts"][0]["value"] == "8am"
    # links: retargeted and unlinked; index: the missing page listed
    contact = (repo.root / FOLDER / "contact.md").read_text()
    assert f"[[{FOLDER}/refunds-eu]]" in contact and "old-refunds]]" not in contact
    assert f"[[{FOLDER}/office-notes]]" in (repo.root / FOLDER / "index.md").read_text()
    # oversized: shipping split by its sections into three children, each claim with its citation as written
    parts = [f"{FOLDER}/shipping-{p}" for p in ("delivery", "returns", "customs")]
    assert all(f"[[{p}]]" in page(repo, "shipping").overview() for p in parts) and page(repo, "shipping").structure.claims == []
    delivery = (repo.root / FOLDER / "shipping-delivery.md").read_text()
    assert (
        f'[^1]: {ev}#L13 "Orders ship within two business days"' in delivery and "- Orders ship within two business days.[^1]" in delivery
    )
    assert all(f"[[{p}]]" in (repo.root / FOLDER / "index.md").read_text() for p in parts)
    # tiny: pricing-students merged into pricing under its own title, deprecated with its successor
    students = page(repo, "pricing-students")
    assert students.status == "deprecated" and students.meta["superseded_by"] == [f"{FOLDER}/pricing"]
    pricing = (repo.root / FOLDER / "pricing.md").read_text()
    assert "## Pricing for students" in pricing and f'{ev}#L21 "Students get a 20% discount on the annual fee"' in pricing
    # L1: the warranty outline names its sections again
    assert "- [Batteries](#batteries)" in page(repo, "warranty").overview() and "(#claims)" not in page(repo, "warranty").overview()
    # the whole repository passes the checks now, and the coverage record says what happened
    assert run_checks(repo).ok
    status = cycle_status(repo)
    assert status["status"] == "complete" and status["coverage"]["percent"] == 100.0
    assert {"merged", "retired", "qualified", "disputed", "changed", "verified"} <= set(status["actions"])
    record = current_cycle(repo)
    assert record is not None
    assert record.claims[f"{FOLDER}/support.md#1"].action == "merged"
    assert record.claims[f"{FOLDER}/team.md#1"].action == "retired"
    assert record.claims[f"{FOLDER}/shipping.md#1"].reason == f"moved with its citation to {FOLDER}/shipping-delivery (page split)"
    assert record.claims[f"{FOLDER}/pricing-students.md#1"].action == "merged"
    assert record.pages[f"{FOLDER}/pricing-students.md"].action == "merged"
    assert record.retired == []  # nothing left uncited: the split and the merge moved every span
    assert all(e.commit for e in record.pages.values())


def test_second_cycle_with_nothing_new_proposes_nothing(tmp_path: Path) -> None:
    repo, _ = seed(tmp_path / "kb")
    first = run_consolidation(repo, batch_pages=4, today=TODAY, build_index=False)
    branches_before = sorted(repo.git.branches.local)
    head_before = repo.head()
    assert head_before is not None
    second = run_consolidation(repo, batch_pages=4, today=TODAY, build_index=False)
    assert second.status == "nothing-to-do" and second.merged == [] and second.needs_human == []
    assert second.cycle == first.cycle and second.found == [] and second.percent == 100.0
    # nothing changes: no branch, no commit (not even a new cycle record)
    assert sorted(repo.git.branches.local) == branches_before
    head_after = repo.head()
    assert head_after is not None and head_after.id == head_before.id
    assert cycle_status(repo)["cycle"] == first.cycle


def test_new_knowledge_after_a_cycle_starts_a_new_one(tmp_path: Path) -> None:
    repo, _ = seed(tmp_path / "kb")
    first = run_consolidation(repo, batch_pages=4, today=TODAY, build_index=False)
    path = repo.root / FOLDER / "contact.md"
    path.write_text(path.read_text(encoding="utf-8") + "\nA note added by hand.\n", encoding="utf-8")
    repo.commit_worktree_paths([f"{FOLDER}/contact.md"], "a hand edit after the cycle")
    second = run_consolidation(repo, batch_pages=4, today=TODAY, build_index=False)
    assert second.cycle != first.cycle and second.status == "complete" and second.percent == 100.0


def test_killed_cycle_resumes_without_redoing_finished_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _ = seed(tmp_path / "kb")
    real = cycle_module.merge_branch
    calls: list[str] = []

    def killed_on_third(repo_: Repo, branch: str, build_index: bool = True) -> object:
        calls.append(branch)
        if len(calls) == 3:
            raise KeyboardInterrupt  # killed mid-batch: proposed and reviewed, not merged
        return real(repo_, branch, build_index=build_index)

    monkeypatch.setattr(cycle_module, "merge_branch", killed_on_third)
    with pytest.raises(KeyboardInterrupt):
        run_consolidation(repo, batch_pages=4, today=TODAY, build_index=False)
    record = current_cycle(repo)
    assert record is not None and record.status is CycleStatus.OPEN
    finished = [b.id for b in record.batches if b.state is BatchState.DONE]
    merged_before = len(merges(repo))
    assert merged_before == 2
    monkeypatch.setattr(cycle_module, "merge_branch", real)
    proposed: list[str] = []
    real_propose = cycle_module._propose_batch

    def spy(repo_: Repo, cycle: Cycle, batch: Batch, *rest: object) -> None:
        proposed.append(batch.id)
        real_propose(repo_, cycle, batch, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(cycle_module, "_propose_batch", spy)
    report = run_consolidation(repo, batch_pages=4, today=TODAY, build_index=False)
    assert report.status == "complete" and report.percent == 100.0
    assert not set(proposed) & set(finished) and not set(report.batches_done) & set(finished)
    assert len(merges(repo)) == merged_before + len(report.merged)


def test_a_change_that_hides_a_replay_answer_is_refused(tmp_path: Path) -> None:
    replay = """- question: When does the office say support is open?
  principal: system
  page: knowledge/policies/office
  fact: Our support line is open on weekdays
"""
    repo, _ = seed(tmp_path / "kb", replay=replay)
    report = run_consolidation(repo, batch_pages=4, today=TODAY, build_index=False)
    record = current_cycle(repo)
    assert record is not None
    dedupe = next(b for b in record.batches if b.id == "duplicates:knowledge")
    assert dedupe.state is BatchState.NEEDS_HUMAN and dedupe.branch in report.needs_human
    assert any("replay.lost" in f.detail for f in dedupe.found)
    assert not any(c.message.startswith(f"Merge {dedupe.branch}") for c in merges(repo))
    assert "Our support line is open on weekdays" in (repo.root / FOLDER / "office.md").read_text()
    assert report.status == "open" and cycle_status(repo)["waiting"] == [dedupe.branch]
