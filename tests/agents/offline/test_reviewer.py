"""The offline Reviewer's own checks (besides the gate): conflicting current facts."""

from __future__ import annotations

from agents.offline.reviewer import conflicting_facts
from kb.page import parse_page
from tests.builders import page_for


def _card(key: str, value: str, relation: str, label: str) -> dict[str, object]:
    return {"key": key, "value": value, "about": "Jon", "relation": relation, "source": "ev-00000000#L1", "label": label}


def test_two_current_values_of_one_attribute_conflict() -> None:
    facts = [_card("home", "Berlin", "self", "a"), _card("home", "Munich", "self", "b")]
    page = parse_page(page_for("users/jon/profile.md", "Jon's profile", "Jon.", "Body.\n", facts=facts), "users/jon/profile.md")
    comments = conflicting_facts(page)
    assert [c.kind for c in comments] == ["conflict"]
    assert "`home` has several current values (Berlin, Munich)" in comments[0].message


def test_several_standing_instructions_do_not_conflict() -> None:
    """Instructions accumulate (the offline Proposer files each as key `instruction`): two of them
    at once is no contradiction, as the LoCoMo ingest of conv-30 showed (it was stopped here)."""
    facts = [
        _card("instruction", "Make sure yours stands out.", "instruction", "a"),
        _card("instruction", "Don't worry, I won't let anything get me down.", "instruction", "b"),
    ]
    page = parse_page(page_for("users/jon/profile.md", "Jon's profile", "Jon.", "Body.\n", facts=facts), "users/jon/profile.md")
    assert conflicting_facts(page) == []
