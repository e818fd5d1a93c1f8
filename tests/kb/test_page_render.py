"""The page renderer writes keys and values that read back identically (issue 10, low items):
YAML 1.1 words and numbers as text, null inside lists, infinite and NaN floats, quoted strings
that look like impossible dates, surrounding spaces, line breaks of every kind, characters YAML
does not allow raw, and keys that YAML would read as something else."""

from __future__ import annotations

import math

import pytest

from kb.page import parse_page, render, render_page

BASE = {"id": "knowledge/a", "type": "fact", "title": "A", "summary": "A.", "scope": "system"}

VALUES = [
    "no",
    "yes",
    "on",
    "off",
    "0x10",
    "0o17",
    "1e3",
    "1_000",
    "12:30",
    "~",
    "null",
    "None",
    ".inf",
    "2025-13-40",
    "2025-01-10T10:00:00.5Z",
    "2025-01-10 10:00:00",
    " leading",
    "trailing ",
    "two\nlines\n",
    "cr\rlf\r\n",
    "nel\x85ls\u2028ps\u2029",
    "tab\there",
    "bell\x07del\x7fc1\x9bbom\ufeffnon\ufffe",
    'quote " and \\ backslash',
    "a: b",
    "a #b",
    "a\t#b",
    "- item",
    "? key",
    "!tag",
    "&anchor",
    "*alias",
    "%directive",
    "@at",
    "`tick",
    "|",
    ">",
    "",
    "a, b",
    "[x]",
    "{y}",
    "a:b",
    "https://example.org/a?b=c#d",
    "emoji 🙂 and 公司",
    None,
    True,
    False,
    0,
    -7,
    10**30,
    1.5,
    1e16,
    -1e-7,
    float("inf"),
    float("-inf"),
    ["no", None, "", 1e16, float("inf"), "2025-13-40", ["x, y", None]],
    {"no": "yes", "1": 1, "a: b": None, "": "empty key", "nested": {"on": [None]}},
    [],
    {},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_value_reads_back_as_written(value: object) -> None:
    meta = BASE | {"extra": value, "tags": [value]}
    page = parse_page(render_page(meta, "body\n"), "knowledge/a.md")
    assert page.meta == meta
    assert render(page) == render_page(meta, "body\n")


@pytest.mark.parametrize("key", ["no", "yes", "on", "null", "1", "0x10", "1e3", "2025-01-10", "a: b", "#x", "-x", " sp", "x y"], ids=repr)
def test_a_key_reads_back_as_written(key: str) -> None:
    meta = BASE | {key: "v"}
    assert parse_page(render_page(meta, "body\n"), "knowledge/a.md").meta == meta


def test_nan_reads_back_as_nan() -> None:
    page = parse_page(render_page(BASE | {"score": float("nan"), "tags": [float("nan")]}, "b\n"), "knowledge/a.md")
    assert math.isnan(page.meta["score"]) and math.isnan(page.meta["tags"][0])
