"""No silent loss in the loop (issue 13 item 2): a revision that withdraws claims says how many
and why, per rule, on the console and in the review record; a rule that fires on most verbatim
claims of a change is reported as a rule bug and its claims are kept."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import ci.gate
from agents.offline.revision import withdraw_flagged
from agents.schemas import Comment
from ci.findings import Finding
from ci.rules.grounding import check_page_grounding
from ci.snapshot import Snapshot
from kb.evidence import add_items
from kb.intake import prepare
from kb.page import Page
from kb.scaffold import init_repository
from pipeline.loop import RunStatus, run_loop
from pipeline.records import parse_trailers, reviews_of
from tests.builders import page_for
from tests.conftest import CliResult

EV = "ev-0123456789abcdef"
BODY = f"""# Trip

## Costs

Jo paid 40 euros for the hotel.[^a] The train was on time.[^b] Lunch was cheap.[^c] Dinner was late.[^d]

[^a]: {EV}#L1 "Jo paid 30 euros for the hotel."
[^b]: {EV}#L2 "The train was on time."
[^c]: {EV}#L3 "Lunch was cheap."
[^d]: {EV}#L4 "Dinner was late."
"""
PATH = "knowledge/trip.md"


class Pages:
    """The two backend methods a revision uses, over a dict of page texts."""

    def __init__(self, pages: dict[str, str]) -> None:
        self.pages = pages

    def page_text(self, path: str) -> str | None:
        return self.pages.get(path)

    def write_page(self, path: str, content: str) -> str:
        self.pages[path] = content
        return path


PAGE = page_for(PATH, "Trip", "What the trip cost.", BODY)
LINE = PAGE.split("\n").index(next(line for line in PAGE.split("\n") if line.startswith("Jo paid"))) + 1


def _gate(label: str, rule: str) -> Comment:
    """A gate finding on the claim carrying ``[^label]``, as the Reviewer passes it on."""
    return Comment(kind="gate", path=PATH, line=LINE, message=f"[{rule}] [^{label}] the problem")


def test_a_withdrawal_is_counted_per_rule_and_keeps_the_other_sentences() -> None:
    backend = Pages({PATH: PAGE})
    result = withdraw_flagged(backend, (_gate("a", "grounding.number"), _gate("c", "citation.quote")))
    assert result.withdrawn == {"grounding.number": 1, "citation.quote": 1} and result.kept == {}
    assert result.notes[0].startswith(f"citation.quote: withdrew 1 claim(s), e.g. knowledge/trip.md:{LINE}: [citation.quote] [^c]")
    text = backend.pages[PATH]
    assert "The train was on time.[^b] Dinner was late.[^d]\n" in text  # the two others stay, on their line
    assert "40 euros" not in text and "Lunch" not in text
    assert "[^a]:" not in text and "[^c]:" not in text and "[^b]:" in text


def test_a_rule_firing_on_most_verbatim_claims_is_a_rule_bug_and_they_stay() -> None:
    backend = Pages({PATH: PAGE})
    before = backend.pages[PATH]
    comments = tuple(_gate(label, "grounding.negation") for label in "bcd")  # 3 of the 3 verbatim claims
    result = withdraw_flagged(backend, comments)
    assert result.withdrawn == {} and result.kept == {"grounding.negation": 3}
    assert "fired on 3 of the 3 verbatim claims" in result.notes[0] and "bug in the rule" in result.notes[0]
    assert backend.pages[PATH] == before


DOC = "# Trains\n\nThe train leaves at 9 from platform 2.\n\nTickets are sold on board.\n\nSeats are free.\n"


def _flag(pattern: str, rule: str) -> Callable[[Snapshot, Page], list[Finding]]:
    """A gate whose grounding also flags every claim containing ``pattern`` with ``rule``."""

    def check(snapshot: Snapshot, page: Page) -> list[Finding]:
        found = check_page_grounding(snapshot, page)
        for claim in page.structure.claims:
            if pattern in claim.text:
                found.append(Finding(page.path, claim.line, rule, f"[^{claim.labels[0]}] flagged for the test"))  # type: ignore[arg-type]
        return found

    return check


def test_the_console_and_the_review_record_say_what_was_withdrawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., CliResult]
) -> None:
    repo = init_repository(tmp_path / "kb")
    add_items(repo, [prepare(DOC.encode(), "trains.md", "document", "system")])
    monkeypatch.setattr(ci.gate, "check_page_grounding", _flag("Tickets", "grounding.number"))
    result = cli("run", "--no-index", cwd=repo.root)
    assert result.code == 0, result.out + result.err
    assert "revision 1: withdrew 1 claim(s): grounding.number 1\n" in result.out
    assert "    grounding.number: withdrew 1 claim(s), e.g. knowledge/trains.md:" in result.out
    merge = repo.git.head.peel()
    record = json.loads((repo.root / parse_trailers(merge.message)["Kb-Review-Record"]).read_text())
    assert [(r["round"], r["verdict"], r["withdrawn"]) for r in record["reviews"]] == [
        (1, "request_changes", {}),
        (2, "approve", {"grounding.number": 1}),
    ]
    assert "Tickets" not in (repo.root / "knowledge/trains.md").read_text()


def test_a_rule_bug_stops_the_loop_with_the_claims_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = init_repository(tmp_path / "kb")
    add_items(repo, [prepare(DOC.encode(), "trains.md", "document", "system")])
    monkeypatch.setattr(ci.gate, "check_page_grounding", _flag("", "grounding.negation"))  # fires on every claim
    result = run_loop(repo, build_index=False)
    assert result.status is RunStatus.NEEDS_HUMAN
    assert "it kept the verbatim claims flagged by grounding.negation" in result.reason and "rule bug" in result.reason
    revision = result.revisions[0]
    assert revision is not None and revision.withdrawn == {} and revision.kept["grounding.negation"] >= 3
    head = repo.git.branches.local[result.proposal.branch].peel()
    assert reviews_of(repo, str(head.id))[0].verdict == "request_changes"
    branch_page = repo.read_at(head, "knowledge/trains.md")
    assert branch_page is not None and b"Tickets are sold on board." in branch_page  # nothing deleted
