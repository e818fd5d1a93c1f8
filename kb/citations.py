"""The page text format of citations: the one module that reads and writes it.

A claim carries footnote references (``[^3]``); a footnote definition is a citation of evidence
lines with a verbatim quote: ``[^3]: ev-5e807233ce749f70#L3-L4 "the quoted text"`` (the quote a
JSON string). A *span* is the part before the quote (``ev-…#L3-L4``; one line is ``#L3``). A
*claim bullet* is a list item whose text ends in references, optionally followed by a note
(``- Alice moved to Lyon.[^2] _(since 2023)_``).

Every other module reads and writes these through the values and functions here (the layer test
``tests/test_page_format_owner.py`` fails on a footnote, span or evidence-id pattern spelled
anywhere else); the evidence-id pattern itself is defined in :mod:`kb.ids`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from kb.ids import EVIDENCE_ID_PATTERN

# A footnote label: anything up to the closing bracket, no whitespace.
LABEL = r"[^\]\s]+"
# A reference to a footnote (not the opening of its definition).
FOOTREF_RE = re.compile(rf"\[\^({LABEL})\](?!:)")
# Any ``[^label]``, the opening of a definition included.
ANY_REF_RE = re.compile(rf"\[\^({LABEL})\]")
# A run of adjacent references (``[^1][^2]``).
REFS_RUN_RE = re.compile(rf"(?:\[\^{LABEL}\])+")
# A block holding nothing but references (a *block claim*'s reference paragraph).
REFS_ONLY_RE = re.compile(rf"^\s*(?:\[\^{LABEL}\]\s*)+$")
# A footnote definition line: label, then whatever follows the colon.
FOOTDEF_RE = re.compile(rf"^\[\^({LABEL})\]:[ \t]*(.*)$")
# What a well-formed definition holds after the colon: span and JSON-string quote.
CITATION_RE = re.compile(rf'^({EVIDENCE_ID_PATTERN})#L(\d+)(?:-L?(\d+))?\s+"((?:[^"\\]|\\.)*)"\s*$')
# A span on its own (``ev-…#L3-L4``); lenient on the id's length so that a malformed one is
# still recognised as a span and reported as unknown evidence.
SPAN_RE = re.compile(r"^(ev-[0-9a-f]+)#L(\d+)(?:-L?(\d+))?$")
# The evidence id a definition line cites, with or without a well-formed span and quote.
DEFINITION_SOURCE_RE = re.compile(rf"^\[\^({LABEL})\]:\s*(ev-[0-9a-f]+)(?:#L(\d+)(?:-L?(\d+))?)?", re.MULTILINE)
# A claim bullet: its list marker (with indentation), text, references, and what follows them.
CLAIM_BULLET_RE = re.compile(rf"^(\s*[-*+] )(.*?)((?:\[\^{LABEL}\])+)(.*)$")
# A footnote definition split as written: label, evidence id, first and last line, the raw quote.
FOOTDEF_PARTS_RE = re.compile(rf'^\[\^({LABEL})\]: (ev-[0-9a-f]+)#L(\d+)(?:-L(\d+))? "(.*)"\s*$')
# The start of a span: evidence id and first line, whatever follows.
SPAN_START_RE = re.compile(r"^(ev-[0-9a-f]+)#L(\d+)")
# A line span without its evidence id, both ends written (``L3-L4``).
LINE_PAIR_RE = re.compile(r"L(\d+)-L(\d+)")
# An evidence item's file in the repository.
EVIDENCE_FILE_RE = re.compile(rf"^evidence/\d{{4}}/\d{{2}}/({EVIDENCE_ID_PATTERN})\.md$")


@dataclass(frozen=True)
class Span:
    """Evidence lines ``start``..``end`` (1-based, inclusive) of one item."""

    evidence_id: str
    start: int
    end: int

    def __str__(self) -> str:
        return format_span(self.evidence_id, self.start, self.end)


@dataclass(frozen=True)
class Citation:
    """A footnote definition of a page: ``[^label]: ev-…#La-Lb "quote"`` at file line ``line``.
    ``evidence_id`` is None when the definition is malformed (``raw`` keeps what was written)."""

    label: str
    line: int
    evidence_id: str | None
    start: int = 0
    end: int = 0
    quote: str = ""
    raw: str = ""

    @property
    def span(self) -> Span | None:
        return Span(self.evidence_id, self.start, self.end) if self.evidence_id else None


@dataclass(frozen=True)
class ClaimLine:
    """A claim bullet split into its parts: ``head`` (indentation and list marker), ``text``,
    the ``labels`` it references and the ``tail`` after the references (a note, or nothing)."""

    head: str
    text: str
    labels: tuple[str, ...]
    tail: str

    @property
    def refs(self) -> str:
        return format_refs(self.labels)

    def __str__(self) -> str:
        return f"{self.head}{self.text}{self.refs}{self.tail}"


def parse_citation(label: str, line: int, rest: str) -> Citation:
    """The citation of a definition whose text after the colon is ``rest``."""
    match = CITATION_RE.match(rest.strip())
    if not match:
        return Citation(label=label, line=line, evidence_id=None, raw=rest)
    start = int(match.group(2))
    end = int(match.group(3) or start)
    try:
        quote = json.loads('"' + match.group(4) + '"')
    except json.JSONDecodeError:
        return Citation(label=label, line=line, evidence_id=None, raw=rest)
    return Citation(label=label, line=line, evidence_id=match.group(1), start=start, end=end, quote=quote, raw=rest)


def parse_definition(text: str, line: int = 0) -> Citation | None:
    """The citation of a footnote definition line, or None when ``text`` is not one."""
    match = FOOTDEF_RE.match(text)
    return parse_citation(match.group(1), line, match.group(2)) if match else None


def definition_label(text: str) -> str | None:
    """The label of a footnote definition line (``[^3]: …`` -> ``3``), or None."""
    match = FOOTDEF_RE.match(text)
    return match.group(1) if match else None


def format_span(evidence_id: str, start: int, end: int) -> str:
    return f"{evidence_id}#L{start}" if start == end else f"{evidence_id}#L{start}-L{end}"


def parse_span(text: str) -> Span | None:
    """``ev-…#L3-L4`` (or ``#L3``) as a span; None when ``text`` is not one."""
    match = SPAN_RE.match(text.strip())
    if not match:
        return None
    start = int(match.group(2))
    return Span(match.group(1), start, int(match.group(3) or start))


