"""Progressive disclosure: read_page levels, bounded sections with cursors, grep; all scoped."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.errors import NotFoundError, UsageError
from kb.repo import Repo
from kb.retrieval.reading import grep, read_page, read_section
from tests.builders import commit, make_repo, page_for, sections

LONG = "\n".join(f"Line {i}: the anvil ledger records delivery number {i} to the canyon." for i in range(120))
GUIDE = page_for(
    "knowledge/guide.md",
    "Anvil guide",
    "How Acme ships anvils.",
    "# Anvil guide\n\n## Overview\n\nAcme ships anvils by rail.\n\n"
    + sections(("Ledger", LONG), ("Returns", "Returns within **30 days**.\n\n### Damaged anvils\n\nDamaged anvils are replaced.")),
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = make_repo(
        tmp_path_factory.mktemp("disclosure") / "kb",
        {
            "knowledge/guide.md": GUIDE,
            "users/alice/notes.md": page_for(
                "users/alice/notes.md", "Alice's notes", "Alice keeps anvils.", "Alice keeps three anvils in the garage."
            ),
        },
    )
    return repo


def test_l0_is_summary_and_outline_with_anchors_lines_and_sizes(repo: Repo) -> None:
    view = read_page(repo, "knowledge/guide")
    assert view.summary == "How Acme ships anvils." and view.text == "" and view.commit == str(repo.head().id)
    assert [(e.level, e.anchor) for e in view.outline] == [
        (1, "anvil-guide"),
        (2, "overview"),
        (2, "ledger"),
        (2, "returns"),
        (3, "damaged-anvils"),
    ]
    ledger = next(e for e in view.outline if e.anchor == "ledger")
    assert ledger.tokens > 1000 and GUIDE.splitlines()[ledger.line - 1] == "## Ledger"
    assert read_page(repo, "knowledge/guide.md").outline == view.outline


def test_l1_is_the_overview_and_l2_the_bounded_body(repo: Repo) -> None:
    assert read_page(repo, "knowledge/guide", level="L1").text == "Acme ships anvils by rail."
    l2 = read_page(repo, "knowledge/guide", level="L2", max_tokens=200)
    assert l2.text.startswith("# Anvil guide") and l2.next_cursor is not None


def test_a_long_section_comes_in_bounded_pieces_that_cover_it_exactly(repo: Repo) -> None:
    pieces, cursor = [], None
    for _ in range(100):
        view = read_section(repo, "knowledge/guide", "ledger", cursor=cursor, max_tokens=300)
        pieces.append(view.text)
        cursor = view.next_cursor
        if cursor is None:
            break
    assert len(pieces) > 3
    assert "\n".join(pieces) == "## Ledger\n\n" + LONG
    returns = read_section(repo, "knowledge/guide", "#returns")
    assert "### Damaged anvils" in returns.text and returns.next_cursor is None


def test_a_single_huge_line_is_cut_inside_the_line(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "kb", {"knowledge/blob.md": page_for("knowledge/blob.md", "Blob", "One long line.", "## Blob\n\n" + "z" * 5000)}
    )
    text, cursor = "", None
    while True:
        view = read_section(repo, "knowledge/blob", "blob", cursor=cursor, max_tokens=100)
        text += view.text + ("\n" if view.next_cursor and ":" not in view.next_cursor else "")
        cursor = view.next_cursor
        if cursor is None:
            break
    assert text == "## Blob\n\n" + "z" * 5000


def test_another_users_page_is_reported_like_a_missing_one(repo: Repo) -> None:
    assert "three anvils" in read_page(repo, "users/alice/notes", principal="user:alice", level="L2").text
    with pytest.raises(NotFoundError) as hidden:
        read_page(repo, "users/alice/notes", principal="user:bob")
    with pytest.raises(NotFoundError) as missing:
        read_page(repo, "users/alice/nothing-here", principal="user:bob")
    assert str(hidden.value).replace("notes", "X") == str(missing.value).replace("nothing-here", "X")
    with pytest.raises(NotFoundError):
        read_section(repo, "users/alice/notes", "x", principal="system")
    with pytest.raises(NotFoundError):
        read_page(repo, "knowledge/../users/alice/notes", principal="system")


def test_bad_arguments(repo: Repo) -> None:
    with pytest.raises(UsageError):
        read_page(repo, "knowledge/guide", level="L9")
    with pytest.raises(UsageError):
        read_section(repo, "knowledge/guide", "ledger", cursor="abc")
    with pytest.raises(UsageError):
        read_section(repo, "knowledge/guide", "ledger", cursor="1")  # outside the section
    with pytest.raises(NotFoundError):
        read_section(repo, "knowledge/guide", "no-such-section")


def test_grep_gives_page_anchor_and_line_within_scope(repo: Repo) -> None:
    result = grep(repo, "anvils are replaced")
    assert [(h.page, h.anchor, h.line) for h in result.hits] == [
        ("knowledge/guide", "damaged-anvils", GUIDE.splitlines().index("Damaged anvils are replaced.") + 1)
    ]
    assert {h.page for h in grep(repo, "anvils", principal="user:bob").hits} == {"knowledge/guide"}
    assert "users/alice/notes" in {h.page for h in grep(repo, "anvils", principal="user:alice").hits}
    regex = grep(repo, r"delivery number 1[0-9]\b", regex=True)
    assert len(regex.hits) == 10 and {h.anchor for h in regex.hits} == {"ledger"}
    assert grep(repo, "ANVIL GUIDE", ignore_case=True).hits and not grep(repo, "ANVIL GUIDE").hits
    assert len(grep(repo, "delivery", max_hits=5).hits) == 5 and grep(repo, "delivery", max_hits=5).truncated
    assert {h.page for h in grep(repo, "anvils", page="knowledge/guide").hits} == {"knowledge/guide"}
    with pytest.raises(NotFoundError):
        grep(repo, "anvils", page="users/alice/notes", principal="user:bob")


def test_read_and_grep_take_a_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb", {"knowledge/a.md": page_for("knowledge/a.md", "A", "First.", "Old words.")})
    first = str(repo.head().id)
    commit(repo, {"knowledge/a.md": page_for("knowledge/a.md", "A", "Second.", "New words.")})
    (repo.root / "knowledge/a.md").write_text(page_for("knowledge/a.md", "A", "Uncommitted.", "Dirty words."))
    assert read_page(repo, "knowledge/a").summary == "Second."
    assert read_page(repo, "knowledge/a", commit=first).summary == "First."
    assert grep(repo, "Old words", commit=first).hits and not grep(repo, "Old words").hits
    assert not grep(repo, "Dirty").hits


def test_a_huge_query_is_a_usage_error_at_once() -> None:
    import time

    from kb.errors import UsageError
    from kb.retrieval.search import MAX_QUERY_CHARS, make_query

    start = time.perf_counter()
    try:
        make_query("word " * 20_000)
    except UsageError as exc:
        assert "over the limit" in exc.message and exc.exit_code == 2
    else:
        raise AssertionError("a 100 KB query was accepted")
    assert time.perf_counter() - start < 1
    assert make_query("x" * MAX_QUERY_CHARS).text == "x" * MAX_QUERY_CHARS
