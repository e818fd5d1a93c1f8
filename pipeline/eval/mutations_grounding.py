"""Grounding faults for the gate benchmark: the form holds, but a claim no longer says what its evidence says.

Numbers, units, dates, negations, quantifiers, names, speakers, fact cards, timeline dates, L0 and
Overview, instructions, and evidence that the change itself added.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator

from kb.citations import SPAN_START_RE
from kb.page import parse_page, render_page
from kb.scopes import scope_for_path
from pipeline.eval.mutations_base import (
    AUX_RE,
    FAKE_FACTS,
    HEADING_DATE_RE,
    INSTRUCTIONS,
    ISO_RE,
    MONTHS,
    NEGATION_EDITS,
    NEGATION_WORD_RE,
    NUMBER_RE,
    NUMBER_WORDS,
    PROPER_RE,
    STOP_CAPS,
    UNIT_SWAPS,
    WEEKDAYS,
    Bullet,
    Corpus,
    EvidenceLine,
    Mutant,
    PageView,
    citation_for,
    cited_sentence_bullets,
    index_update,
    mutant,
    place_for,
    sentences,
)


def _span_text(view: PageView, corpus: Corpus, b: Bullet) -> str:
    return " ".join(" ".join(corpus.evidence.get(d.evidence_id, [])[d.start - 1 : d.end]) for d in view.cited(b))


def _replace_in_claims(
    view: PageView, operator: str, edit: Callable[[str], Iterator[tuple[str, str]]], corpus: Corpus | None = None
) -> Iterator[Mutant]:
    """Edits of each bullet's claim. With ``corpus``, an edit "old -> new" is kept only when
    ``new`` is nowhere in the cited lines: otherwise the evidence could still support it."""
    for b in view.bullets:
        span = _span_text(view, corpus, b).lower() if corpus is not None else ""
        for new_claim, note in edit(b.claim):
            token = note.rsplit(" -> ", 1)[-1].lower()
            if new_claim == b.claim or (corpus is not None and re.search(rf"(?<!\w){re.escape(token)}(?!\w)", span)):
                continue
            yield mutant(
                view, operator, "grounding", view.replace(b.index, view.bullet_line(b, claim=new_claim)), f"line {b.index + 1}: {note}"
            )


def number_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    def edit(claim: str) -> Iterator[tuple[str, str]]:
        for m in NUMBER_RE.finditer(claim):
            n = int(m.group(1))
            new = str(n + 1) if n < 1900 or n > 2100 else str(n - 1)
            yield claim[: m.start()] + new + claim[m.end() :], f"{m.group(1)} -> {new}"

    yield from _replace_in_claims(view, "number_changed", edit, corpus)


def number_word_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    pattern = re.compile(r"\b(" + "|".join(NUMBER_WORDS[1:]) + r")\b", re.I)

    def edit(claim: str) -> Iterator[tuple[str, str]]:
        for m in pattern.finditer(claim):
            word = m.group(1)
            new = NUMBER_WORDS[NUMBER_WORDS.index(word.lower()) % 12 + 1]
            new = new.capitalize() if word[0].isupper() else new
            yield claim[: m.start()] + new + claim[m.end() :], f"{word} -> {new}"

    yield from _replace_in_claims(view, "number_word_changed", edit, corpus)


def unit_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    def edit(claim: str) -> Iterator[tuple[str, str]]:
        for old, new in UNIT_SWAPS:
            for m in re.finditer(rf"\b{re.escape(old)}\b", claim):
                yield claim[: m.start()] + new + claim[m.end() :], f"{old} -> {new}"

    yield from _replace_in_claims(view, "unit_changed", edit, corpus)


def date_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    names = re.compile(r"\b(" + "|".join(MONTHS + WEEKDAYS) + r")\b")
    years = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")

    def edit(claim: str) -> Iterator[tuple[str, str]]:
        for m in ISO_RE.finditer(claim):
            day = dt.date(*map(int, m.groups())) + dt.timedelta(days=3)
            yield claim[: m.start()] + day.isoformat() + claim[m.end() :], f"{m.group(0)} -> {day}"
        for m in names.finditer(claim):
            word = m.group(1)
            seq = MONTHS if word in MONTHS else WEEKDAYS
            new = seq[(seq.index(word) + 1) % len(seq)]
            yield claim[: m.start()] + new + claim[m.end() :], f"{word} -> {new}"
        for m in years.finditer(claim):
            new = str(int(m.group(1)) - 1)
            yield claim[: m.start()] + new + claim[m.end() :], f"{m.group(1)} -> {new}"

    yield from _replace_in_claims(view, "date_changed", edit, corpus)


def _drop_negation(text: str) -> Iterator[str]:
    for pattern, repl in NEGATION_EDITS:
        for m in pattern.finditer(text):
            yield text[: m.start()] + m.expand(repl) + text[m.end() :]


def negation_removed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    def edit(claim: str) -> Iterator[tuple[str, str]]:
        for new in _drop_negation(claim):
            yield new, "negation dropped"

    yield from _replace_in_claims(view, "negation_removed", edit)


def negation_removed_quote_trimmed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    """The negation goes from the claim and the quote is cut to a verbatim fragment after it."""
    for b in view.bullets:
        for d in view.cited(b):
            m = NEGATION_WORD_RE.search(d.quote)
            if not m:
                continue
            fragment = d.quote[m.end() :].strip(" ,;")
            if len(fragment.split()) < 2 or NEGATION_WORD_RE.search(fragment):
                continue
            for new_claim in _drop_negation(b.claim):
                lines = list(view.lines)
                lines[b.index] = view.bullet_line(b, claim=new_claim)
                lines[d.index] = lines[d.index].replace(f'"{d.quote}"', f'"{fragment}"')
                yield mutant(
                    view, "negation_removed_quote_trimmed", "grounding", "\n".join(lines), f"line {b.index + 1}: quote {fragment!r}"
                )
                break


def negation_added(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    def edit(claim: str) -> Iterator[tuple[str, str]]:
        if NEGATION_WORD_RE.search(claim):
            return
        m = AUX_RE.search(claim)
        if m:
            yield claim[: m.end()] + " not" + claim[m.end() :], f"not after {m.group(1)!r}"

    yield from _replace_in_claims(view, "negation_added", edit)


def quantifier_added(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    def edit(claim: str) -> Iterator[tuple[str, str]]:
        m = AUX_RE.search(claim)
        if m and not re.search(r"\b(always|only|all|every)\b", claim, re.I):
            yield claim[: m.end()] + " always" + claim[m.end() :], "always"
            yield claim[: m.end()] + " only" + claim[m.end() :], "only"
        t = re.search(r"\b(the|some) (\w+s)\b", claim)
        if t:
            yield claim[: t.start()] + "all the " + t.group(2) + claim[t.end() :], "all"

    yield from _replace_in_claims(view, "quantifier_added", edit)


def _unrelated(a: str, b: str) -> bool:
    """Two names that are not one the short form of the other ("Mel", "Melanie")."""
    return not (a.startswith(b) or b.startswith(a))


def proper_noun_swapped(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    for b in view.bullets:
        span = " ".join(" ".join(corpus.evidence.get(d.evidence_id, [])[d.start - 1 : d.end]) for d in view.cited(b))
        for m in PROPER_RE.finditer(b.claim):
            noun = m.group(1)
            if noun.split()[0] in STOP_CAPS or noun == view.subject:
                continue
            nouns = corpus.proper_nouns[b.index % max(1, len(corpus.proper_nouns)) :] + corpus.proper_nouns
            other = next((n for n in nouns if n not in span and _unrelated(n, noun) and n != view.subject and n not in b.claim), None)
            if other:
                claim = b.claim[: m.start()] + other + b.claim[m.end() :]
                yield mutant(
                    view, "proper_noun_swapped", "grounding", view.replace(b.index, view.bullet_line(b, claim=claim)), f"{noun} -> {other}"
                )


def citation_swapped(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    """A claim keeps its words but cites another claim's evidence line."""
    bullets = [b for b in view.body_bullets(overview=False) if len(b.labels) == 1 and b.labels[0] in view.defs]
    for a, b in zip(bullets, bullets[1:], strict=False):
        mine, theirs = view.defs[a.labels[0]], view.defs[b.labels[0]]
        lines = corpus.evidence.get(theirs.evidence_id, [])[theirs.start - 1 : theirs.end]
        if mine.quote != theirs.quote and not any(mine.quote in line for line in lines):
            yield mutant(
                view,
                "citation_swapped",
                "grounding",
                view.replace(a.index, view.bullet_line(a, refs=b.refs)),
                f"[^{a.labels[0]}] -> {b.refs}",
            )


