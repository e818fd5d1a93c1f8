"""Pages round-trip byte for byte; structure (sections, links, citations, claims) is found."""

from __future__ import annotations

import pytest

from kb.errors import FormatError
from kb.markdown import format_citation, parse_citation, parse_structure, slugify
from kb.page import parse_page, render, render_page

CANONICAL = [
    """---
id: users/alice/travel-preferences
type: preference
title: Alice's travel preferences
summary: "Alice prefers window seats: always."
scope: user:alice
status: active
valid_from: 2025-01-10
valid_to:
supersedes: []
sources: [ev-9f2c4e1ab07d3c55]
verified: {at: 2025-01-11T09:00:00Z, by: openai/gpt-5, claims: 2, supported: 2}
---
# Alice's travel preferences

- Prefers window seats.[^1]

[^1]: ev-9f2c4e1ab07d3c55#L3 "I prefer window seats"
""",
    """---
id: knowledge/zh/公司
type: fact
title: "no"
summary: 公司去年增长了3%。
scope: system
status: disputed
tags: ["a, b", "1.10", "12:30"]
---
正文
""",
]


@pytest.mark.parametrize("text", CANONICAL)
def test_canonical_pages_round_trip_byte_for_byte(text: str) -> None:
    page = parse_page(text, "x.md")
    assert render(page) == text


def test_yaml_traps_are_quoted_when_rendered() -> None:
    meta = {
        "id": "knowledge/a",
        "type": "fact",
        "title": "no",
        "summary": "1.10",
        "scope": "system",
        "status": "active",
        "tags": ["12:30", "yes"],
    }
    text = render_page(meta, "body\n")
    assert parse_page(text, "knowledge/a.md").meta == meta


def test_structure_sections_links_citations() -> None:
    page = parse_page(
        CANONICAL[0].replace(
            "- Prefers", "See [[knowledge/x#y-z]] and [o](other.md#top).\n\n## Détails du 2e vol\n\n```\n[[not-a-link]]\n```\n\n- Prefers"
        ),
        "users/alice/travel-preferences.md",
    )
    s = page.structure
    assert [(x.level, x.anchor) for x in s.sections] == [(1, "alices-travel-preferences"), (2, "détails-du-2e-vol")]
    assert [(x.kind, x.target, x.anchor, x.line) for x in s.links] == [("wiki", "knowledge/x", "y-z", 16), ("md", "other.md", "top", 16)]
    assert s.citations[0].evidence_id == "ev-9f2c4e1ab07d3c55" and s.citations[0].quote == "I prefer window seats"
    assert s.claims[0].text == "Prefers window seats.[^1]" and s.claims[0].labels == ("1",)


def test_claims_end_after_a_closing_quote_with_references_and_keep_references_at_block_end() -> None:
    body = (
        '- Jo said: "I live in Lyon."[^a] _(no longer current since 2024-06-01)_\n'
        '- He said "stop." and left.[^b] Then more.[^c]\n'
        "- 北京很大。[^d]下一句。[^e]\n"
    )
    claims = [(c.text, c.labels) for c in parse_structure(body).claims]
    assert claims == [
        ('Jo said: "I live in Lyon."[^a]', ("a",)),  # the note after the reference is not part of the claim
        ('He said "stop." and left.[^b]', ("b",)),  # a quoted sentence inside does not end the claim
        ("Then more.[^c]", ("c",)),
        ("北京很大。[^d]", ("d",)),
        ("下一句。[^e]", ("e",)),  # the last sentence keeps its text
    ]


def test_citation_format_round_trips_quotes_with_escapes() -> None:
    line = format_citation("2", "ev-0123456789abcdef", 3, 4, 'he said "no"')
    cite = parse_citation("2", 9, line.split(": ", 1)[1])
    assert (cite.evidence_id, cite.start, cite.end, cite.quote) == ("ev-0123456789abcdef", 3, 4, 'he said "no"')


def test_slugs_keep_cjk_and_drop_punctuation() -> None:
    assert slugify("北京 的 天气!") == "北京-的-天气"
    assert slugify("Q&A: What's new?") == "qa-whats-new"


def test_malformed_pages_are_format_errors_with_line() -> None:
    with pytest.raises(FormatError, match=r"x.md:3: malformed YAML"):
        parse_page("---\nid: a\ntitle: [x\n---\nbody\n", "x.md")
    with pytest.raises(FormatError, match="missing frontmatter"):
        parse_page("# no header\n", "x.md")
    with pytest.raises(FormatError, match="not UTF-8"):
        parse_page(b"---\nid: \xff\n---\n", "x.md")


def test_format_errors_carry_their_location_as_fields() -> None:
    with pytest.raises(FormatError) as raised:
        parse_page("---\nid: a\ntitle: [x\n---\nbody\n", "x.md")
    assert (raised.value.path, raised.value.line) == ("x.md", 3)
    assert raised.value.detail.startswith("malformed YAML frontmatter")
    assert raised.value.message == f"x.md:3: {raised.value.detail}"
    with pytest.raises(FormatError) as raised:
        parse_page(b"---\nid: \xff\n---\n", "x.md")
    assert (raised.value.path, raised.value.line, raised.value.message) == ("x.md", None, "x.md: not UTF-8 text (byte 8)")


def test_citation_ids_have_exactly_16_hex_digits() -> None:
    assert parse_citation("1", 1, 'ev-0123456789abcdef#L1 "x"').evidence_id == "ev-0123456789abcdef"
    for short_or_long in ("ev-deadbeef", "ev-0123456789abcdef0", "ev-" + "0" * 64):
        assert parse_citation("1", 1, f'{short_or_long}#L1 "x"').evidence_id is None
