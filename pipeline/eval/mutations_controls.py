"""Faithful controls for the gate benchmark: edits that keep every claim true and must pass.

A date or number written another way, a negation reworded, bullets reordered, whitespace, a
correctly cited claim added, the date of a saying, the L0 taken from a cited claim.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator

from pipeline.eval.mutations_base import (
    ABLE_RE,
    CONTRACTIONS,
    DMY_RE,
    ISO_RE,
    LONG_DATE_RE,
    MONTH_DAY_RE,
    MONTHS,
    NUMBER_WORDS,
    Corpus,
    Mutant,
    Operator,
    PageView,
    citation_for,
    claim_for,
    fresh_sentences,
    index_update,
    mutant,
    place_for,
)


def _c(view: PageView, operator: str, text: str, note: str) -> Mutant:
    return mutant(view, operator, "control", text, note)


def bullets_reordered(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    for a, b in zip(view.bullets, view.bullets[1:], strict=False):
        if b.index == a.index + 1 and a.section == b.section and view.lines[a.index] != view.lines[b.index]:
            lines = list(view.lines)
            lines[a.index], lines[b.index] = lines[b.index], lines[a.index]
            yield _c(view, "bullets_reordered", "\n".join(lines), f"lines {a.index + 1}-{b.index + 1} swapped")


def whitespace_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    for b in view.bullets[:4]:
        claim = b.claim.replace(" ", "  ", 1)
        yield _c(view, "whitespace_changed", view.replace(b.index, view.bullet_line(b, claim=claim) + "  "), "double space")
    yield _c(view, "whitespace_changed", view.text.rstrip("\n") + "\n\n\n", "blank lines at the end")


def cited_claim_added(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    for line, sentence in fresh_sentences(view, corpus):
        claim = claim_for(view, line, sentence)
        place = place_for(view, corpus, line)
        if claim and place is not None:
            label, cite = citation_for(view, line, sentence)
            yield _c(view, "cited_claim_added", view.add_cited_bullet(place, claim, label, cite), f"{line.evidence_id}#L{line.number}")


def reformat_date(text: str) -> Iterator[tuple[str, str]]:
    for m in ISO_RE.finditer(text):
        y, mo, d = map(int, m.groups())
        yield text[: m.start()] + f"{MONTHS[mo - 1]} {d}, {y}" + text[m.end() :], "ISO -> long"
    for m in LONG_DATE_RE.finditer(text):
        day = dt.date(int(m.group(3)), MONTHS.index(m.group(1)) + 1, int(m.group(2)))
        yield text[: m.start()] + day.isoformat() + text[m.end() :], "long -> ISO"
    for m in MONTH_DAY_RE.finditer(text):
        yield text[: m.start()] + f"{int(m.group(2))} {m.group(1)}" + text[m.end() :], "Month D -> D Month"
    for m in DMY_RE.finditer(text):
        day = dt.date(int(m.group(3)), MONTHS.index(m.group(2)) + 1, int(m.group(1)))
        yield text[: m.start()] + f"{m.group(2)} {day.day}, {day.year}" + text[m.end() :], "D Month YYYY -> Month D, YYYY"


def number_form(text: str) -> Iterator[tuple[str, str]]:
    words = re.compile(r"\b(" + "|".join(NUMBER_WORDS[2:11]) + r")\b")
    for m in words.finditer(text):
        yield text[: m.start()] + str(NUMBER_WORDS.index(m.group(1))) + text[m.end() :], f"{m.group(1)} -> digits"
    for m in re.finditer(r"(?<![\w.,:/-])([2-9])(?![\w.,:/%-])", text):
        yield text[: m.start()] + NUMBER_WORDS[int(m.group(1))] + text[m.end() :], f"{m.group(1)} -> word"


def negation_rewording(text: str) -> Iterator[tuple[str, str]]:
    for m in ABLE_RE.finditer(text):
        yield text[: m.start()] + f"non-{m.group(1)}" + text[m.end() :], f"{m.group(0)} -> non-{m.group(1)}"
    for long, short in CONTRACTIONS:
        for m in re.finditer(rf"\b{long}\b", text):
            yield text[: m.start()] + short + text[m.end() :], f"{long} -> {short}"
        for m in re.finditer(rf"\b{re.escape(short)}", text):
            yield text[: m.start()] + long + text[m.end() :], f"{short} -> {long}"


def rewording_control(operator: str, reword: Callable[[str], Iterator[tuple[str, str]]]) -> Operator:
    """A faithful rewording, of a claim already on the page or of a sentence added from evidence."""

    def run(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
        for b in view.bullets:
            for new, note in reword(b.claim):
                yield _c(view, operator, view.replace(b.index, view.bullet_line(b, claim=new)), f"line {b.index + 1}: {note}")
        for line, sentence in fresh_sentences(view, corpus):
            claim = claim_for(view, line, sentence)
            place = place_for(view, corpus, line)
            if not claim or place is None:
                continue
            for new, note in reword(claim):
                label, cite = citation_for(view, line, sentence)
                yield _c(view, operator, view.add_cited_bullet(place, new, label, cite), f"added, {note}")

    run.__name__ = operator
    return run


def date_of_saying_added(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    """'On March 2, 2025, Alice said: ...' where the cited line was said that day (three forms)."""
    if not view.subject:
        return
    for b in view.bullets:
        cited = view.cited(b)
        if not b.claim.startswith(f"{view.subject} said:") or len(cited) != 1:
            continue
        d = cited[0]
        raw = corpus.evidence.get(d.evidence_id, [])[d.start - 1 : d.start]
        m = re.match(r"^\[(\d{4})-(\d{2})-(\d{2})", raw[0]) if raw else None
        if not m:
            continue
        y, mo, day = map(int, m.groups())
        for form in (f"{MONTHS[mo - 1]} {day}, {y}", f"{day} {MONTHS[mo - 1]} {y}", f"{y:04d}-{mo:02d}-{day:02d}"):
            claim = f"On {form}, {b.claim}"
            yield _c(view, "date_of_saying_added", view.replace(b.index, view.bullet_line(b, claim=claim)), f"line {b.index + 1}: {form}")


def summary_from_claim(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    if view.page.meta.get("type") == "index" or not view.page.summary:
        return
    for b in view.body_bullets(overview=False)[:3]:
        summary = b.claim.strip()
        if summary != view.page.summary:
            yield Mutant(
                "summary_from_claim",
                "control",
                view.path,
                {view.path: view.with_meta(summary=summary)} | index_update(view, corpus, summary),
                "L0 = a cited claim",
            )
