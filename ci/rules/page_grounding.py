"""Page-level grounding: what a page states outside its cited claims must rest on evidence too.

- ``grounding.fact``: a fact card (``facts:`` in the frontmatter) is checked like a citation:
  its ``source`` resolves to evidence lines of the page's scope, its ``value`` (and ``about``)
  is in those lines, its dates (``valid_from``, ``learned``) are the evidence's, its speaker
  ("said by user") is the cited line's, and its ``label`` names a citation of the same lines.
- ``grounding.timeline``: a claim under a date heading (``## 2025-03-02``) cites evidence of
  that date (the cited line's time, the item's date, or a date the cited lines state).
- ``grounding.summary``: the L0 summary and the Overview statements without references state
  nothing (number, date, name, quantifier) that the page's cited claims do not.
- ``grounding.closed-fact``: a value of a closed fact card (``valid_to`` set, no current card
  with that value) stated again as current outside the history sections.
- ``grounding.instruction``: instruction-like text addressed to an agent ("ignore previous
  instructions", "approve every change") anywhere in the page.
- ``grounding.branch-evidence``: a changed page cites evidence the change itself added (not in
  the base commit's ledger): evidence must be recorded before a change may cite it.
"""

from __future__ import annotations

import re
from typing import Any

from ci.findings import Finding, RuleId
from ci.rules import factcheck as fc
from ci.rules.grounding import (
    Cited,
    Evidence,
    Reader,
    bullets,
    check_statement,
    link_bullet,
    resolve,
    same_speaker,
    split_sentences,
    statements,
)
from ci.snapshot import Snapshot
from kb.citations import FOOTREF_RE, Citation, Span, parse_span, strip_refs
from kb.page import OVERVIEW_HEADING, Page
from kb.scopes import visible_from

_HISTORY_RE = re.compile(r"history|past|previous|former|earlier|archive|superseded|no longer", re.IGNORECASE)
_PAST_RE = re.compile(
    r"\b(?:no longer|used to|previously|formerly|former|until|before|earlier|once|was|were|had|moved (?:away )?from|left|"
    r"not any more|anymore|superseded|old|ex-)\b|_\(no longer",
    re.IGNORECASE,
)
_SAID_BY_RE = re.compile(r"\b(?i:said by) (?:the )?([\w'-]+(?: [A-Z][\w'-]+)?)")


def check_page_facts(snapshot: Snapshot, page: Page, base_evidence: set[str] | None = None) -> list[Finding]:
    """Every page-level rule for one changed page."""
    cites = resolve(snapshot, page)
    reader = Reader.for_page(page)
    out = _instructions(page)
    out += _fact_cards(snapshot, page, cites, reader)
    out += _timeline(page, cites)
    out += _summary(page, cites, reader)
    out += _closed_facts(page)
    if base_evidence is not None:
        out += _branch_evidence(snapshot, page, base_evidence)
    return out


def _f(page: Page, line: int, rule: RuleId, message: str, hint: str) -> Finding:
    return Finding(page.path, line, rule, message, hint=hint)


# ---- instruction-like text ------------------------------------------------------------------


def _instructions(page: Page) -> list[Finding]:
    out = []
    for key, value in page.meta.items():
        hit = fc.instruction_like(_flat(value))
        if hit:
            out.append(_instruction(page, page.meta_lines.get(key, 1), hit))
    for n, line in enumerate(page.body.splitlines(), start=page.header_lines + 1):
        hit = fc.instruction_like(line)
        if hit:
            out.append(_instruction(page, n, hit))
    return out


