"""Structure upkeep: an oversized page is split by its sections into child pages that keep each
claim with its citation verbatim (links into a moved section follow it, the parent stays as a
short page listing its parts); a tiny page is merged into the sibling about the same subject and
deprecated with a pointer (never when their facts contradict, or when the subject differs); an
Overview outline that names a gone section or misses a new one is rebuilt."""

from __future__ import annotations

from pathlib import Path

from ci.run import run_checks
from kb.page import parse_page
from kb.repo import Repo
from pipeline.consolidate.structure import merge_tiny, rewrite_l1, split_oversized
from pipeline.consolidate.view import CommitView, Texts
from tests.builders import add_evidence, commit, index_text, make_repo, page_for

NOTES = """The shop opens at 9am.
The shop closes at 6pm.
Bikes are repaired within two days.
Repairs cost 20 euros per hour.
Students get a discount on repairs.
The shop opens at 10am on Sundays.
"""
LINES = NOTES.splitlines()
F = "knowledge/shop"


def cite(label: str, ev: str, line: int) -> str:
    return f'[^{label}]: {ev}#L{line} "{LINES[line - 1].rstrip(".")}"'


def build(root: Path, files: dict[str, str]) -> tuple[Repo, Texts]:
    repo = make_repo(root)
    commit(repo, files, "seed")
    head = repo.head()
    assert head is not None
    return repo, Texts(CommitView(repo, head))


def evidence(root: Path) -> tuple[Repo, str]:
    repo = make_repo(root)
    return repo, add_evidence(repo, NOTES.encode(), "notes.md", "document")


def seed(repo: Repo, files: dict[str, str]) -> Texts:
    commit(repo, files, "seed")
    head = repo.head()
    assert head is not None
    return Texts(CommitView(repo, head))


def big_page(ev: str) -> str:
    body = (
        "# Shop\n\n## Overview\n\nAbout the shop.\n\nSections of this page:\n\n- [Hours](#hours)\n- [Repairs](#repairs)\n\n"
        f"## Hours\n\n- The shop opens at 9am.[^1]\n- The shop closes at 6pm.[^2]\n\n"
        f"## Repairs\n\n- Bikes are repaired within two days.[^3]\n\n### Prices\n\n- Repairs cost 20 euros per hour.[^4]\n\n"
        f"## Related\n\n- See [[{F}/index]].\n\n" + "\n".join(cite(str(n), ev, n) for n in range(1, 5)) + "\n"
    )
    return page_for(f"{F}/shop.md", "Shop", "The shop opens at 9am.", body, sources=[ev])


def test_an_oversized_page_is_split_by_its_sections_with_citations_verbatim(tmp_path: Path) -> None:
    repo, ev = evidence(tmp_path / "kb")
    other = page_for(
        f"{F}/visit.md", "Visit", "Visiting the shop.", f"# Visit\n\n- See [[{F}/shop#prices]] and [[{F}/shop#hours]].\n", sources=[]
    )
    texts = seed(repo, {f"{F}/shop.md": big_page(ev), f"{F}/visit.md": other})
    result = split_oversized(texts, [f"{F}/shop.md"], max_tokens=100)

    hours, repairs = f"{F}/shop-hours.md", f"{F}/shop-repairs.md"
    assert sorted(result.changes) == [f"{F}/shop-hours.md", f"{F}/shop-repairs.md", f"{F}/shop.md", f"{F}/visit.md"]
    child = parse_page(result.changes[hours], hours)
    assert child.meta["id"] == f"{F}/shop-hours" and child.meta["type"] == "fact" and child.status == "active"
    assert (
        child.title == "Shop: Hours" and child.summary == "The shop opens at 9am."
    )  # as rewrite_l0 builds it (the title form names "Hours", unstated)
    assert child.meta["sources"] == [ev] and child.meta["scope"] == "system"
    # each claim and its citation line as written on the parent
    assert cite("1", ev, 1) in result.changes[hours] and cite("2", ev, 2) in result.changes[hours]
    assert cite("4", ev, 4) in result.changes[repairs] and "### Prices" in result.changes[repairs]
    parent = parse_page(result.changes[f"{F}/shop.md"], f"{F}/shop.md")
    assert parent.structure.claims == [] and "[^1]:" not in parent.body and parent.summary == "Shop, in parts: Hours, Repairs."
    assert f"- [[{F}/shop-hours]]: The shop opens at 9am." in parent.overview() and "About the shop." in parent.overview()
    assert "(#hours)" not in parent.body and f"[[{F}/index]]" in parent.body  # the outline to moved sections is gone, Related kept
    assert f"[[{F}/shop-repairs#prices]]" in result.changes[f"{F}/visit.md"] and f"[[{F}/shop-hours]]" in result.changes[f"{F}/visit.md"]
    assert result.claims[f"{F}/shop.md#3"] == ("changed", f"moved with its citation to {F}/shop-repairs (page split)")
    assert [f.kind for f in result.found].count("oversized") == 1


