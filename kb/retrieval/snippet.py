"""The passage of a hit that matched: a window of the chunk around the query's terms.

Terms are matched the way BM25 matched them (the same analyser: stems, Chinese words), so the
window shows why the hit ranked; a hit found by meaning alone (dense) gets the chunk's start.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from kb.citations import ANY_REF_RE
from kb.retrieval.analyzer import analyse

FOOTNOTE_REF_RE = ANY_REF_RE
WIDTH = 240


@dataclass(frozen=True)
class Passage:
    text: str
    spans: tuple[tuple[int, int], ...]  # character spans of matched terms in ``text``

    def highlighted(self, start: str, end: str) -> str:
        out, last = [], 0
        for a, b in self.spans:
            out += [self.text[last:a], start, self.text[a:b], end]
            last = b
        out.append(self.text[last:])
        return "".join(out)


def passage(text: str, query: str, width: int = WIDTH) -> Passage:
    """The ``width``-character window of ``text`` holding the most distinct query terms."""
    flat = " ".join(FOOTNOTE_REF_RE.sub("", unicodedata.normalize("NFKC", text)).split())
    terms = {token for token, _, _ in analyse(query)}
    matches = [(token, a, b) for token, a, b in analyse(flat) if token in terms]
    start = _best_start(matches, width) if matches else 0
    start = _word_start(flat, start)
    end = min(len(flat), start + width)
    if end < len(flat):
        cut = flat.rfind(" ", start, end)
        end = cut if cut > start + width // 2 else end
    window = flat[start:end]
    lead = "… " if start > 0 else ""
    tail = " …" if end < len(flat) else ""
    shift = len(lead) - start
    spans = tuple((a + shift, b + shift) for _, a, b in matches if a >= start and b <= end)
    return Passage(lead + window + tail, spans)


def _best_start(matches: list[tuple[str, int, int]], width: int) -> int:
    best, best_count = 0, -1
    for i, (_, a, _) in enumerate(matches):
        inside = {token for token, x, y in matches[i:] if y <= a + width}
        if len(inside) > best_count:
            best, best_count = a, len(inside)
    return max(0, best - width // 6)  # a little context before the first term


def _word_start(text: str, index: int) -> int:
    if index <= 0:
        return 0
    space = text.rfind(" ", 0, index)
    return space + 1 if space >= 0 else 0