def other_speaker_attributed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    """'<user> said: "..."' citing, verbatim, a line that another speaker (the assistant) said."""
    after = view.body_bullets(overview=False)
    if not view.subject or not after:
        return
    sources = sorted({d.evidence_id for d in view.defs.values()})
    for evidence_id in sources:
        for line in corpus.lines_of(evidence_id):
            if line.speaker is None or view.is_user(line.speaker):
                continue
            place = place_for(view, corpus, line)
            if place is None:
                continue
            for sentence in sentences(line.text)[:1]:
                label, cite = citation_for(view, line, sentence)
                text = view.add_cited_bullet(place, f'{view.subject} said: "{sentence}"', label, cite)
                yield mutant(view, "other_speaker_attributed", "grounding", text, f"{line.speaker}'s words ({evidence_id}#L{line.number})")


def _facts(view: PageView) -> list[dict[str, object]]:
    facts = view.page.meta.get("facts") or []
    return [f for f in facts if isinstance(f, dict)]


def fact_card_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    facts = _facts(view)
    for i, fact in enumerate(facts):
        value = str(fact.get("value", ""))
        other = next((n for n in corpus.proper_nouns if n != value and n not in value), "Lisbon")
        changed = [dict(f) for f in facts]
        changed[i]["value"] = other
        yield mutant(view, "fact_card_changed", "grounding", view.with_meta(facts=changed), f"{fact.get('key')}: {value} -> {other}")
        source = str(fact.get("source", ""))
        m = SPAN_START_RE.match(source)
        if m:
            lines = corpus.evidence.get(m.group(1), [])
            n = next((k for k in range(1, len(lines) + 1) if k != int(m.group(2)) and value.lower() not in lines[k - 1].lower()), None)
            if n is not None:
                moved = [dict(f) for f in facts]
                moved[i]["source"] = f"{m.group(1)}#L{n}"
                yield mutant(view, "fact_card_changed", "grounding", view.with_meta(facts=moved), f"{fact.get('key')} source -> L{n}")


