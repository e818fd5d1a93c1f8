"""The passage of a hit as a reader sees it: the stored text without markup, the sentence that
answers first.

``reader_text`` takes a hit's stored text (Markdown as the page holds it) and leaves what a
reader reads: footnote references (``[^3]``) go to a list of their labels (the citations, shown
apart), and lines that are only structure go: footnote definitions, admonition and tab openers
and closers (``!!! note``, ``/// tip | Title``, ``///``, ``=== "Tab"``, MyST ``:::``, Sphinx
``.. note::``), include directives (``--8<--``, ``{!file!}``) and attribute lists
(``{.class target=_blank}``). The characters are kept as written: a full-width comma stays one.

``passage`` then splits that text into sentences and starts at the one whose window (it and
the sentences after it that fit ``width`` characters) holds the most of the query: its distinct
terms matched the way BM25 matched them (the same analyser: stems, Chinese words), each weighted
by how few of the passage's sentences hold it, counted once per window; on a tie the start that
itself matches most, then the earliest (a section's lead sentence often says what it is for). The first sentence
is never cut. A hit found by meaning alone (no term matches) starts at its first sentence.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

from kb.citations import ANY_REF_RE, FOOTDEF_RE
from kb.retrieval.analyzer import analyse

WIDTH = 320  # characters of the printed passage besides the answer-bearing sentence itself
MAX_SENTENCE = 600  # a "sentence" longer than this (a table, a wall of text) is cut at a word

# Lines that are structure, not text (matched after the line's indentation).
_STRUCTURE_LINE_RE = re.compile(
    r"""^(?:
        /{3,}(?:\s*[\w-]+)?(?:\s*\|.*)?          # pymdownx blocks: /// tip | Title, ////, //// tab | Label
      | (?:!!!|\?\?\?\+?)\s*[\w-]+.*             # admonitions: !!! note "Title", ???+ tip
      | ===\+?\s*".*"                            # tabbed content: === "Python"
      | :{3,}.*                                  # MyST colon fences: ::: {note}, :::
      | \.\.\s+[\w:-]+::.*                       # Sphinx directives: .. note::, .. include:: x.rst
      | -{2}8<-{2}.*                             # snippet includes: --8<-- "file.md"
      | \{!.*!\}                                 # include macros: {!../docs_src/x.py!}
      | \{\s*[:.#][^{}]*\}                       # attribute list on its own line: {: .class }
      | `{3,}\s*\{[\w:-]+\}.*                    # MyST directive fences: ```{note}
    )\s*$""",
    re.VERBOSE,
)
# Inline markup that is not text: attribute lists after a link or heading, include macros.
_INLINE_ATTRS_RE = re.compile(r"\{\s*[:.#][^{}\n]*\}|\{!.*?!\}")
# A sentence ends at ., !, ? (then a space and no lower-case letter) or at a Chinese full stop, exclamation or question mark.
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[^\sa-z])|(?<=[。！？；])")
_FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")


@dataclass(frozen=True)
class ReaderText:
    text: str
    citations: tuple[str, ...]  # footnote labels referred to in the text, in order of first use


@dataclass(frozen=True)
class Passage:
    text: str
    spans: tuple[tuple[int, int], ...]  # character spans of matched terms in ``text``
    answer: str = ""  # the sentence shown first
    citations: tuple[str, ...] = ()

    def highlighted(self, start: str, end: str) -> str:
        out, last = [], 0
        for a, b in self.spans:
            out += [self.text[last:a], start, self.text[a:b], end]
            last = b
        out.append(self.text[last:])
        return "".join(out)


def reader_text(text: str) -> ReaderText:
    """``text`` without footnote references, footnote definitions and structure-only lines."""
    labels: dict[str, None] = {}
    kept: list[str] = []
    fence = ""
    for line in text.splitlines():
        opener = _FENCE_RE.match(line)
        if fence:  # inside a code block every line is the reader's, markup-looking or not
            kept.append(line)
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
                fence = ""
            continue
        stripped = line.strip()
        if FOOTDEF_RE.match(stripped) or _STRUCTURE_LINE_RE.match(stripped):
            continue
        if opener:
            fence = opener.group(1)
            kept.append(line)
            continue
        for match in ANY_REF_RE.finditer(line):
            labels.setdefault(match.group(1), None)
        line = _INLINE_ATTRS_RE.sub("", ANY_REF_RE.sub("", line)).rstrip()
        if line.strip() or (kept and kept[-1].strip()):
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return ReaderText("\n".join(kept), tuple(labels))


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, whitespace folded; a code block or a table row is one unit."""
    out: list[str] = []
    prose: list[str] = []
    code: list[str] = []
    fence = ""

    def flush() -> None:
        if prose:
            flat = " ".join(" ".join(prose).split())
            out.extend(piece.strip() for piece in _SENTENCE_END_RE.split(flat) if piece.strip())
            prose.clear()

    for line in text.splitlines():
        opener = _FENCE_RE.match(line)
        if fence:
            code.append(line)
            if opener and opener.group(1)[0] == fence[0]:
                out.append("\n".join(code))
                code.clear()
                fence = ""
            continue
        if opener:
            flush()
            fence = opener.group(1)
            code.append(line)
        elif not line.strip() or line.lstrip().startswith(("#", "|", "- ", "* ", "+ ")) or re.match(r"\s*\d+[.)] ", line):
            flush()  # a blank line, heading, table row or list item starts a new unit
            if line.strip():
                prose.append(line.strip())
        else:
            prose.append(line.strip())
    flush()
    if code:
        out.append("\n".join(code))
    return out


def _terms(text: str) -> set[str]:
    return {token for token, _, _ in analyse(text)}


def best_sentence(units: list[str], query: str) -> int:
    """Index of the sentence of ``units`` that matches ``query`` best (0 when none matches):
    the sum over its distinct query terms of log(1 + sentences / sentences holding the term)."""
    wanted = _terms(query)
    if not wanted or not units:
        return 0
    held = [_terms(unit) & wanted for unit in units]
    df = {term: sum(term in h for h in held) for term in wanted}
    weights = [sum(math.log(1 + len(units) / df[t]) for t in h) for h in held]
    top = max(weights)
    return weights.index(top) if top > 0 else 0


def _window(units: list[str], start: int, width: int) -> list[int]:
    """The units shown from ``start``: it (whole), then the next ones while they fit ``width``."""
    shown, used = [start], 0
    for n in range(start + 1, len(units)):
        if used + len(units[n]) + 1 > width:
            break
        shown.append(n)
        used += len(units[n]) + 1
    return shown


def best_window(units: list[str], query: str, width: int = WIDTH) -> int:
    """Where the printed passage starts: the unit whose window (``_window``) holds the most
    query-term weight, each distinct term counted once (log(1 + units / units holding it)); on a
    tie the unit that itself holds the most, then the earliest (a section's lead sentence stays
    first when the sentences after it add nothing). 0 when no term matches."""
    wanted = _terms(query)
    if not wanted or not units:
        return 0
    held = [_terms(unit) & wanted for unit in units]
    df = {term: sum(term in h for h in held) for term in wanted}
    weight = {t: math.log(1 + len(units) / df[t]) for t in wanted if df[t]}
    best, top = 0, (0.0, 0.0)
    for start in range(len(units)):
        if not held[start]:
            continue  # a window starts on a sentence that matches
        covered = set().union(*(held[n] for n in _window(units, start, width)))
        score = (round(sum(weight[t] for t in covered), 9), round(sum(weight[t] for t in held[start]), 9))
        if score > top:
            best, top = start, score
    return best


def passage(text: str, query: str, width: int = WIDTH) -> Passage:
    """The reader's text of ``text`` from the start of its best window for ``query``
    (``best_window``: its first sentence whole, up to ``MAX_SENTENCE``, then the sentences after
    it while they fit ``width`` characters); ``answer`` is the window's best sentence."""
    reader = reader_text(text)
    units = sentences(reader.text)
    if not units:
        return Passage("", (), "", reader.citations)
    first = best_window(units, query, width)
    picked = _window(units, first, width)
    best = picked[best_sentence([units[n] for n in picked], query)]
    shown = [_cap(units[first], MAX_SENTENCE)] + [units[n] for n in picked[1:]]
    lead = "… " if first > 0 else ""
    tail = " …" if picked[-1] + 1 < len(units) else ""
    body = " ".join(" ".join(s.split()) if "\n" not in s else s for s in shown)
    out = lead + body + tail
    return Passage(out, _spans(out, _terms(query)), _cap(units[best], MAX_SENTENCE), reader.citations)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit] + " …"


def _spans(text: str, terms: set[str]) -> tuple[tuple[int, int], ...]:
    """Where the query's terms are in ``text`` (none when normalising would move characters)."""
    plain = text.replace("…", " ")  # the marks of left-out text (NFKC would make them three dots)
    if not terms or len(unicodedata.normalize("NFKC", plain)) != len(plain):
        return ()
    return tuple((a, b) for token, a, b in analyse(plain) if token in terms)
