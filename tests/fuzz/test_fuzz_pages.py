"""Fuzz the page parser and renderer: any text is a page or a FormatError; rendering a parsed
page is stable; a generated page reads back as it was written."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kb.page import Page, parse_page, render, render_page
from tests.fuzz.strategies import json_scalars, only_kb_errors, text, words, yaml_like

bodies = st.text(st.characters(exclude_categories=("Cs",)), max_size=200)
headers = st.one_of(
    yaml_like, st.lists(st.tuples(words, st.one_of(words, yaml_like)), max_size=6).map(lambda kv: "".join(f"{k}: {v}\n" for k, v in kv))
)


@given(st.one_of(text, bodies, st.binary(max_size=200)))
def test_any_text_is_a_page_or_a_format_error(data: str | bytes) -> None:
    only_kb_errors(lambda: parse_page(data, "knowledge/x.md"))


@given(headers, bodies)
def test_any_header_is_a_page_or_a_format_error(header: str, body: str) -> None:
    only_kb_errors(lambda: parse_page(f"---\n{header}\n---\n{body}", "knowledge/x.md"))


@given(headers, bodies)
def test_rendering_a_parsed_page_is_stable(header: str, body: str) -> None:
    page = only_kb_errors(lambda: parse_page(f"---\n{header}\n---\n{body}", "knowledge/x.md"))
    if page is None:
        return
    once = render(page)
    assert render(parse_page(once, "knowledge/x.md")) == once


floats = st.floats(allow_nan=False)  # NaN never equals itself; tests/kb/test_page_render.py reads it back
values = st.recursive(
    st.one_of(json_scalars, floats),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(words, inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(words, values, max_size=8), bodies)
def test_a_generated_page_reads_back_as_written(meta: dict[str, Any], body: str) -> None:
    text = render_page(meta, body)
    page = parse_page(text, "knowledge/x.md")
    assert page.meta == meta and page.body == body
    assert render(page) == text


def test_nan_survives_a_round_trip() -> None:
    page: Page = parse_page(render_page({"x": float("nan")}, ""), "knowledge/x.md")
    assert math.isnan(page.meta["x"])
