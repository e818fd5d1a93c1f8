"""The meaning-level operators of the gate benchmark: each makes the edit it names on a small
page, and the grounding rules judge the edited claim as the benchmark expects (caught for a
mutation, passed for a control)."""

from __future__ import annotations

import re

import pytest

from kb.citations import strip_refs
from pipeline.eval.mutations import OPERATORS, Corpus, PageView
from tests.ci.rules.one_claim import check_claim

EV = "ev-0123456789abcdef"
CONV = "ev-fedcba9876543210"
QUOTES = {
    1: "Compression is enabled by default and the limit should be 600 requests.",
    2: "If the token is not set, the key is used.",
    3: "The cache may be cleared on restart.",
    5: "Calvin is one of the guitarists in the band.",
}
PAGE = f"""---
id: cfg
title: Config
type: concept
summary: Config.
---
# Config

- Compression is enabled by default and the limit should be 600 requests.[^1]
- If the token is not set, the key is used.[^2]
- The cache may be cleared on restart.[^3]
- Jon said: "I had a car accident last Friday."[^4]
- Calvin is one of the guitarists in the band.[^5]

[^1]: {EV}#L1 "{QUOTES[1]}"
[^2]: {EV}#L2 "{QUOTES[2]}"
[^3]: {EV}#L3 "{QUOTES[3]}"
[^4]: {CONV}#L1 "I had a car accident last Friday."
[^5]: {EV}#L4 "{QUOTES[5]}"
"""
CORPUS = Corpus(
    evidence={
        EV: [QUOTES[1], QUOTES[2], QUOTES[3], QUOTES[5]],
        CONV: ["[2023-06-21T13:56:00] Jon (D1:3): I had a car accident last Friday."],
    },
    pages={},
)


def _edits(operator: str) -> list[tuple[str, str]]:
    """(edited claim line, its quote) of each edit the operator makes."""
    view = PageView.of("knowledge/cfg.md", PAGE)
    assert view is not None
    out = []
    for m in OPERATORS[operator][1](view, CORPUS):
        old, new = PAGE.split("\n"), m.files[view.path].split("\n")
        changed = [n for a, n in zip(old, new, strict=False) if a != n]
        label = re.search(r"\[\^(\d)\]", changed[0]).group(1)  # type: ignore[union-attr]
        quote = QUOTES.get(int(label), "I had a car accident last Friday.")
        out.append((strip_refs(changed[0]).lstrip("- "), quote))
    return out


@pytest.mark.parametrize(
    "operator",
    [
        "modality_changed",
        "qualifier_dropped",
        "cause_invented",
        "inflated",
        "sides_swapped",
        "uncited_sentence_changed",
        "relative_day_as_said",
    ],
)
def test_a_meaning_mutation_is_caught(operator: str) -> None:
    edits = _edits(operator)
    assert edits, operator
    for claim, quote in edits:
        span = "[2023-06-21T13:56:00] Jon (D1:3): " + quote if "accident" in quote else quote
        assert check_claim(claim, quote, span, conversation="accident" in quote), (operator, claim)


@pytest.mark.parametrize("operator", ["relative_day_resolved", "modality_reworded", "condition_moved"])
def test_a_faithful_control_passes(operator: str) -> None:
    edits = _edits(operator)
    assert edits, operator
    for claim, quote in edits:
        span = "[2023-06-21T13:56:00] Jon (D1:3): " + quote if "accident" in quote else quote
        assert check_claim(claim, quote, span, conversation="accident" in quote) == [], (operator, claim)
