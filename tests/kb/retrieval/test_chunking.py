"""Chunking: structure, size bound, overlap, termination, stable ids, context, evidence."""

from __future__ import annotations

from itertools import pairwise

from kb.page import parse_page
from kb.retrieval.analyzer import tokenize
from kb.retrieval.chunking import chunk_conversation, chunk_evidence, chunk_page
from kb.tokens import count_tokens
from tests.builders import page_for, sections

PATH = "knowledge/acme.md"


def acme(body: str) -> str:
    return page_for(PATH, "Acme Corp", "Acme Corp makes anvils in Springfield.", body)


def chunks_of(body: str, bound: int = 60, overlap: int = 12) -> list:
    return chunk_page(parse_page(acme(body), PATH), bound, overlap)


def test_sections_become_chunks_with_page_anchors_and_file_lines() -> None:
    text = acme(
        "# Acme Corp\n\nIntro.\n\n" + sections(("Finances", "The company grew 3% in 2024."), ("People", "Wile E. Coyote buys anvils."))
    )
    page = parse_page(text, PATH)
    chunks = chunk_page(page, 60, 12)
    assert [c.anchor for c in chunks] == ["acme-corp", "finances", "people"]
    assert {c.anchor for c in chunks} <= page.structure.anchors
    lines = text.splitlines()
    for chunk in chunks:
        assert chunk.body.splitlines()[0] == lines[chunk.line_start - 1]
        assert chunk.body.splitlines()[-1] == lines[chunk.line_end - 1]
    finances = chunks[1]
    assert finances.headings == ("Acme Corp", "Finances")
    # the context travels with the chunk: a query naming the company matches it
    assert "Acme Corp" in finances.text and "Springfield" in finances.text and "grew 3%" in finances.text
    assert "acm" in tokenize(finances.text)


def test_tables_lists_and_code_stay_whole_when_they_fit() -> None:
    table = "| year | growth |\n|---|---|\n| 2023 | 2% |\n| 2024 | 3% |"
    listing = "- one\n- two\n  - two and a half\n- three"
    code = "```python\ndef f():\n\n    return 1\n```"
    chunks = chunks_of(sections(("T", table), ("L", listing), ("C", code)), bound=200)
    bodies = [c.body for c in chunks]
    assert table in bodies[0] and listing in bodies[1] and code in bodies[2]


def test_size_bound_and_overlap_on_a_long_paragraph() -> None:
    paragraph = " ".join(f"Sentence {i} says the anvils weigh {i} kilograms." for i in range(60))
    chunks = chunks_of(sections(("Long", paragraph)), bound=60, overlap=15)
    assert len(chunks) > 5
    assert all(count_tokens(c.body) <= 60 + 2 for c in chunks)
    for first, second in pairwise(chunks):
        last_sentence = first.body.rsplit(". ", 1)[-1]
        assert second.body.startswith(last_sentence.rstrip(".")), "consecutive pieces share a sentence"
    covered = " ".join(c.body for c in chunks)
    assert all(f"Sentence {i} " in covered for i in range(60))


def test_big_table_is_split_by_rows_repeating_the_header() -> None:
    rows = "".join(f"| {2000 + i} | {i}% |\n" for i in range(80))
    chunks = chunks_of(sections(("Growth", "| year | growth |\n|---|---|\n" + rows)), bound=60, overlap=0)
    assert len(chunks) > 3
    assert all(c.body.startswith("| year | growth |\n|---|---|\n| ") for c in chunks)
    assert all(count_tokens(c.body) <= 62 for c in chunks)


def test_terminates_on_text_without_separators() -> None:
    for blob in ("x" * 20_000, "汉字没有标点" * 2_000):
        chunks = chunks_of(sections(("Blob", blob)), bound=50, overlap=10)
        assert 10 < len(chunks) < 2_000
        assert all(0 < count_tokens(c.body) <= 50 for c in chunks)
        assert chunks[0].body[:10] == blob[:10] and chunks[-1].body.endswith(blob[-10:])


def test_overlap_larger_than_the_bound_still_terminates() -> None:
    chunks = chunks_of(sections(("Blob", "y" * 5_000)), bound=20, overlap=500)
    assert chunks and all(count_tokens(c.body) <= 20 for c in chunks)


def test_ids_are_stable_and_an_edit_only_touches_its_section() -> None:
    body = sections(("A", "Alpha text."), ("B", "Beta text."), ("C", "Gamma text."))
    before = chunks_of(body)
    assert [c.id for c in before] == [c.id for c in chunks_of(body)]
    assert [c.id for c in before] == ["knowledge/acme#a~0", "knowledge/acme#b~0", "knowledge/acme#c~0"]
    after = chunks_of(body.replace("Beta text.", "Beta text, edited."))
    changed = [a.id for a, b in zip(before, after, strict=True) if a.content_hash != b.content_hash]
    assert changed == ["knowledge/acme#b~0"]


