"""The support check and the readings issue 25 asked for: every sentence of a cited paragraph is
a claim, digits next to Han characters are numbers, relative days are read from the day they were
said, and the meaning markers of a quote (modality, qualifiers and scope, causes, superlatives,
roles, the sides of a condition) are kept. Each fault has a faithful twin that passes."""

from __future__ import annotations

import pytest

from ci.rules import support
from ci.rules.grounding import statements
from kb.page import parse_page
from tests.ci.rules.one_claim import check_claim

PAGE = """---
id: api
title: API
type: concept
summary: The API.
---
# API

The API rate limit is 900 requests per minute. It has applied since 2025-03-01.[^1]

- A bullet.[^1]

```
Code. More code.[^1]
```

[^1]: ev-0123456789abcdef#L1 "The API rate limit is 600 requests per minute. It has applied since 2025-03-01."
"""


def test_a_sentence_without_its_own_reference_is_read_against_the_paragraphs() -> None:
    found, _ = statements(parse_page(PAGE, "knowledge/api.md"))
    by_text = {s.text: s.labels for s in found}
    assert by_text["The API rate limit is 900 requests per minute."] == ("1",)
    assert "Code." not in by_text  # code is no claim
    quote = "The API rate limit is 600 requests per minute. It has applied since 2025-03-01."
    assert [p.rule for p in check_claim("The API rate limit is 900 requests per minute.", quote, quote)] == ["grounding.number"]
    assert check_claim("The API rate limit is 600 requests per minute.", quote, quote) == []


@pytest.mark.parametrize(
    "claim,evidence,ok",
    [
        ("该线路全长375公里。", "该线路全长357公里，连接两地。", False),
        ("该线路全长357公里。", "该线路全长357公里，连接两地。", True),
        ("他续约3年。", "他与球队续约三年。", True),
        ("他续约三年。", "他与球队续约3年。", True),
        ("该线路全长364.6 km。", "该线路全长364.6公里。", True),
        ("该桥于1930年建成。", "该桥于1903年建成。", False),
        ("该桥于1903年建成。", "该桥于1903年建成。", True),
    ],
)
def test_numbers_next_to_han_characters(claim: str, evidence: str, ok: bool) -> None:
    assert (check_claim(claim, evidence, evidence) == []) is ok


SPAN = "[2023-06-21T13:56:00] Jon (D1:3): I had a car accident last Friday."
QUOTE = "I had a car accident last Friday."


@pytest.mark.parametrize(
    "claim,ok",
    [
        ("Jon had a car accident on June 21, 2023.", False),  # the day it was said
        ("Jon had a car accident on Friday, June 16, 2023.", True),  # the day it means
        ('On June 21, 2023, Jon said: "I had a car accident last Friday."', True),  # the day of saying, words kept
    ],
)
def test_a_relative_day_is_read_from_the_day_it_was_said(claim: str, ok: bool) -> None:
    problems = check_claim(claim, QUOTE, SPAN, conversation=True)
    assert (problems == []) is ok, problems
    if not ok:
        assert problems[0].rule == "grounding.date" and "2023-06-16" in problems[0].message


def test_last_friday_said_on_a_saturday_may_mean_either_friday() -> None:
    import datetime as dt

    [(phrase, days)] = support.resolve("I saw it last Friday", dt.date(2023, 6, 24))
    assert phrase == "last Friday" and days == {dt.date(2023, 6, 23), dt.date(2023, 6, 16)}


# (claim, quote, passes): a marker changed, then the faithful form
MARKERS = [
    ("Users must rotate keys monthly.", "Users should rotate keys monthly.", False),
    ("Users ought to rotate keys monthly.", "Users should rotate keys monthly.", True),
    ("The cache will be cleared on restart.", "The cache may be cleared on restart.", False),
    ("The cache might be cleared on restart.", "The cache may be cleared on restart.", True),
    ("Jon opened a bakery.", "Jon plans to open a bakery.", False),
    ("Jon plans to open a bakery.", "Jon plans to open a bakery.", True),
    ("Compression is enabled.", "Compression is enabled by default.", False),
    ("By default, compression is enabled.", "Compression is enabled by default.", True),
    ("The feature is available.", "The feature is available in the EU.", False),
    ("In the EU, the feature is available.", "The feature is available in the EU.", True),
    ("The wheel supports type hints.", "The wheel supports type hints for Python 3.8+.", False),
    ("The build failed because the cache was full.", "The build failed. The cache was full.", False),
    ("The build failed. The cache was full.", "The build failed. The cache was full.", True),
    ("If B is not set, A is used.", "If A is not set, B is used.", False),
    ("B is used if A is not set.", "If A is not set, B is used.", True),
    ("Calvin is the best guitarist in the band.", "Calvin is one of the guitarists in the band.", False),
    ("Dre is Calvin's doctor.", "Calvin likes a song by Tupac and Dre.", False),
    ("The trip is in June.", "The trip is in May.", False),  # the date rule's, not a modal
]


@pytest.mark.parametrize("claim,quote,ok", MARKERS)
def test_the_markers_of_a_quote_are_kept(claim: str, quote: str, ok: bool) -> None:
    problems = check_claim(claim, quote, quote)
    assert (problems == []) is ok, problems
    if not ok and "May" not in quote:
        assert "grounding.support" in [p.rule for p in problems]


def test_dropping_will_alone_is_a_tense_change() -> None:
    assert support.problems("The client retries.", ["The client will retry."], "The client will retry.") == []
    assert support.problems("The client will retry.", ["The client retries."], "The client retries.") == []