def format_citation(label: str, evidence_id: str, start: int, end: int, quote: str) -> str:
    return f"[^{label}]: {format_span(evidence_id, start, end)} {json.dumps(quote, ensure_ascii=False)}"


def format_ref(label: str) -> str:
    return f"[^{label}]"


def format_refs(labels: Iterable[str]) -> str:
    """The references to ``labels``, each once, in order."""
    return "".join(format_ref(label) for label in dict.fromkeys(labels))


def all_labels(text: str) -> set[str]:
    """Every label written in ``text``: references and definitions alike."""
    return set(ANY_REF_RE.findall(text))


def strip_refs(text: str) -> str:
    """``text`` without its footnote references."""
    return ANY_REF_RE.sub("", text)


def cited_evidence(text: str) -> list[str]:
    """The evidence ids the footnote definitions of ``text`` cite, sorted, each once."""
    return sorted({m.group(2) for m in DEFINITION_SOURCE_RE.finditer(text)})


def parse_claim_bullet(line: str) -> ClaimLine | None:
    """A list item carrying references as a :class:`ClaimLine`; None for any other line."""
    match = CLAIM_BULLET_RE.match(line)
    if not match:
        return None
    return ClaimLine(match.group(1), match.group(2), tuple(ANY_REF_RE.findall(match.group(3))), match.group(4))