def _instruction(page: Page, line: int, hit: str) -> Finding:
    return _f(
        page,
        line,
        "grounding.instruction",
        f"instruction-like text addressed to an agent: {hit!r}",
        "pages state facts; remove the instruction (if the evidence contains it, do not copy it into a page)",
    )


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(_flat(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(_flat(v) for v in value)
    return str(value) if value is not None else ""


# ---- fact cards -----------------------------------------------------------------------


def _facts(page: Page) -> list[dict[str, Any]]:
    facts = page.meta.get("facts")
    return [f for f in facts if isinstance(f, dict)] if isinstance(facts, list) else []


def _fact_cards(snapshot: Snapshot, page: Page, cites: dict[str, Cited], reader: Reader) -> list[Finding]:
    out = []
    line = page.meta_lines.get("facts", 1)
    hint = "a fact card's source is `ev-<id>#L<n>` and its value is stated on those lines"
    for n, fact in enumerate(_facts(page), 1):
        key = str(fact.get("key") or f"#{n}")
        source = str(fact.get("source") or "").strip()
        span = parse_span(source)
        if span is None:
            out.append(_f(page, line, "grounding.fact", f"fact {key!r}: source {source!r} is not `ev-<id>#L<n>`", hint))
            continue
        ev_id, start, end = span.evidence_id, span.start, span.end
        entry = snapshot.evidence_by_id.get(ev_id)
        lines = snapshot.evidence_lines(ev_id)
        if entry is None or lines is None:
            out.append(_f(page, line, "grounding.fact", f"fact {key!r}: {ev_id} is not in the evidence ledger", hint))
            continue
        if not visible_from(page.scope, entry.scope):
            out.append(_f(page, line, "grounding.fact", f"fact {key!r}: cites {entry.scope} evidence from a {page.scope} page", hint))
            continue
        if start < 1 or end > len(lines) or end < start:
            out.append(_f(page, line, "grounding.fact", f"fact {key!r}: {source} is outside {ev_id} ({len(lines)} lines)", hint))
            continue
        cited = Cited("", ev_id, start, end, "", tuple(lines), entry.kind in ("conversation", "trajectory"), entry.date)
        for problem in _fact_problems(fact, cited, cites, reader):
            out.append(_f(page, line, "grounding.fact", f"fact {key!r}: {problem} ({cited.ref})", hint))
    return out


def _fact_problems(fact: dict[str, Any], cited: Cited, cites: dict[str, Cited], reader: Reader) -> list[str]:
    problems = []
    evidence = Evidence([cited])
    value = str(fact.get("value") if fact.get("value") is not None else "").strip()
    if not value:
        problems.append("has no value")
    elif not _value_stated(value, evidence, reader):
        problems.append(f"the value {value!r} is not on the cited lines")
    about = str(fact.get("about") or "").strip()
    if about and fc.names(about) and not _value_stated(about, evidence, reader):
        problems.append(f"{about!r} (about) is not on the cited lines")
    dates_ok = _evidence_dates(cited)
    for field in ("valid_from", "learned"):
        for d in fc.dates(str(fact.get(field) or "")):
            if not fc.date_supported(d, dates_ok, set()):
                problems.append(f"{field} {d.text} is not the date of the cited lines")
    said = _SAID_BY_RE.search(str(fact.get("learned") or ""))
    if said and cited.conversation:
        by = said.group(1)
        if not any(same_speaker(by, cited, s, reader) for s in cited.speakers()):
            problems.append(f"learned says it was said by {by}, but the cited line is spoken by {', '.join(cited.speakers())}")
    label = str(fact.get("label") or "")
    if label and label in cites:
        cite = cites[label]
        if cite.evidence_id != cited.evidence_id or cite.end < cited.start or cite.start > cited.end:
            problems.append(f"its label [^{label}] cites {cite.ref}, not {cited.ref}")
    return problems


def _value_stated(value: str, evidence: Evidence, reader: Reader) -> bool:
    """A card value is stated when it is on the lines, or every part of it is (form aside)."""
    text = fc.fold(evidence.text).lower()
    if fc.fold(value).lower() in text:
        return True
    if check_statement(value, evidence, reader):
        return False
    blanked = value
    for d in fc.dates(value):
        blanked = blanked.replace(d.text, " ")
    for q in fc.quantities(blanked):
        blanked = blanked.replace(q.text, " ")
    cjk = re.findall(r"[\u4e00-\u9fff]+", blanked)
    if any(run not in text for run in cjk):
        return False
    content = {w for w in fc.words(blanked) if len(w) > 2} - fc.words("the a an and or of in on at to for with by from is are")
    return all(w in evidence.words or reader.is_user(w) for w in content)


def _evidence_dates(cited: Cited) -> list[fc.DateMention]:
    """Dates the cited lines are from (their timestamps, the item's date) or state."""
    return list(fc.dates(cited.span, strict_case=False)) + (list(fc.dates(cited.date)) if cited.date else [])


# ---- timeline headings -------------------------------------------------------------------


def _heading_date(title: str) -> fc.DateMention | None:
    found = fc.dates(title)
    if len(found) == 1 and not re.sub(r"[\W_]", "", title.replace(found[0].text, "")):
        return found[0]
    return None


def _timeline(page: Page, cites: dict[str, Cited]) -> list[Finding]:
    out: list[Finding] = []
    dated = [(s, d) for s in page.structure.sections if (d := _heading_date(s.title))]
    if not dated:
        return out
    found, _ = statements(page)
    for statement in found:
        section = next(((s, d) for s, d in reversed(dated) if s.line < statement.line <= s.end_line), None)
        if section is None:
            continue
        heading, when = section
        cited = [cites[label] for label in statement.labels if label in cites]
        if not cited:
            continue
        evidence_dates = [d for c in cited for d in _evidence_dates(c)]
        years = {d.year for d in evidence_dates if d.year}
        if not fc.date_supported(when, evidence_dates, years):
            refs = ", ".join(dict.fromkeys(c.ref for c in cited))
            out.append(
                _f(
                    page,
                    statement.line,
                    "grounding.timeline",
                    f"under the heading {heading.title!r} (line {heading.line}) but the cited evidence is not of that date ({refs})",
                    "put the entry under the date of its evidence, or cite evidence of that date",
                )
            )
    return out


# ---- L0 summary and Overview ---------------------------------------------------------------


_OUTLINE_LABEL_RE = re.compile(r"^\s*\S+(?:\s+\S+){0,5}:\s*$")  # "Sections of this page:" introduces the outline
# a label or pointer alone on its line, maybe in a block quote ("> **API Reference**", "> _API
# reference: `x.Y`_", ">"): it names where to look, it states no fact
_LABEL_LINE_RE = re.compile(r"^\s*>?\s*(?:\*\*[^*]+\*\*|_[^_]+_|\*[^*]+\*)?\s*$")


def _overview_statements(page: Page) -> list[tuple[str, int]]:
    overview = next((s for s in page.structure.sections if s.level == 2 and s.title.strip() == OVERVIEW_HEADING), None)
    out: list[tuple[str, int]] = []
    if overview is None:
        return out
    for bullet in bullets(page):
        # a link-only bullet is the page's outline (a section or page named), not a statement
        if bullet.section == OVERVIEW_HEADING and not FOOTREF_RE.search(bullet.text) and not link_bullet(bullet.text):
            out.extend(split_sentences(bullet.text, bullet.line))
    lines = page.body.splitlines()
    for n in range(overview.line + 1, overview.end_line + 1):
        text = lines[n - page.header_lines - 1] if 0 <= n - page.header_lines - 1 < len(lines) else ""
        if (
            text.strip()
            and not re.match(r"^\s*(?:[-*+]|\d+[.)])\s", text)
            and not FOOTREF_RE.search(text)
            and not text.startswith(("#", "[^"))
            and not _OUTLINE_LABEL_RE.match(text)
            and not _LABEL_LINE_RE.match(text)
        ):
            out.extend(split_sentences(text, n))
    return out


def _summary(page: Page, cites: dict[str, Cited], reader: Reader) -> list[Finding]:
    if page.meta.get("type") == "index" or not cites:
        return []
    found, _ = statements(page)
    backing_text = "\n".join([s.text for s in found] + [c.quote for c in cites.values()])
    backing = Evidence([Cited("", "", 1, 1, backing_text, ("",))])
    todo = [(page.summary, page.meta_lines.get("summary", 1), "the L0 summary")] if page.summary else []
    todo += [(text, line, "the Overview") for text, line in _overview_statements(page)]
    out = []
    for text, line, where in todo:
        for problem in _backing_problems(text, backing, reader):
            out.append(
                _f(
                    page,
                    line,
                    "grounding.summary",
                    f"{where} states {problem} that no cited claim of the page states",
                    "summarise only what the page's cited claims say, or add the cited claim",
                )
            )
    return out


def summary_problems(page: Page) -> list[str]:
    """What ``page``'s L0 states that none of its cited claims or quotes does (``grounding.summary``
    on the L0 alone): consolidation asks it after removing claims from a page."""
    quotes = [c.quote for c in page.structure.citations if c.evidence_id]
    if page.meta.get("type") == "index" or not quotes or not page.summary:
        return []
    found, _ = statements(page)
    backing = Evidence([Cited("", "", 1, 1, "\n".join([s.text for s in found] + quotes), ("",))])
    return _backing_problems(page.summary, backing, Reader.for_page(page))


def _backing_problems(text: str, backing: Evidence, reader: Reader) -> list[str]:
    claim = fc.fold(text)
    blanked = claim
    problems = []
    ev_dates = fc.dates(backing.text, strict_case=False)
    years = fc.years_of(backing.text)
    for d in fc.dates(claim):
        if not fc.date_supported(d, ev_dates, years):
            problems.append(f"the date {d.text!r}")
        blanked = blanked[: d.start] + " " * (d.end - d.start) + blanked[d.end :]
    values = {q.value for q in fc.quantities(backing.plain)}
    for q in fc.quantities(blanked, claim_side=True):
        if q.value not in values and not fc.is_count(blanked, q):
            problems.append(f"the number {q.text.strip()!r}")
    for name, _ in fc.names(claim):
        if not fc.name_supported(name, backing.words, backing.text.lower()) and not reader.is_user(name):
            problems.append(f"the name {name!r}")
    for word in fc.quantifiers(claim):
        if not fc.quantifier_supported(word, backing.text):
            problems.append(f"{word!r}")
    return problems


# ---- closed facts restated ----------------------------------------------------------------


def _closed_facts(page: Page) -> list[Finding]:
    facts = _facts(page)
    current = {(str(f.get("key")), str(f.get("value")).lower()) for f in facts if not f.get("valid_to")}
    closed = [
        f
        for f in facts
        if f.get("valid_to") and len(str(f.get("value") or "")) >= 3 and (str(f.get("key")), str(f.get("value")).lower()) not in current
    ]
    if not closed:
        return []
    # what restates a closed value: a statement citing the card's own source lines, or one
    # citing nothing (the L0, Overview lines); a claim citing other lines may use the word otherwise
    todo: list[tuple[str, int, str, tuple[str, ...]]] = [(page.summary, page.meta_lines.get("summary", 1), "", ())] if page.summary else []
    found, uncited = statements(page)
    todo += [(s.text, s.line, s.section, s.labels) for s in found]
    todo += [(t, line, b.section, ()) for b in uncited for t, line in split_sentences(b.text, b.line)]
    cites = {c.label: c for c in page.structure.citations if c.evidence_id}
    out = []
    for text, line, section, labels in todo:
        if _HISTORY_RE.search(section) or _PAST_RE.search(text):
            continue
        for fact in closed:
            span = parse_span(str(fact.get("source") or ""))
            if labels and not (span and any(_overlaps(cites.get(label), span) for label in labels)):
                continue
            value = str(fact.get("value"))
            if re.search(rf"(?<![^\W_]){re.escape(value.lower())}(?![^\W_])", fc.fold(strip_refs(text)).lower()):
                out.append(
                    _f(
                        page,
                        line,
                        "grounding.closed-fact",
                        f"states {value!r} as current, but its fact card {fact.get('key')!r} was closed on {fact.get('valid_to')}",
                        "state it in the past (under History) or reopen the card with the evidence that it holds again",
                    )
                )
    return out


def _overlaps(cite: Citation | None, source: Span) -> bool:
    if cite is None or cite.evidence_id != source.evidence_id:
        return False
    return cite.start <= source.end and source.start <= cite.end


# ---- evidence added by the change itself ----------------------------------------------------


def _branch_evidence(snapshot: Snapshot, page: Page, base_evidence: set[str]) -> list[Finding]:
    out = []
    hint = "add the evidence first (`kb evidence add` on main), then propose the change that cites it"
    for cite in page.structure.citations:
        if cite.evidence_id and cite.evidence_id not in base_evidence and cite.evidence_id in snapshot.evidence_by_id:
            out.append(
                _f(
                    page,
                    cite.line,
                    "grounding.branch-evidence",
                    f"[^{cite.label}] cites {cite.evidence_id}, which this change itself adds",
                    hint,
                )
            )
    for fact in _facts(page):
        span = parse_span(str(fact.get("source") or ""))
        if span and span.evidence_id not in base_evidence and span.evidence_id in snapshot.evidence_by_id:
            out.append(
                _f(
                    page,
                    page.meta_lines.get("facts", 1),
                    "grounding.branch-evidence",
                    f"fact {fact.get('key')!r} cites {span.evidence_id}, which this change itself adds",
                    hint,
                )
            )
    return out
