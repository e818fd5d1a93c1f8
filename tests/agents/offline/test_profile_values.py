"""Profile values name a thing: no copula, light verb alone, pronoun or cut phrase (issue 30 item 8)."""

from __future__ import annotations

from agents.offline.attributes import attributes_of_text, names_a_thing


def values(text: str) -> list[tuple[str, str]]:
    return [(a.key, a.value) for a in attributes_of_text(text)]


def test_function_words_and_light_verbs_are_no_hobby() -> None:
    assert values("I love being in the city with people.") == []
    assert values("I love seeing them eat.") == []
    assert values("I love spending time with them.") == []
    assert values("I love playing with the dog.") == []
    assert not names_a_thing("hobby", "having some of")
    assert not names_a_thing("hobby", "breaking up my")
    assert not names_a_thing("dislike", "not being on the court")


def test_pastimes_that_name_a_thing_are_kept() -> None:
    assert values("I love hiking and I play the violin.") == [("hobby:the-violin", "the violin"), ("hobby:hiking", "hiking")]
    assert names_a_thing("hobby", "playing different songs")
    assert names_a_thing("hobby", "helping the community")
    assert names_a_thing("interest", "charity work")


def test_a_generic_relation_without_a_name_is_no_family_fact() -> None:
    assert values("I had lunch with my friend.") == []
    assert ("family:sister", "sister") in values("I had lunch with my sister.")
    assert names_a_thing("family", "kids")
