"""Claim-level grounding: numbers, dates and negations of a claim must be in what it cites.

A claim is a sentence that carries footnote references. Its numbers and dates must appear in
the quote or in the cited line span; a negation in the claim must be matched by one in the
evidence, and a negation in the quote must not be dropped from the claim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ci.findings import Finding
from ci.snapshot import Snapshot, normalise_quote
from kb.markdown import CODESPAN_RE, FOOTREF_RE
from kb.page import Page

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"]
NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
ISO_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
NEGATION_RE = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|neither|nor|without|cannot|can't|won't|don't|doesn't|didn't|isn't|aren't|wasn't|weren't|hasn't|haven't|hadn't|shouldn't|wouldn't|couldn't|mustn't|n't)\b|n't\b|[不没無无未别非]",
    re.IGNORECASE,
)


GroundingRule = Literal["grounding.date", "grounding.number", "grounding.negation"]


@dataclass(frozen=True)
class Ungrounded:
    """One way a claim is not supported by what it cites."""

    rule: GroundingRule
    message: str


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in NUMBER_RE.findall(text)}


def _date_forms(year: str, month: str, day: str) -> list[str]:
    name = MONTHS[int(month) - 1]
    d = str(int(day))
    return [
        f"{year}-{month}-{day}",
        f"{name} {d}",
        f"{d} {name}",
        f"{name} {d}st",
        f"{name} {d}nd",
        f"{name} {d}rd",
        f"{name} {d}th",
        f"{year}/{month}/{day}",
        f"{year}年{int(month)}月{d}日",
    ]


def check_claim(claim_text: str, quote: str, span: str) -> list[Ungrounded]:
    """Problems of one claim against its evidence (empty when grounded)."""
    claim = FOOTREF_RE.sub("", claim_text)
    evidence = normalise_quote(quote + " \n " + span).lower()
    problems: list[Ungrounded] = []
    claim_wo_dates = claim
    for match in ISO_DATE_RE.finditer(claim):
        forms = _date_forms(*match.groups())
        if not any(form in evidence for form in forms):
            problems.append(Ungrounded("grounding.date", f"the date {match.group(0)} is not in the cited evidence"))
        claim_wo_dates = claim_wo_dates.replace(match.group(0), " ")
    evidence_numbers = _numbers(evidence)
    for number in sorted(_numbers(claim_wo_dates)):
        if number not in evidence_numbers:
            problems.append(Ungrounded("grounding.number", f"the number {number} is not in the cited evidence"))
    claim_neg = bool(NEGATION_RE.search(claim))
    quote_neg = bool(NEGATION_RE.search(CODESPAN_RE.sub(" ", quote)))  # code is not a negation: claims see it blanked
    span_neg = bool(NEGATION_RE.search(span))
    if claim_neg and not (quote_neg or span_neg):
        problems.append(Ungrounded("grounding.negation", "the claim is negated but the cited evidence is not"))
    if quote_neg and not claim_neg:
        problems.append(Ungrounded("grounding.negation", "the quote contains a negation that the claim drops"))
    return problems


def check_page_grounding(snapshot: Snapshot, page: Page) -> list[Finding]:
    out = []
    cites = {c.label: c for c in page.structure.citations if c.evidence_id}
    for claim in page.structure.claims:
        for label in claim.labels:
            cite = cites.get(label)
            if cite is None:
                continue  # reported by the citation rules
            lines = snapshot.evidence_lines(cite.evidence_id or "")
            if lines is None or cite.end > len(lines) or cite.start < 1:
                continue  # reported by the citation rules
            span = "\n".join(lines[cite.start - 1 : cite.end])
            for problem in check_claim(claim.text, cite.quote, span):
                out.append(
                    Finding(
                        page.path,
                        claim.line,
                        problem.rule,
                        f"[^{label}] {problem.message}",
                        hint=f"cite the evidence that states it, or fix the claim ({cite.evidence_id}#L{cite.start}-L{cite.end})",
                    )
                )
    return out