def test_a_page_within_budget_or_with_one_section_is_not_split(tmp_path: Path) -> None:
    repo, ev = evidence(tmp_path / "kb")
    one = page_for(
        f"{F}/one.md", "One", "The shop opens at 9am.", "# One\n\n## Hours\n\n- The shop opens at 9am.[^1]\n\n" + cite("1", ev, 1) + "\n"
    )
    texts = seed(repo, {f"{F}/shop.md": big_page(ev), f"{F}/one.md": one})
    assert split_oversized(texts, [f"{F}/shop.md"], max_tokens=10_000).changes == {}
    left = split_oversized(texts, [f"{F}/one.md"], max_tokens=10)
    assert left.changes == {} and [(f.kind, f.fixed) for f in left.found] == [("oversized", False)]


def small(path: str, title: str, lines: list[int], ev: str, **meta: object) -> str:
    bullets = "\n".join(f"- {LINES[n - 1]}[^{k}]" for k, n in enumerate(lines, 1))
    defs = "\n".join(cite(str(k), ev, n) for k, n in enumerate(lines, 1))
    return page_for(path, title, f"{title}.", f"# {title}\n\n## Statements\n\n{bullets}\n\n{defs}\n", sources=[ev], **meta)


def test_a_tiny_page_is_merged_into_its_sibling_and_deprecated(tmp_path: Path) -> None:
    repo, ev = evidence(tmp_path / "kb")
    files = {
        f"{F}/repairs.md": small(f"{F}/repairs.md", "Repairs", [3, 4], ev),
        f"{F}/repairs-students.md": small(f"{F}/repairs-students.md", "Repairs for students", [5], ev),
        f"{F}/hours.md": small(f"{F}/hours.md", "Hours", [1, 2], ev),
        f"{F}/links.md": page_for(f"{F}/links.md", "Links", "Links.", f"# Links\n\n- [[{F}/repairs-students]]\n"),
    }
    texts = seed(repo, files)
    result = merge_tiny(texts, sorted(files), max_claims=1, today="2025-06-01")

    target = parse_page(result.changes[f"{F}/repairs.md"], f"{F}/repairs.md")
    assert "## Repairs for students" in target.body and "- Students get a discount on repairs.[^3]" in target.body
    assert cite("3", ev, 5) in target.body and target.meta["supersedes"] == [f"{F}/repairs-students"]
    tiny = parse_page(result.changes[f"{F}/repairs-students.md"], f"{F}/repairs-students.md")
    assert tiny.status == "deprecated" and tiny.meta["superseded_by"] == [f"{F}/repairs"] and cite("1", ev, 5) in tiny.body
    assert f"[[{F}/repairs]]" in result.changes[f"{F}/links.md"]
    assert result.claims[f"{F}/repairs-students.md#1"][0] == "merged" and result.pages[f"{F}/repairs-students.md"] == "merged"
    assert f"{F}/hours.md" not in result.changes  # another subject: left alone


def test_tiny_pages_on_another_subject_or_with_contradicting_facts_are_not_merged(tmp_path: Path) -> None:
    repo, ev = evidence(tmp_path / "kb")

    def fact(value: str, line: int) -> dict[str, str]:
        return {"key": "opening", "value": value, "source": f"{ev}#L{line}", "label": "1"}

    files = {
        f"{F}/hours.md": small(f"{F}/hours.md", "Hours", [1, 2], ev, facts=[fact("9am", 1)]),
        f"{F}/hours-sunday.md": small(f"{F}/hours-sunday.md", "Hours on Sunday", [6], ev, facts=[fact("10am", 6)]),
        f"{F}/students.md": small(f"{F}/students.md", "Students", [5], ev),
    }
    texts = seed(repo, files)
    assert merge_tiny(texts, sorted(files), max_claims=1, today="2025-06-01").changes == {}
    assert merge_tiny(texts, sorted(files), max_claims=0, today="2025-06-01").changes == {}


def test_an_outline_naming_a_gone_section_is_rebuilt(tmp_path: Path) -> None:
    repo, ev = evidence(tmp_path / "kb")
    body = (
        "# Shop\n\n## Overview\n\nAbout the shop.\n\nSections of this page:\n\n- [Hours](#hours)\n- [Prices](#prices)\n\n"
        "## Hours\n\n- The shop opens at 9am.[^1]\n\n## Repairs\n\n- Bikes are repaired within two days.[^2]\n\n"
        + cite("1", ev, 1)
        + "\n"
        + cite("2", ev, 3)
        + "\n"
    )
    fine = body.replace("- [Prices](#prices)", "- [Repairs](#repairs)")
    texts = seed(
        repo,
        {f"{F}/shop.md": page_for(f"{F}/shop.md", "Shop", "The shop.", body), f"{F}/ok.md": page_for(f"{F}/ok.md", "Ok", "Ok.", fine)},
    )
    result = rewrite_l1(texts, [f"{F}/shop.md", f"{F}/ok.md"])
    assert sorted(result.changes) == [f"{F}/shop.md"]
    page = parse_page(result.changes[f"{F}/shop.md"], f"{F}/shop.md")
    assert page.overview().split("Sections of this page:")[1].split() == ["-", "[Hours](#hours)", "-", "[Repairs](#repairs)"]
    assert "About the shop." in page.overview() and page.body.count("[^1]") == 2
    assert "prices" in result.found[0].detail and "repairs" in result.found[0].detail


