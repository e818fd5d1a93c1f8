"""Meaning-level operators of the gate benchmark: edits that keep every number and name but change
what a claim says (modality, a dropped qualifier or scope, an invented cause, inflation, the two
sides of a relation swapped, a wrong sentence without references of its own inside a cited line,
a relative day read as the day it was said), and their faithful controls (a modal or qualifier
reworded within its meaning, a condition moved, a relative day resolved correctly).

The word lists here are the benchmark's own, written from how people edit text, not copied from
the checker (``ci.rules.support``): a benchmark built from the checker's lists would only measure
that the lists equal themselves.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator

from kb.citations import FOOTDEF_RE, FOOTREF_RE, REFS_RUN_RE, strip_refs
from pipeline.eval.mutations_base import MONTHS, NUMBER_RE, WEEKDAYS, Category, Corpus, Mutant, PageView, mutant

Edit = Callable[[str], Iterator[tuple[str, str]]]

MODAL_SWAPS = [
    (r"\bshould\b", "must"),
    (r"\bmay\b", "will"),
    (r"\bmight\b", "will"),
    (r"\bcan\b", "must"),
    (r"\bcould\b", "will"),
    (r"\bplans to\b", "has decided to"),
    (r"\bplanning to\b", "about to"),
    (r"\bwants to\b", "will"),
    (r"\bused to\b", "still"),
    (r"\bis recommended\b", "is required"),
]
MODAL_SYNONYMS = [(r"\bmust\b", "has to"), (r"\bshould\b", "ought to"), (r"\bmay\b", "might"), (r"\bmight\b", "may")]
QUALIFIER_PHRASES = [
    "by default", "usually", "typically", "often", "sometimes", "generally", "at least", "up to", "currently", "mostly",
    "in most cases", "optionally", "one of the", "almost", "on weekdays", "on weekends",
]  # fmt: skip
SCOPE_RE = re.compile(r",? (?:in|for|on|under|within) (?:the )?[A-Z][\w.+-]*(?: \d[\w.+]*\+?)?")
INFLATIONS = [(r"\bone of the (\w+?)s\b", r"the best \1"), (r"\bis an? (?=\w)", "is the best "), (r"\bsome\b", "most of the")]
SWAPS_RE = [
    re.compile(r"\bfrom (?P<a>[\w.-]+) to (?P<b>[\w.-]+)"),
    re.compile(r"\b(?P<a>[\w.-]+) (?:rather than|instead of) (?P<b>[\w.-]+)"),
    re.compile(r"\b(?P<a>[A-Za-z_][\w.-]*) (?P<verb>is|are) (?P<adj>\w+er) than (?P<b>[\w.-]+)"),
]
IF_RE = re.compile(r"^(?P<head>\s*(?:[-*+] )?)If (?P<cond>[^,]{3,80}), (?P<main>[^.]{3,120})\.(?P<rest>.*)$")
MAIN_IF_RE = re.compile(r"^(?P<head>\s*(?:[-*+] )?)(?P<main>[A-Z][^,.]{3,120}?) if (?P<cond>[^,.]{3,80})\.(?P<rest>.*)$")
REL_RE = re.compile(r"\b(?:(?P<dir>last) (?P<wd>" + "|".join(WEEKDAYS) + r")|(?P<y>yesterday))\b", re.IGNORECASE)
_ARTICLES = {"the", "a", "an", "this", "that", "your", "its", "their"}
_PRONOUNS = {"you", "it", "they", "we", "i", "he", "she", "there", "this", "that"}
STAMP_RE = re.compile(r"^\[(\d{4})-(\d{2})-(\d{2})")


def _ref_lines(view: PageView) -> Iterator[tuple[int, str]]:
    """Body lines that carry footnote references (bullets and paragraphs), definitions aside."""
    for i in range(view.header_end + 1, len(view.lines)):
        line = view.lines[i]
        if FOOTREF_RE.search(line) and not FOOTDEF_RE.match(line) and not line.lstrip().startswith(("#", "|", ">")):
            yield i, line


def _cited_text(view: PageView, corpus: Corpus, line: str) -> str:
    out = []
    for label in FOOTREF_RE.findall(line):
        d = view.defs.get(label)
        if d:
            out += [d.quote, *corpus.evidence.get(d.evidence_id, [])[d.start - 1 : d.end]]
    return "\n".join(out).lower()


def _on_lines(view: PageView, corpus: Corpus, operator: str, category: Category, edit: Edit, fresh: bool = True) -> Iterator[Mutant]:
    """Each edit of each referencing line; with ``fresh``, only edits whose new words are not
    in the cited lines (else the evidence could still support them)."""
    for i, line in _ref_lines(view):
        cited = _cited_text(view, corpus, line)
        for new, note in edit(line):
            token = note.rsplit(" -> ", 1)[-1].lower().strip()
            if new == line or (fresh and token and re.search(rf"(?<!\w){re.escape(token)}(?!\w)", cited)):
                continue
            yield mutant(view, operator, category, view.replace(i, new), f"line {i + 1}: {note}")


def _swaps(pairs: list[tuple[str, str]]) -> Edit:
    def edit(line: str) -> Iterator[tuple[str, str]]:
        for pattern, new in pairs:
            for m in re.finditer(pattern, line):
                yield line[: m.start()] + m.expand(new) + line[m.end() :], f"{m.group(0)} -> {m.expand(new)}"

    return edit


def modality_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    yield from _on_lines(view, corpus, "modality_changed", "grounding", _swaps(MODAL_SWAPS))


def qualifier_dropped(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    def edit(line: str) -> Iterator[tuple[str, str]]:
        for phrase in QUALIFIER_PHRASES:
            for m in re.finditer(rf",? ?\b{phrase}\b,?", line, re.IGNORECASE):
                new = line[: m.start()] + (" " if m.start() and line[m.start() - 1] != " " else "") + line[m.end() :].lstrip()
                new = re.sub(r"^(\s*(?:[-*+] )?)([a-z])", lambda g: g.group(1) + g.group(2).upper(), new) if m.start() <= 4 else new
                yield " ".join(new.split(" ")).replace("  ", " "), f"dropped {m.group(0).strip(' ,')!r} -> "
        for m in SCOPE_RE.finditer(strip_refs(line)):
            if m.group(0) in line and not any(mon in m.group(0) for mon in MONTHS + WEEKDAYS):
                yield line.replace(m.group(0), "", 1), f"dropped {m.group(0).strip(' ,')!r} -> "

    yield from _on_lines(view, corpus, "qualifier_dropped", "grounding", edit, fresh=False)


def cause_invented(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    """Two cited statements joined by "because" (or a sentence of a line joined to the next)."""
    lines = list(_ref_lines(view))
    for (i, a), (_, b) in zip(lines, lines[1:], strict=False):
        head = re.match(r"^(\s*(?:[-*+] )?)", a).group(1)  # type: ignore[union-attr]
        first, refs_a = _split_refs(a[len(head) :])
        second, refs_b = _split_refs(re.sub(r"^\s*(?:[-*+] )?", "", b))
        if not first.endswith(".") or not second or not second[:1].isupper() or "\n" in first or len(second) > 200:
            continue
        joined = f"{head}{first[:-1]} because {second[0].lower()}{second[1:]}{refs_a}{refs_b}"
        yield mutant(view, "cause_invented", "grounding", view.replace(i, joined), f"line {i + 1}: joined with 'because'")


def _split_refs(text: str) -> tuple[str, str]:
    refs = "".join(f"[^{label}]" for label in FOOTREF_RE.findall(text))
    return strip_refs(text).rstrip(), refs


def inflated(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    yield from _on_lines(view, corpus, "inflated", "grounding", _swaps(INFLATIONS))


def sides_swapped(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    def edit(line: str) -> Iterator[tuple[str, str]]:
        for pattern in SWAPS_RE:
            for m in pattern.finditer(line):
                a, b = m.group("a"), m.group("b")
                if a.lower() == b.lower():
                    continue
                new = m.group(0).replace(a, "\0").replace(b, a, 1).replace("\0", b)
                yield line[: m.start()] + new + line[m.end() :], f"swapped {a!r} and {b!r}"
        cm = IF_RE.match(line)
        if cm:
            cond, main = cm.group("cond").split(), cm.group("main").split()
            a = next((k for k, w in enumerate(cond) if w.lower() not in _ARTICLES), None)
            b = next((k for k, w in enumerate(main) if w.lower() not in _ARTICLES), None)
            if a is not None and b is not None and cond[a].lower() not in _PRONOUNS and main[b].lower() not in _PRONOUNS:
                cond[a], main[b] = main[b], cond[a]
                yield f"{cm.group('head')}If {' '.join(cond)}, {' '.join(main)}.{cm.group('rest')}", "swapped the subjects of 'if'"

    yield from _on_lines(view, corpus, "sides_swapped", "grounding", edit, fresh=False)


def uncited_sentence_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    """A sentence with no references of its own, with a wrong number, before a cited sentence."""
    for i, line in _ref_lines(view):
        head = re.match(r"^(\s*(?:[-*+] )?)", line).group(1)  # type: ignore[union-attr]
        first = re.split(r"(?<=[.!?])(?:" + REFS_RUN_RE.pattern + r")?\s+", line[len(head) :])[0]
        text = strip_refs(first).strip()
        for m in NUMBER_RE.finditer(text):
            n = int(m.group(1))
            wrong = text[: m.start()] + str(n + 1 if n < 1900 or n > 2100 else n - 1) + text[m.end() :]
            if not wrong.endswith((".", "!", "?")):
                wrong += "."
            yield mutant(
                view,
                "uncited_sentence_changed",
                "grounding",
                view.replace(i, f"{head}{wrong} {line[len(head) :]}"),
                f"line {i + 1}: {wrong}",
            )
            break


def _said(view: PageView, corpus: Corpus, line: str) -> tuple[dt.date, str] | None:
    labels = FOOTREF_RE.findall(line)
    d = view.defs.get(labels[0]) if len(labels) == 1 else None
    raw = corpus.evidence.get(d.evidence_id, [])[d.start - 1 : d.start] if d else []
    m = STAMP_RE.match(raw[0]) if raw else None
    return (dt.date(*map(int, m.groups())), d.quote) if m and d else None


def _long(day: dt.date, weekday: bool = False) -> str:
    text = f"{MONTHS[day.month - 1]} {day.day}, {day.year}"
    return f"{WEEKDAYS[day.weekday()]}, {text}" if weekday else text


def _relative(view: PageView, corpus: Corpus, operator: str, category: Category, right: bool) -> Iterator[Mutant]:
    """The relative day of a cited conversation line ("last Friday") written as a date: the day it
    means (a control) or the day it was said (a mutation)."""
    for i, line in _ref_lines(view):
        said = _said(view, corpus, line)
        if said is None:
            continue
        for m in REL_RE.finditer(line):
            if m.group(0).lower() not in said[1].lower():
                continue
            if m.group("y"):
                meant = said[0] - dt.timedelta(days=1)
            else:
                meant = said[0] - dt.timedelta(days=(said[0].weekday() - WEEKDAYS.index(m.group("wd").capitalize())) % 7 or 7)
            day = meant if right else said[0]
            new = line[: m.start()] + "on " + _long(day, weekday=right) + line[m.end() :]
            yield mutant(view, operator, category, view.replace(i, new), f"line {i + 1}: {m.group(0)!r} -> {day.isoformat()}")


def relative_day_as_said(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    yield from _relative(view, corpus, "relative_day_as_said", "grounding", right=False)


def relative_day_resolved(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    yield from _relative(view, corpus, "relative_day_resolved", "control", right=True)


def modality_reworded(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    yield from _on_lines(view, corpus, "modality_reworded", "control", _swaps(MODAL_SYNONYMS), fresh=False)


def condition_moved(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    """'If X, Y.' -> 'Y if X.' and back: the same condition on the same side."""

    def edit(line: str) -> Iterator[tuple[str, str]]:
        m = IF_RE.match(line)
        if m:
            main = m.group("main")
            yield f"{m.group('head')}{main[0].upper()}{main[1:]} if {m.group('cond')}.{m.group('rest')}", "'if' moved after"
        m = MAIN_IF_RE.match(line)
        if m:
            main = m.group("main")
            lead = main if re.match(r"[A-Z]{2}|[A-Z]\w*[A-Z]", main) else main[0].lower() + main[1:]
            yield f"{m.group('head')}If {m.group('cond')}, {lead}.{m.group('rest')}", "'if' moved before"

    yield from _on_lines(view, corpus, "condition_moved", "control", edit, fresh=False)