def test_conversation_chunks_keep_whole_turns_with_speaker_and_time() -> None:
    lines = [
        f"[2025-01-0{1 + i % 9}T10:00:00Z] {'user' if i % 2 == 0 else 'assistant'} (t{i}): message number {i} about peanuts"
        for i in range(40)
    ]
    lines.insert(5, "    a continuation line of turn 4")
    content = "\n".join(lines) + "\n"
    chunks = chunk_conversation("ev-0123456789abcdef", "chat.json", content, 60, 12)
    assert len(chunks) > 3
    stored = content.splitlines()
    for chunk in chunks:
        body_lines = chunk.body.splitlines()
        assert body_lines[0].startswith("[2025-01-0")
        assert body_lines == stored[chunk.line_start - 1 : chunk.line_end]  # whole messages, real lines
    assert "    a continuation line of turn 4" in "\n".join(c.body for c in chunks)


def test_a_long_message_is_split_and_each_piece_keeps_its_head() -> None:
    message = "[2025-01-01T10:00:00Z] user (t1): " + " ".join(f"I went to place number {i}." for i in range(80))
    chunks = chunk_evidence("ev-0123456789abcdef", "conversation", "chat.json", message + "\n", 50, 10)
    assert len(chunks) > 3
    assert all(c.body.startswith("[2025-01-01T10:00:00Z] user (t1): ") for c in chunks)
    assert all(c.line_start == c.line_end == 1 for c in chunks)


def test_documents_in_evidence_are_chunked_by_structure() -> None:
    content = "# Policy\n\nRefunds within 30 days.\n\n## Exceptions\n\nSale items are final.\n"
    chunks = chunk_evidence("ev-0123456789abcdef", "document", "policy.md", content, 60, 10)
    assert [(c.anchor, c.line_start) for c in chunks] == [("policy", 3), ("exceptions", 7)]
    assert all(c.namespace == "evidence" and c.doc == "ev-0123456789abcdef" for c in chunks)


def test_a_sentence_introducing_a_code_block_stays_with_it() -> None:
    """A paragraph followed by the code (table, list) it introduces, and the footnote reference
    that cites the block, are one unit: a chunk boundary never falls between them when they fit."""
    filler = " ".join(f"Fact {i} is about anvils in the warehouse." for i in range(6))
    intro = "Convertors are used by prefixing them with a colon, like so:[^1]"
    code = "```python\nRoute('/users/{user_id:int}', user)\n```"
    bound = count_tokens(filler) + count_tokens(intro) + 4  # the filler and the intro fit; the code does not
    chunks = chunks_of(sections(("Paths", f"{filler}\n\n{intro}\n\n{code}\n\n[^2]")), bound=bound, overlap=0)
    holding = [c for c in chunks if "user_id:int" in c.body]
    assert len(holding) == 1
    assert intro in holding[0].body and holding[0].body.rstrip().endswith("[^2]")
    assert all(count_tokens(c.body) <= bound + 2 for c in chunks)
    covered = " ".join(c.body for c in chunks)
    assert all(f"Fact {i} " in covered for i in range(6))


def test_a_footnote_reference_after_a_block_stays_with_the_block() -> None:
    first = " ".join(f"Point {i} holds." for i in range(12))
    table = "| year | growth |\n|---|---|\n| 2023 | 2% |\n| 2024 | 3% |"
    bound = count_tokens(first) + count_tokens(table) + 3  # the footnote reference after the table does not fit
    chunks = chunks_of(sections(("T", f"{first}\n\n{table}\n\n[^7]\n\nThe end of it all.")), bound=bound, overlap=0)
    assert not any(c.body.lstrip().startswith("[^7]") for c in chunks)
    assert any(table in c.body and "[^7]" in c.body for c in chunks)


def test_a_list_of_links_to_the_page_own_sections_is_navigation_not_chunk_text() -> None:
    """An outline (every item a link to an anchor of the same page) names the sections, which
    are chunks of their own: indexed, it would make the Overview match every section's words."""
    outline = "- [Background Task](#background-task)\n- [Background Tasks](#background-tasks)\n  - [Order](#order)"
    body = sections(
        ("Overview", f"Acme runs tasks after a response.\n\nSections of this page:\n\n{outline}"),
        ("Background Task", "Use `BackgroundTask(func)` for one task."),
    )
    chunks = chunks_of(body, bound=200)
    overview = next(c for c in chunks if c.anchor == "overview")
    assert "Acme runs tasks after a response." in overview.body
    assert "](#" not in overview.body and "Background Task" not in overview.body
    # a list that links elsewhere, or says more than a link, is content
    kept = chunks_of(sections(("See", "- [Specs](other.md#top)\n- [Order](#order) and why it matters")), bound=200)
    assert "[Specs](other.md#top)" in kept[0].body and "why it matters" in kept[0].body