def test_split_children_pass_the_checks_with_the_index_regenerated(tmp_path: Path) -> None:
    from pipeline.consolidate.jobs import regenerate_index

    repo, ev = evidence(tmp_path / "kb")
    files = {
        f"{F}/shop.md": big_page(ev),
        f"{F}/index.md": index_text(F, "Shop", "The shop.", "system", {f"{F}/shop": "The shop opens at 9am."}),
        "knowledge/index.md": index_text("knowledge", "Knowledge", "Entry.", "system", {f"{F}/index": "The shop."}),
    }
    texts = seed(repo, files)
    split = split_oversized(texts, [f"{F}/shop.md"], max_tokens=100)
    texts.edits.update(split.changes)
    texts.edits.update(regenerate_index(texts, F).changes)
    commit(repo, dict(texts.edits), "split")
    index = (repo.root / F / "index.md").read_text()
    assert f"[[{F}/shop-hours]]" in index and f"[[{F}/shop-repairs]]" in index
    assert run_checks(repo).ok, [f.message for f in run_checks(repo).findings]


def test_a_split_or_link_repair_touching_a_withdrawn_page_is_not_proposed(tmp_path: Path) -> None:
    repo, ev = evidence(tmp_path / "kb")
    other = page_for(f"{F}/visit.md", "Visit", "Visiting the shop.", f"# Visit\n\n- See [[{F}/shop#hours]].\n")
    texts = seed(repo, {f"{F}/shop.md": big_page(ev), f"{F}/visit.md": other})
    # a part withdrawn after review: the page is not split again (it is reported)
    withdrawn = split_oversized(texts, [f"{F}/shop.md"], max_tokens=100, frozen=frozenset({f"{F}/shop-hours.md"}))
    assert withdrawn.changes == {} and [(f.kind, f.fixed) for f in withdrawn.found] == [("oversized", False)]
    # a linking page withdrawn: the split goes ahead without touching it
    result = split_oversized(texts, [f"{F}/shop.md"], max_tokens=100, frozen=frozenset({f"{F}/visit.md"}))
    assert f"{F}/shop-hours.md" in result.changes and f"{F}/visit.md" not in result.changes


def test_tiny_events_are_never_merged(tmp_path: Path) -> None:
    repo, ev = evidence(tmp_path / "kb")
    files = {
        f"{F}/repairs.md": small(f"{F}/repairs.md", "Repairs", [3, 4], ev, type="event"),
        f"{F}/repairs-students.md": small(f"{F}/repairs-students.md", "Repairs for students", [5], ev, type="event"),
    }
    assert merge_tiny(seed(repo, files), sorted(files), max_claims=1, today="2025-06-01").changes == {}


def test_a_tiny_page_without_sections_is_merged_with_its_citations_relabelled_once(tmp_path: Path) -> None:
    repo, ev = evidence(tmp_path / "kb")
    flat = page_for(
        f"{F}/repairs-students.md",
        "Repairs for students",
        "Repairs for students.",
        f"# Repairs for students\n\n- {LINES[4]}[^1]\n\n{cite('1', ev, 5)}\n",
        sources=[ev],
    )
    files = {f"{F}/repairs.md": small(f"{F}/repairs.md", "Repairs", [3, 4], ev), f"{F}/repairs-students.md": flat}
    target = merge_tiny(seed(repo, files), sorted(files), max_claims=1, today="2025-06-01").changes[f"{F}/repairs.md"]
    assert target.count(f'{ev}#L5 "Students get a discount on repairs"') == 1 and "[^3]: " in target and target.count("[^1]: ") == 1


def test_a_part_over_the_l1_budget_opens_with_an_overview_outline(tmp_path: Path) -> None:
    from ci.rules.budgets import check_page

    repo, ev = evidence(tmp_path / "kb")
    texts = seed(repo, {f"{F}/shop.md": big_page(ev)})
    result = split_oversized(texts, [f"{F}/shop.md"], max_tokens=100, l1_tokens=40)
    repairs = parse_page(result.changes[f"{F}/shop-repairs.md"], f"{F}/shop-repairs.md")
    assert repairs.overview().split() == ["Sections", "of", "this", "page:", "-", "[Repairs](#repairs)", "-", "[Prices](#prices)"]
    assert check_page(repairs, 100, 40) == [] and repairs.body.count("[^4]") == 2
