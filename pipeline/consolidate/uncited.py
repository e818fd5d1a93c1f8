"""Evidence no page cites: the lines of each evidence item in a cycle's scope that state a fact
(a name, a number or a date) and that no citation span of any page covers.

The check is offline and bounded: one pass over each item's lines and over the pages' citations
(no model, no index). It is explainable: each finding is an item, a line and the words that made
the line a fact (``L12: Porto, 2023``). A line is a fact when, once a conversation line's
``[time] speaker:`` prefix is set aside, it holds a number, a month name or a capitalised word
that does not begin a sentence. Headings and fenced code are not statements and are not read.
The record keeps, per repository (one cycle), the totals and the items with the most uncited
lines, each with its first few lines; what to do with them is left to a person or a later
ingest (nothing is proposed from here).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kb.scopes import scope_for_path
from pipeline.consolidate.record import Uncited, UncitedItem
from pipeline.consolidate.view import CommitView

LISTED_ITEMS = 20  # items named in the record, the most uncited lines first
EXAMPLES = 3  # lines named per item
MAX_LINES = 5000  # lines read per item

_PREFIX_RE = re.compile(r"^\[[^\]]{1,40}\]\s*(?P<speaker>[^\[\]]{1,40}?):\s+")
_NUMBER_RE = re.compile(r"\b\d+(?:[.,:/-]\d+)*\b")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_MONTHS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_SENTENCE_END = frozenset('.!?:;"“(')
_NOT_NAMES = frozenset({"I", "I'm", "I've", "I'd", "I'll", "OK", "Ok"})


def speakers(lines: list[str]) -> frozenset[str]:
    """The names of a conversation's speakers (the first word of each ``[time] speaker:`` prefix)."""
    names = set()
    for line in lines[:MAX_LINES]:
        m = _PREFIX_RE.match(line.strip())
        if m and (word := _WORD_RE.match(m.group("speaker").strip())):
            names.add(word.group(0).lower())
    return frozenset(names)


def facts(line: str, people: frozenset[str] = frozenset()) -> list[str]:
    """The words that make ``line`` a fact: its numbers, month names and mid-sentence capitalised
    words; a speaker's name (or its short form: ``Mel`` of Melanie) is who talks, not a fact."""
    text = _PREFIX_RE.sub("", line.strip(), count=1)
    found = [m.group(0) for m in _NUMBER_RE.finditer(text)]
    for m in _WORD_RE.finditer(text):
        word = m.group(0).rstrip("'’-")
        before = text[: m.start()].rstrip()
        starts = not before or before[-1] in _SENTENCE_END or before.endswith(("-", "*", ">", "|"))
        if word.lower() in _MONTHS and word[0].isupper():
            found.append(word)
        elif word[0].isupper() and not starts and word not in _NOT_NAMES and any(c.islower() for c in word):
            if any(name.startswith(word.lower()) and len(word) >= 3 for name in people):
                continue
            found.append(word)
    return list(dict.fromkeys(found))


def _statements(lines: list[str]) -> Iterable[tuple[int, str]]:
    """(line number, text) of the lines that can state something: not headings, not fenced code."""
    fenced = False
    for number, line in enumerate(lines[:MAX_LINES], 1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or not stripped or stripped.startswith("#"):
            continue
        yield number, line


def _scopes(scope: str) -> set[str] | None:
    """The evidence scopes a cycle scope reads (None: all of them)."""
    if scope == "all":
        return None
    found = scope_for_path(scope + "/")
    return {found} if found else set()


def uncited_evidence(view: CommitView, scope: str) -> Uncited:
    """The uncited fact lines of every evidence item of ``scope`` at the view's commit."""
    covered: dict[str, set[int]] = {}
    for page in view.pages():
        for citation in page.structure.citations:
            if citation.evidence_id:
                covered.setdefault(citation.evidence_id, set()).update(range(citation.start, citation.end + 1))
    scopes = _scopes(scope)
    result = Uncited(items=0, with_uncited=0, fact_lines=0, lines=0, listed=[])
    listed: list[UncitedItem] = []
    for evidence_id, entry in sorted(view.evidence_entries.items()):
        if not entry.path or (scopes is not None and entry.scope not in scopes):
            continue
        lines = view.evidence_lines(evidence_id)
        if lines is None:
            continue
        result.items += 1
        cited = covered.get(evidence_id, set())
        item = UncitedItem(evidence=evidence_id, fact_lines=0, lines=0, examples=[])
        people = speakers(lines)
        for number, line in _statements(lines):
            words = facts(line, people)
            if not words:
                continue
            item.fact_lines += 1
            if number in cited:
                continue
            item.lines += 1
            if len(item.examples) < EXAMPLES:
                item.examples.append(f"L{number}: {', '.join(words[:6])}")
        result.fact_lines += item.fact_lines
        result.lines += item.lines
        if item.lines:
            result.with_uncited += 1
            listed.append(item)
    listed.sort(key=lambda i: (-i.lines, i.evidence))
    result.listed = listed[:LISTED_ITEMS]
    return result


def summary(found: Uncited) -> str:
    """One line for a person: how much evidence states what no page cites, and the first example."""
    if not found.lines:
        return f"every fact line of {found.items} evidence item(s) is cited"
    first = found.listed[0] if found.listed else None
    example = f" (most: {first.evidence}, {first.lines} line(s), e.g. {first.examples[0]})" if first and first.examples else ""
    return (
        f"{found.lines} of {found.fact_lines} fact line(s) (a name, number or date) in {found.with_uncited} of "
        f"{found.items} evidence item(s) no page cites{example}"
    )
