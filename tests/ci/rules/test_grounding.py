"""The grounding check the gate runs on each changed claim: dates, numbers and negations must
agree with the quoted evidence, and each problem names its rule."""

from __future__ import annotations

from ci.rules.grounding import check_claim


def test_grounding_problems_carry_their_rule() -> None:
    problems = check_claim("On 2024-03-02 she did not pay 40 euros.[^1]", "she paid 30 euros", "she paid 30 euros")
    assert [p.rule for p in problems] == ["grounding.date", "grounding.number", "grounding.negation"]
    assert [p.rule for p in check_claim("He paid.[^1]", "he never paid", "he never paid")] == ["grounding.negation"]
