"""``kb.controls``: labels cleaned to one visible line, stored text made safe for a terminal."""

from __future__ import annotations

import json

import pytest

from kb.controls import clean_label, json_visible, visible

# every line boundary str.splitlines knows, the other C0 and C1 controls, the bidi controls,
# invisible format characters
LINE_BOUNDARIES = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
CONTROLS = "\x00\x01\x07\x08\x09\x1b\x7f\x9b"
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff\U000e0041"


@pytest.mark.parametrize("char", list(LINE_BOUNDARIES + CONTROLS))
def test_a_line_boundary_or_control_becomes_one_space(char: str) -> None:
    assert clean_label(f"meeting{char}notes.md") == "meeting notes.md"
    assert clean_label(f"{char}notes.md{char}") == "notes.md"


@pytest.mark.parametrize("char", list(BIDI + INVISIBLE))
def test_a_format_character_is_dropped(char: str) -> None:
    assert clean_label(f"report{char}fdp.exe") == "reportfdp.exe"


def test_runs_collapse_ordinary_text_stays_and_cleaning_is_idempotent() -> None:
    assert clean_label("a\r\n\u2028 \tb") == "a b"
    for text in ("Zoë's notes.md", "会议记录.md", "مذكرة.txt", "x  y.md", " lead.md", "emoji 🙂.md", "café\u0301.md"):
        assert clean_label(text) == text
    dirty = "\u202e a\x1b[31m\u2028b\udcff\u00a0c "
    assert clean_label(dirty) == "a [31m b\ufffd\u00a0c"
    assert clean_label(clean_label(dirty)) == clean_label(dirty)
    assert clean_label("\u200b\u2028") == ""


def test_visible_escapes_what_drives_a_terminal_and_keeps_newlines_and_tabs() -> None:
    text = "bell\x07 esc\x1b[2J bs\x08 cr\r nel\x85 csi\x9b ls\u2028 rlo\u202e\ttab\nnext"
    assert visible(text) == "bell\\x07 esc\\x1b[2J bs\\x08 cr\\x0d nel\\x85 csi\\x9b ls\\u2028 rlo\\u202e\ttab\nnext"
    assert visible(visible(text)) == visible(text)
    assert visible("会议 🙂 zero\u200bwidth") == "会议 🙂 zero\u200bwidth"


def test_json_visible_keeps_the_exact_value() -> None:
    value = {"source": "a\x85b\u2028c\u202ed\x1b", "n": 1}
    raw = json.dumps(value, ensure_ascii=False)
    shown = json_visible(raw)
    assert json.loads(shown) == value
    assert not any(char in shown for char in "\x85\u2028\u202e\x1b")
