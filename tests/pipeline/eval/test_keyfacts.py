"""Key facts of a reference text are found by pattern and matched ignoring case and punctuation."""

from pipeline.eval.keyfacts import key_facts, mentions, recall

REFERENCE = (
    "The agent should recall that the Honda Accord has service on Friday, November 24th at 8 AM "
    "at Firestone for $369.99 (confirmation FS-447291), that the user owns a 2019 Honda Accord "
    "and a 2023 Tesla Model 3, and the account number 4429853327."
)


def test_key_facts_are_amounts_ids_dates_vehicles_numbers() -> None:
    assert key_facts(REFERENCE) == ["$369.99", "FS-447291", "November 24th", "2019 Honda Accord", "2023 Tesla Model 3", "4429853327"]


def test_mentions_ignores_case_and_punctuation_but_not_digits() -> None:
    assert mentions("That brings your 30K service to $369.99.", "$369.99")
    assert mentions("your confirmation number is fs-447291.", "FS-447291")
    assert mentions("on November 24 at 8", "November 24th")
    assert not mentions("account 44298533271", "4429853327")
    assert not mentions("service to $369.", "$369.99")


def test_recall_splits_found_and_missing() -> None:
    found, missing = recall(REFERENCE, "Bought a 2023 Tesla Model 3. Account 4429853327.")
    assert found == ["2023 Tesla Model 3", "4429853327"] and "FS-447291" in missing