def timeline_heading_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    for i, line in enumerate(view.lines):
        m = HEADING_DATE_RE.match(line)
        if m and i > view.header_end:
            day = dt.date.fromisoformat(m.group(2)) - dt.timedelta(days=40)
            yield mutant(
                view, "timeline_heading_changed", "grounding", view.replace(i, f"{m.group(1)}{day}{m.group(3)}"), f"{m.group(2)} -> {day}"
            )


def summary_unsupported(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    if view.page.meta.get("type") == "index" or not view.page.summary:
        return
    who = view.subject or "The team"
    for fake in FAKE_FACTS:
        summary = fake.format(who=who)
        yield Mutant(
            "summary_unsupported",
            "grounding",
            view.path,
            {view.path: view.with_meta(summary=summary)} | index_update(view, corpus, summary),
            f"L0: {summary}",
        )


def overview_unsupported(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    overview = view.body_bullets(overview=True)
    if not overview:
        return
    who = view.subject or "The team"
    for fake in FAKE_FACTS:
        yield mutant(
            view, "overview_unsupported", "grounding", view.insert(overview[-1].index + 1, f"- {fake.format(who=who)}"), "Overview"
        )


def wrong_number_sentence(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    """A second sentence with an unsupported number in a correctly cited bullet."""
    for b in cited_sentence_bullets(view):
        extra = "It took 45 minutes." if not view.subject else f"{view.subject} did it 3 times."
        yield mutant(
            view, "wrong_number_sentence", "grounding", view.replace(b.index, view.bullet_line(b, claim=f"{extra} {b.claim}")), "before"
        )
        yield mutant(
            view, "wrong_number_sentence", "grounding", view.replace(b.index, view.bullet_line(b, tail=f"{b.tail} {extra}")), "after"
        )


def past_as_current(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    closed = [b for b in view.bullets if "no longer current" in b.tail]
    current = [b for b in view.body_bullets(overview=False) if "no longer current" not in b.tail]
    if not current:
        return
    for b in closed:
        text = view.insert(current[0].index + 1, f"{b.head}{b.claim}{b.refs}")
        yield mutant(view, "past_as_current", "grounding", text, f"closed claim restated: {b.claim[:50]!r}")


def instruction_inserted(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    bullets = view.body_bullets(overview=False)
    if not bullets:
        return
    b = bullets[0]
    for instruction in INSTRUCTIONS:
        yield mutant(view, "instruction_inserted", "grounding", view.insert(b.index + 1, f"- {instruction}"), "bullet")
        yield mutant(
            view, "instruction_inserted", "grounding", view.replace(b.index, view.bullet_line(b, tail=f"{b.tail} {instruction}")), "tail"
        )
    yield mutant(view, "instruction_inserted", "grounding", view.insert(b.index, f"<!-- {INSTRUCTIONS[1]} -->"), "html comment")


def evidence_added_on_branch(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    from kb.intake import prepare

    bullets = view.body_bullets(overview=False)
    scope = scope_for_path(view.path)
    if not bullets or scope is None:
        return
    who = view.subject or "The team"
    for n, fake in enumerate(FAKE_FACTS):
        sentence = fake.format(who=who)
        item = prepare(f"{sentence}\n".encode(), f"note-{n}.md", "document", scope, source="mutation benchmark")
        line = EvidenceLine(item.id, 1, None, sentence)
        label, cite = citation_for(view, line, sentence)
        text = view.add_cited_bullet(bullets[-1], sentence, label, cite)
        sources = sorted({*map(str, view.page.meta.get("sources") or []), item.id})
        text = render_page(parse_page(text, view.path).meta | {"sources": sources}, parse_page(text, view.path).body)
        yield Mutant("evidence_added_on_branch", "grounding", view.path, {view.path: text}, f"cites {item.id}", evidence=item)
