"""Dedupe keeps knowledge: the survivor of a merge cites every copy's span (so conservation holds
with nothing retired), views that restate topic pages by design (a user's timeline and profile)
are not merged away, and similar is not the same (a negation or a number differs: not merged)."""

from __future__ import annotations

from pathlib import Path

from ci.run import run_checks
from kb.page import parse_page
from kb.repo import Repo
from pipeline.consolidate.cycle import run_consolidation
from pipeline.consolidate.dedupe import merge_duplicates
from pipeline.consolidate.record import current_cycle
from pipeline.consolidate.view import CommitView, Texts
from tests.builders import add_evidence, commit, make_repo, page_for
from tests.pipeline.consolidate.seeded import TODAY

# The same statement said in two sessions (lines 1 and 3), and its negation (line 4).
NOTES = """Refunds are allowed within 7 days.
The office is in Lisbon.
Refunds are allowed within 7 days.
Refunds are not allowed within 7 days.
The car is blue.
The shop sells bikes. The shop repairs bikes.
"""
USER = "users/alice"


def cite(label: str, ev: str, line: int, quote: str = "") -> str:
    text = quote or NOTES.splitlines()[line - 1].rstrip(".")
    return f'[^{label}]: {ev}#L{line}-L{line} "{text}"'


def topic(path: str, title: str, claims: list[tuple[str, int]], ev: str, **meta: object) -> str:
    """One bullet per claim, each citing its line, quoting the claim itself on line 6 (which says two things)."""
    bullets = "\n".join(f"- {text}[^{n}]" for n, (text, _) in enumerate(claims, 1))
    defs = "\n".join(cite(str(n), ev, line, text.rstrip(".") if line == 6 else "") for n, (text, line) in enumerate(claims, 1))
    body = f"# {title}\n\n## Statements\n\n{bullets}\n\n{defs}\n"
    return page_for(path, title, f"{title}.", body, sources=[ev], **meta)


def seeded(root: Path, pages: dict[str, list[tuple[str, int]]], types: dict[str, str] | None = None) -> tuple[Repo, str]:
    repo = make_repo(root)
    ev = add_evidence(repo, NOTES.encode(), "notes.md", "document")
    files = {
        f"knowledge/{name}.md": topic(f"knowledge/{name}.md", name.title(), claims, ev, type=(types or {}).get(name, "fact"))
        for name, claims in pages.items()
    }
    commit(repo, files, "seed")
    return repo, ev


def dedupe(repo: Repo) -> tuple[dict[str, str], list[tuple[str, str]]]:
    head = repo.head()
    assert head is not None
    view = CommitView(repo, head)
    result = merge_duplicates(Texts(view), sorted(view.files), TODAY)
    return result.changes, [(f.kind, f.path) for f in result.found]


def spans(text: str, path: str) -> set[str]:
    page = parse_page(text, path)
    return {f"{c.evidence_id}#L{c.start}" for c in page.structure.citations if c.evidence_id}


def test_the_survivor_cites_both_spans_and_the_cycle_retires_nothing(tmp_path: Path) -> None:
    # the same statement on two pages, each citing the session it was said in
    repo, ev = seeded(
        tmp_path / "kb",
        {
            "refunds": [("Refunds are allowed within 7 days.", 1), ("The office is in Lisbon.", 2)],
            "faq": [("Refunds are allowed within 7 days.", 3), ("The car is blue.", 5)],
        },
    )
    report = run_consolidation(repo, today=TODAY, build_index=False)
    assert report.status == "complete" and report.needs_human == [], report.found
    refunds = (repo.root / "knowledge/refunds.md").read_text(encoding="utf-8")
    faq = (repo.root / "knowledge/faq.md").read_text(encoding="utf-8")
    # kept on the page that sorts first among equals (faq), which now cites line 1 and line 3
    assert {f"{ev}#L1", f"{ev}#L3"} <= spans(faq, "knowledge/faq.md")
    claim = next(c for c in parse_page(faq, "knowledge/faq.md").structure.claims if "Refunds" in c.text)
    assert len(claim.labels) == 2  # one statement, both citations
    assert "Refunds are allowed" not in refunds.split("## Related")[0] and "[[knowledge/faq]]" in refunds
    record = current_cycle(repo)
    assert record is not None and record.retired == []  # conservation holds without retiring a span
    assert record.claims["knowledge/refunds.md#1"].action == "merged"
    assert run_checks(repo).ok


def test_a_negated_or_different_number_statement_is_not_merged(tmp_path: Path) -> None:
    repo, _ = seeded(
        tmp_path / "kb",
        {
            "refunds": [("Refunds are allowed within 7 days.", 1)],
            "policy": [("Refunds are not allowed within 7 days.", 1)],  # the same span, the opposite meaning
            "terms": [("Refunds are allowed within 14 days.", 1)],
        },
    )
    changes, found = dedupe(repo)
    assert changes == {}
    assert ("duplicate", "knowledge/policy.md") not in found
    assert sum(1 for kind, _ in found if kind == "similar-not-same") == 2


def test_timeline_and_profile_restatements_are_not_merged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb")
    ev = add_evidence(repo, NOTES.encode(), "notes.md", "document")
    claim = [("Refunds are allowed within 7 days.", 1)]
    files = {
        f"{USER}/shopping.md": topic(f"{USER}/shopping.md", "Shopping", claim + [("The car is blue.", 5)], ev, type="topic"),
        f"{USER}/timeline.md": topic(f"{USER}/timeline.md", "Timeline", claim, ev, type="timeline"),
        f"{USER}/profile.md": topic(f"{USER}/profile.md", "Profile", claim, ev, type="profile"),
    }
    commit(repo, files, "seed")
    changes, found = dedupe(repo)
    assert changes == {} and found == []
    # the same statement on two topic pages is a duplicate
    commit(repo, {f"{USER}/notes.md": topic(f"{USER}/notes.md", "Notes", claim, ev, type="topic")}, "a copy")
    changes, found = dedupe(repo)
    assert ("duplicate", f"{USER}/notes.md") in found and set(changes) == {f"{USER}/notes.md", f"{USER}/shopping.md"}


def test_two_statements_quoting_different_parts_of_one_line_are_not_merged(tmp_path: Path) -> None:
    repo, _ = seeded(
        tmp_path / "kb",
        {
            "shop": [("The shop sells bikes.", 6), ("The car is blue.", 5)],
            "repairs": [("The shop repairs bikes.", 6)],
        },
    )
    changes, found = dedupe(repo)
    assert changes == {} and found == []
