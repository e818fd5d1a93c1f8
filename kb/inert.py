"""Making tags inside untrusted text inert: the one definition shared by the agents' untrusted-data
blocks and the memory context handed to other agents.

A tag that could close (or open) a block is found in a normalised view of the text, so that
look-alikes count too: full-width and other compatibility forms (``＜／untrusted-data＞``, by
NFKC), tags split by zero-width characters (``</untr\u200busted-data>``), and entity-encoded
openers (``&lt;/untrusted-data&gt;``, ``&#60;``, ``&#x3c;``). Only the opening character of each
such tag is changed in the original text: ``<`` and its look-alikes become ``‹`` (U+2039, which
no normal form turns back into ``<``), an entity's ``&`` becomes ``&amp;``. Everything else stays
verbatim and quotable, and the result has nothing left to make inert (the pass is idempotent).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

# Characters that render as nothing: a tag split by them still reads as a tag.
_INVISIBLE = frozenset("\u00ad\u180e\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff")
_OPENER = r"(?:<|&lt;?|&#0*60;?|&#x0*3c;?)"
INERT_OPENER = "\u2039"


def _view(text: str) -> tuple[str, list[int]]:
    """The NFKC form of ``text`` without invisible characters, and for each of its characters
    the index of the original character it came from."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if char in _INVISIBLE:
            continue
        for part in unicodedata.normalize("NFKC", char):
            chars.append(part)
            origin.append(index)
    return "".join(chars), origin


def make_tags_inert(text: str, names: Iterable[str]) -> str:
    """``text`` with every opening or closing tag named in ``names`` made inert."""
    pattern = re.compile(rf"{_OPENER}\s*/?\s*(?:{'|'.join(re.escape(n) for n in names)})(?![\w-])", re.IGNORECASE)
    view, origin = _view(text)
    starts = sorted({origin[m.start()] for m in pattern.finditer(view)}, reverse=True)
    for index in starts:
        replacement = "&amp;" if text[index] == "&" else INERT_OPENER
        text = text[:index] + replacement + text[index + 1 :]
    return text
