"""The short values `kb forget` matches exactly (kb.forgotten.values): phones in any spelling,
ids, e-mail addresses and names inside a sentence; not dates, times, evidence ids' hex digits or a
word opening a sentence; what stays removes what it also holds, in any case."""

from __future__ import annotations

from kb.forgotten import Fingerprints, forgotten_values, values


def test_a_phone_is_one_value_in_any_spelling_and_dates_and_hex_ids_are_none() -> None:
    spellings = ["+1 415 555 0134", "415-555-0134", "(415) 555 0134", "tel 415.555.0134"]
    assert all("d:4155550134" in values(s, True) for s in spellings)
    assert not [v for v in values("on 2024-03-01 at 10:00:30, see ev-95e95145d5b5d570#L3", True) if v.startswith("d:")]


def test_names_inside_a_sentence_ids_and_addresses_are_values_a_sentence_opener_is_not() -> None:
    found = values("Wilhelmina came. My badge is EMP-48213, mail pat@globex.io; I work at Globex Corporation.")
    assert {"w:globex", "w:globex corporation", "i:emp-48213", "e:pat@globex.io"} <= found
    assert "w:wilhelmina" not in found and "w:my" not in found


def test_what_stays_removes_its_values_and_a_scan_finds_the_rest_in_any_case() -> None:
    material = forgotten_values(["I work at Globex and see Doctor Lyon."], ["the doctor is in."])
    assert "w:globex" in material and "w:doctor" not in material
    prints = Fingerprints(b"k" * 32).with_values(material)
    assert prints.found_in("- [[users/pat/profile]]: employer: globex-uk") and not prints.found_in("a doctor is in")
