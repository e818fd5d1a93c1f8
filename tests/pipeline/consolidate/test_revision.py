"""Review rounds of consolidation branches: when the Reviewer requests changes, the consolidation
Proposer revises (withdraws its change to each page a comment names) and the rest merges; a
contradiction on a single page is recorded as disputed for a person, not dropped; a branch still
refused after the last round is left for a person with a message that says why."""

from __future__ import annotations

from pathlib import Path

from kb.page import parse_page
from kb.repo import Repo
from pipeline.consolidate.cycle import run_consolidation
from pipeline.consolidate.record import current_cycle
from pipeline.consolidate.status import cycle_status
from pipeline.records import parse_trailers, status_of
from tests.builders import add_evidence, commit, index_text, make_repo, page_for
from tests.pipeline.consolidate.seeded import HANDBOOK, LINES, TODAY, body

FOLDER = "knowledge/policies"


def seed(root: Path, max_rounds: int | None = None) -> Repo:
    repo = make_repo(root)
    ev = add_evidence(repo, HANDBOOK.encode(), "handbook.md", "document")

    def fact(value: str, line: int, label: str) -> dict[str, str]:
        return {"key": "opening-time", "value": value, "source": f"{ev}#L{line}", "label": label}

    files = {
        # two current opening times on one page, and an L0 naming someone the page does not
        f"{FOLDER}/hours.md": page_for(
            f"{FOLDER}/hours.md",
            "Office hours",
            "Maria Lopez opens the office.",
            body("Office hours", [LINES[3], LINES[4]], ev),
            sources=[ev],
            facts=[fact("9am", 4, "1"), fact("8am", 5, "2")],
        ),
        f"{FOLDER}/pricing.md": page_for(
            f"{FOLDER}/pricing.md", "Pricing", "The annual fee is 100 euros.", body("Pricing", [LINES[8]], ev), sources=[ev]
        ),
    }
    summaries = {f"{FOLDER}/hours": "Maria Lopez opens the office.", f"{FOLDER}/pricing": "The annual fee is 100 euros."}
    files[f"{FOLDER}/index.md"] = index_text(FOLDER, "Policies", "Company policies.", "system", summaries)
    files["knowledge/index.md"] = index_text(
        "knowledge", "Knowledge", "Shared knowledge.", "system", {f"{FOLDER}/index": "Company policies."}
    )
    commit(repo, files, "seed")
    if max_rounds is not None:
        config = repo.root / "kb.config.yaml"
        config.write_text(config.read_text(encoding="utf-8").replace("max_rounds: 3", f"max_rounds: {max_rounds}"), encoding="utf-8")
        repo.commit_worktree_paths(["kb.config.yaml"], "one review round")
    return Repo(repo.root)


def test_a_refused_page_is_withdrawn_in_a_second_round_and_the_rest_merges(tmp_path: Path) -> None:
    repo = seed(tmp_path / "kb")
    hours_before = (repo.root / FOLDER / "hours.md").read_text(encoding="utf-8")
    report = run_consolidation(repo, today=TODAY, build_index=False)
    assert report.status == "complete" and report.needs_human == [] and len(report.merged) == 1
    # the fixable page is fixed; the page with two current values is left exactly as it was
    assert "100" not in parse_page((repo.root / FOLDER / "pricing.md").read_text(encoding="utf-8"), f"{FOLDER}/pricing.md").summary
    assert (repo.root / FOLDER / "hours.md").read_text(encoding="utf-8") == hours_before
    head = repo.head()
    assert head is not None
    merge = next(c for c in repo.git.walk(head.id) if c.message.startswith("Merge kb/consolidate-pages-"))
    assert parse_trailers(merge.message)["Kb-Verdicts"] == "r1:request_changes, r2:approve"
    revision = merge.parents[1]
    assert revision.message.startswith("Revise after review round 1: withdraw the change to 1 page(s)")
    assert f"{FOLDER}/hours.md: conflict: `opening-time` has several current values" in revision.message
    # the coverage record says the contradiction waits for a person; nothing about it is dropped
    record = current_cycle(repo)
    assert record is not None
    for label in ("1", "2"):
        entry = record.claims[f"{FOLDER}/hours.md#{label}"]
        assert entry.action == "disputed" and "for a person" in (entry.reason or ""), entry
    assert record.pages[f"{FOLDER}/hours.md"].action == "disputed"
    assert record.claims[f"{FOLDER}/pricing.md#1"].action == "verified"
    batch = next(b for b in record.batches if b.id == f"pages:{FOLDER}:1")
    assert batch.rounds == 2 and list(batch.withdrawn or {}) == [f"{FOLDER}/hours.md"]
    conflicts = next(b for b in record.batches if b.id == "conflicts:knowledge")
    assert any(f.kind == "conflict" and not f.fixed and "on this one page" in f.detail for f in conflicts.found)
    assert cycle_status(repo)["disputed"] == [f"{FOLDER}/hours.md"]


def test_a_branch_still_refused_after_the_last_round_is_left_for_a_person(tmp_path: Path) -> None:
    repo = seed(tmp_path / "kb", max_rounds=1)
    report = run_consolidation(repo, today=TODAY, build_index=False)
    [branch] = report.needs_human
    assert report.status == "open" and report.merged == []
    tip = repo.git.branches.local[branch].peel()
    status = status_of(repo, str(tip.id))
    assert status is not None and status["status"] == "needs-human"
    assert status["reason"].startswith("not approved after 1 review round(s):")
    record = current_cycle(repo)
    assert record is not None
    batch = next(b for b in record.batches if b.branch == branch)
    assert batch.state == "needs-human" and any("opening-time" in f.detail for f in batch.found)
