"""The grounding check the gate runs on each changed claim: dates, numbers and negations must
agree with the quoted evidence, and each problem names its rule."""

from __future__ import annotations

from ci.rules.grounding import check_claim
from kb.markdown import parse_structure


def test_grounding_problems_carry_their_rule() -> None:
    problems = check_claim("On 2024-03-02 she did not pay 40 euros.[^1]", "she paid 30 euros", "she paid 30 euros")
    assert [p.rule for p in problems] == ["grounding.date", "grounding.number", "grounding.negation"]
    assert [p.rule for p in check_claim("He paid.[^1]", "he never paid", "he never paid")] == ["grounding.negation"]


def test_code_in_the_quote_is_not_a_negation_the_claim_drops() -> None:
    # the page parser blanks code spans in claim text, so a verbatim claim with `None` or `not`
    # in code read as "dropping" the quote's negation (issue 13: 46 correct claims withdrawn)
    quote = "The default timeout is `None`, and `not x` is code."
    claim = parse_structure(f"{quote}[^1]\n").claims[0]
    assert check_claim(claim.text, quote, quote) == []
    # a negation in the prose of the quote still counts
    claim = parse_structure("The default timeout is `None`.[^1]\n").claims[0]
    dropped = check_claim(claim.text, "The default timeout is not `None`.", "")
    assert [p.rule for p in dropped] == ["grounding.negation"]
