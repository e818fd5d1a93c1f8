"""Characters that must not reach a one-line field or a terminal as they are: line boundaries,
C0 and C1 controls, bidirectional overrides, invisible format characters.

Two uses, two functions:

- ``clean_label``: a name, source, title or label that kb stores in a line-based record (the
  ledger is one JSON object per ``\\n``-ended line; commit messages and page headers are read by
  people and tools line by line). Every line boundary and control character becomes a space (a
  run of them one space), every format character (bidi embeddings, overrides, isolates and
  marks; zero-width spaces and joiners; the BOM; the tag characters that can smuggle hidden
  ASCII) is dropped, a lone surrogate (an undecodable byte of a file name) becomes U+FFFD. What
  is left is one line that shows what it says: ``meeting<U+2028>notes.md`` is stored as
  ``meeting notes.md``, ``report<U+202E>fdp.exe`` as ``reportfdp.exe``.
- ``visible``: stored text (evidence, pages, sources) printed on a terminal. Every control
  character but the newline and the tab, the line and paragraph separators and the bidi
  controls are shown as escapes (``\\x1b``, ``\\x85``, ``\\u202e``) so that text from outside can
  neither drive the terminal (ESC sequences, BEL, backspaces, carriage returns that overwrite a
  line) nor reorder what a reader sees. ``json_visible`` does the same for JSON text with JSON's
  own ``\\uXXXX`` escapes, so JSON output still decodes to exactly the stored value.

Both are idempotent and leave ordinary text (any script, emoji, combining marks) untouched.
"""

from __future__ import annotations

import re
import unicodedata

# Bidi controls: ALM, LRM, RLM, the embeddings and overrides (LRE RLE PDF LRO RLO), the isolates
# (LRI RLI FSI PDI). All are format characters (Cf), listed so that ``visible`` escapes them.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

# What ``visible`` escapes: C0 but \t and \n, DEL, C1 (NEL and CSI included), LS, PS, lone
# surrogates (which no terminal encoding can write), the bidi controls.
_SHOWN_ESCAPED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff" + "".join(sorted(BIDI_CONTROLS)) + "]")
# JSON escapes C0 itself; these pass through ``json.dumps(..., ensure_ascii=False)`` raw.
_JSON_RAW = re.compile("[\x7f-\x9f\u2028\u2029" + "".join(sorted(BIDI_CONTROLS)) + "]")


def _label_char(char: str) -> str:
    """What one character of a label becomes: itself, a space (``\\x00`` marks it) or nothing."""
    category = unicodedata.category(char)
    if category in ("Cc", "Zl", "Zp"):
        return "\x00"
    if category == "Cf":
        return ""
    if category == "Cs":
        return "\ufffd"
    return char


def clean_label(text: str) -> str:
    """``text`` as one visible line (see the module docstring). A label with nothing to clean is
    returned as it is; one that had something cleaned is also stripped of surrounding spaces."""
    if text.isprintable():  # the common case (str.isprintable is False for Cc, Cf, Zl, Zp, Cs)
        return text
    joined = "".join(_label_char(char) for char in text)
    return re.sub("[\x00\\s]*\x00[\x00\\s]*", " ", joined).strip()


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` for a terminal: controls, separators and bidi controls shown as escapes."""
    return _SHOWN_ESCAPED.sub(_escape, text)


def json_visible(json_text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with the characters ``visible`` would
    escape written as JSON ``\\uXXXX`` escapes: the same value, safe to print. Those characters
    can only stand inside JSON strings, where such an escape means the character itself."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json_text)
