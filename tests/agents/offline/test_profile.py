"""Issue 13 item 3: conversations become a real profile with the offline Proposer. Each test is a
small conversation written for it; outcomes are the written pages (cards, claims, sections)."""

from __future__ import annotations

from typing import Any

from agents.offline.attributes import attributes_of_text
from agents.offline.entities import entities_of_text
from agents.offline.extractive import attributes_of, conversation_statements, topic_of
from agents.offline.profile import date_note, topic_of_text
from agents.offline.proposer import plan_user_memory
from agents.protocols import EvidenceItem
from kb.intake import Message, render_messages
from kb.page import Page, parse_page


def item(messages: list[tuple[str, str]], date: str = "2023-05-08", ev: str = "ev-0123456789abcdef", user: str = "deborah") -> EvidenceItem:
    text = render_messages([Message(who, what, f"{date}T10:00:00") for who, what in messages])
    return EvidenceItem(ev, "conversation", f"user:{user}", text, "t", date)


def plan(items: list[EvidenceItem], user: str = "deborah", name: str = "Deborah") -> dict[str, str]:
    return plan_user_memory(user, items, lambda _path: None, name, {name}).writes


def profile(writes: dict[str, str], user: str = "deborah") -> Page:
    path = f"users/{user}/profile.md"
    return parse_page(writes[path], path)


def cards(page: Page) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in page.meta.get("facts") or []}


def values(text: str) -> list[tuple[str, str]]:
    return [(a.key, a.value) for a in attributes_of_text(text)]


def test_occupation_and_employer_in_the_usual_phrasings() -> None:
    assert values("I teach yoga at the community center.") == [("occupation", "teach yoga")]
    assert values("I work as a nurse at St. Mary's.") == [("occupation", "nurse"), ("employer", "St. Mary's")]
    assert values("I'm employed full-time as a software engineer at TechCorp Industries.") == [
        ("occupation", "software engineer"),
        ("employer", "TechCorp Industries"),
    ]
    assert values("I'm a graphic designer.") == [("occupation", "graphic designer")]
    assert values("I just started a new job at Google.") == [("employer", "Google")]
    assert values("I'm a big fan of jazz.") == []  # not a job


def test_a_move_makes_the_new_city_home_and_closes_the_old_one() -> None:
    writes = plan([item([("Deborah", "I moved from Denver to Portland last year.")])])
    homes = [(f["value"], f.get("valid_to")) for f in profile(writes).meta["facts"] if f["key"] == "home"]
    assert homes == [("Denver", "2023-05-08"), ("Portland", None)]
    assert "home city: Portland" in profile(writes).summary and "Denver" not in profile(writes).summary


def test_family_deaths_partner_and_pets() -> None:
    messages = [
        ("Deborah", "My late father taught me to paint."),
        ("Deborah", "My mom passed away last year."),
        ("Deborah", "My husband Tom and I walk every morning."),
        ("Deborah", "My cats Luna and Max sleep on my yoga mat."),
        ("Deborah", "We adopted two dogs named Rex and Bo."),
    ]
    page = profile(plan([item(messages)]))
    found = cards(page)
    assert found["died:father"]["detail"] == "late" and found["died:mom"]["detail"] == "passed away"
    assert found["partner"]["value"] == "Tom"
    assert {k for k in found if k.startswith("pet:")} == {"pet:luna", "pet:max", "pet:rex", "pet:bo"}
    assert found["pet:luna"]["relation"] == "cats" and found["pet:rex"]["relation"] == "two dogs"
    assert "pet: Luna" in page.summary and "deceased: father" in page.summary
    assert "Deborah's cats Luna and Max sleep on my yoga mat." not in page.body  # half-moved: quoted instead
    assert 'Deborah said: "My cats Luna and Max sleep on my yoga mat."' in page.body


def test_hobbies_health_preferences_and_plans() -> None:
    assert values("I love hiking and I play the violin.") == [("hobby:the-violin", "the violin"), ("hobby:hiking", "hiking")]
    assert values("I'm allergic to peanuts and shellfish.") == [("allergy:peanuts", "peanuts"), ("allergy:shellfish", "shellfish")]
    assert values("I have asthma.") == [("condition:asthma", "asthma")]
    assert values("My favorite food is sushi.") == [("favorite:food", "sushi")]
    assert values("I'm planning to visit Lisbon next month.") == [("plan:visit-lisbon-next-month", "visit Lisbon next month")]
    page = profile(plan([item([("Deborah", "I'm allergic to peanuts."), ("Deborah", "I'm planning to run a marathon in October.")])]))
    assert "## Health" in page.body and "## Plans" in page.body
    assert "allergy: peanuts" in page.summary and "plan" not in page.summary  # plans are not standing facts


def test_values_are_verbatim_parts_of_the_cited_line() -> None:
    messages = [("Deborah", "I work as a nurse at St. Mary's and my cats Luna and Max keep me sane.")]
    writes = plan([item(messages)])
    line = item(messages).text.splitlines()[0]
    for fact in profile(writes).meta["facts"]:
        assert fact["value"] in line and fact["source"] == "ev-0123456789abcdef#L1"
        assert fact["learned"] == "said by Deborah on 2023-05-08"


def test_you_spoken_by_the_user_is_the_other_person_and_never_a_claim_about_the_user() -> None:
    conversation = item(
        [
            ("Jolene", "I finished my first marathon on Sunday!"),
            ("Deborah", "I'm so proud of you."),
            ("Deborah", "Your strength inspires me every day."),
        ]
    )
    sts = conversation_statements(conversation, {"Deborah"}, "Deborah")
    proud = next(s for s in sts if "proud" in s.quote)
    assert proud.claim == 'Deborah told Jolene: "I\'m so proud of you."'
    assert (proud.start, proud.end) == (1, 2)  # Jolene's turn is cited too: her name is on the lines
    assert attributes_of(proud) == []
    written = "\n".join(plan([conversation]).values())
    assert "Deborah is so proud of you" not in written


def test_you_spoken_to_the_user_is_about_the_user() -> None:
    conversation = item([("Deborah", "I finally got the keys today."), ("Jolene", "Your cats must love the new house!")])
    sts = conversation_statements(conversation, {"Deborah"}, "Deborah")
    assert [s.claim for s in sts if s.speaker == "Jolene"] == ['Jolene told Deborah: "Your cats must love the new house!"']
    # with a third person in the room, "you" said to someone else is not about the user
    three = item(
        [("Deborah", "I got the keys."), ("Jolene", "Hi Sam!"), ("Sam", "Hello there."), ("Jolene", "Your cats must love the new house!")]
    )
    assert [s for s in conversation_statements(three, {"Deborah"}, "Deborah") if s.speaker == "Jolene"] == []


def test_the_user_speaking_to_an_assistant_is_quoted_with_its_addressee() -> None:
    sts = conversation_statements(
        item([("assistant", "Anything else?"), ("user", "I told you my seat preference last week.")], user="jo"), {"user"}, "Jo"
    )
    assert [s.claim for s in sts] == ['Jo told the assistant: "I told you my seat preference last week."']


def test_topics_follow_what_the_sentence_is_about_not_a_keyword_anywhere() -> None:
    assert topic_of_text("Let's find a time that works for both of us, I'm free on the 12th.") == ("notes", "Other facts")
    assert topic_of_text("I started working at the hospital in 2019.")[0] == "work"
    assert topic_of_text("My sister drove me to the airport for my flight to Rome.")[0] == "travel"
    assert topic_of_text("The vet said my dog needs 2 pills a day.")[0] == "pets"
    sts = conversation_statements(item([("Deborah", "I teach yoga to 20 kids every week.")]), {"Deborah"}, "Deborah")
    assert topic_of(sts[0])[0] == "work"  # the attribute decides: it is about her job


def test_relative_dates_are_anchored_to_the_session_date_in_a_note() -> None:
    assert date_note("My dad passed away three years ago.", "2023-05-08") == '"three years ago" = 2020, counted from 2023-05-08'
    assert date_note("I moved last year.", "2023-05-08") == '"last year" = 2022, counted from 2023-05-08'
    assert date_note("We met yesterday.", "2023-05-08") == '"yesterday" = 2023-05-07, counted from 2023-05-08'
    assert date_note("I ran a race last Saturday.", "2023-05-08") == '"last Saturday" = 2023-05-06, counted from 2023-05-08'
    assert date_note("We go next month.", "2023-12-20") == '"next month" = January 2024, counted from 2023-12-20'
    # vague amounts are never turned into a year
    assert (
        date_note("I learned it a few years ago.", "2023-05-08")
        == '"a few years ago" = some years before 2023-05-08, counted from 2023-05-08'
    )
    assert date_note("I moved here.", "2023-05-08") == ""
    writes = plan([item([("Deborah", "My dad passed away three years ago.")])])
    line = next(line for line in profile(writes).body.splitlines() if "passed away" in line and line.startswith("- "))
    assert line.endswith('_("three years ago" = 2020, counted from 2023-05-08)_')
    assert "2020" not in line.split("[^")[0]  # the claim itself stays verbatim; the anchor is a note
    assert "## 2023-05-08" in writes["users/deborah/timeline.md"]  # dated under the day it was said


def test_things_in_numbers_become_entity_cards_kept_apart() -> None:
    known: dict[str, list[str]] = {}
    assert entities_of_text("I pay with my Bayside Harbor card abroad.", known) == [("cards", "Bayside Harbor")]
    assert entities_of_text("The flight was paid with my NorthWind Gold card.", known) == [("cards", "NorthWind Gold")]
    assert entities_of_text("The Harbor has no foreign transaction fees.", known) == [("cards", "Bayside Harbor")]
    assert entities_of_text("My doctor is Dr. Patel at the clinic.", known) == [("doctors", "Dr. Patel")]
    messages = [
        ("user", "I pay with my Bayside Harbor card abroad."),
        ("user", "The flight was paid with my NorthWind Gold card."),
        ("assistant", "Your savings account number is 4429853328."),
        ("assistant", "Your checking account number is 4429853327."),
        ("user", "My Fernwood 14 Pro laptop warranty expires in March 2025."),
    ]
    writes = plan([item(messages, user="jo")], user="jo", name="Jo")
    card_page = parse_page(writes["users/jo/cards.md"], "users/jo/cards.md")
    assert [f["value"] for f in card_page.meta["facts"]] == ["Bayside Harbor", "NorthWind Gold"]
    assert "Bayside Harbor; NorthWind Gold" in card_page.summary  # a question about "my cards" finds both
    assert [s.title for s in card_page.structure.sections if s.level == 2][1:] == ["Bayside Harbor", "NorthWind Gold"]
    accounts = parse_page(writes["users/jo/accounts.md"], "users/jo/accounts.md")
    by_value = {f["value"]: f for f in accounts.meta["facts"]}
    assert set(by_value) == {"savings account", "checking account"}
    assert [d["text"] for d in by_value["checking account"]["details"]] == ["account number is 4429853327"]
    assert [d["text"] for d in by_value["savings account"]["details"]] == ["account number is 4429853328"]
    devices = parse_page(writes["users/jo/devices.md"], "users/jo/devices.md")
    assert devices.meta["facts"][0]["value"] == "Fernwood 14 Pro laptop"
    assert any("March 2025" in d["text"] for d in devices.meta["facts"][0]["details"])


def test_entity_cards_are_found_again_in_a_later_session() -> None:
    first = item([("user", "I have a 2017 Volvo V60 and a Bayside Harbor card.")], "2024-01-01", "ev-aaaaaaaaaaaaaaaa", "jo")
    writes = plan([first], user="jo", name="Jo")
    later = item([("user", "The Harbor annual fee is $550 now.")], "2024-03-01", "ev-bbbbbbbbbbbbbbbb", "jo")
    again = plan_user_memory("jo", [later], lambda path: writes.get(path), "Jo", {"Jo"}).writes
    page = parse_page(again["users/jo/cards.md"], "users/jo/cards.md")
    assert [f["value"] for f in page.meta["facts"]] == ["Bayside Harbor"]
    assert "annual fee is $550" in page.section_text("bayside-harbor", include_heading=False)


def test_a_sentence_to_a_friend_is_no_standing_instruction() -> None:
    """ "Don't worry" said to a friend is not an instruction to an assistant (LoCoMo conv-30 was
    never merged: three such "instructions" read as conflicting current values)."""
    friends = item(
        [
            ("Gina", "I lost my job this month."),
            ("Jon", "Don't worry, I won't let anything get me down."),
            ("Jon", "Make sure yours stands out."),
        ]
    )
    sts = conversation_statements(friends, {"Jon"}, "Jon")
    assert not any(s.instruction for s in sts)
    assert "instruction" not in [f["key"] for f in profile(plan([friends], "jon", "Jon"), "jon").meta.get("facts") or []]
    assistant = item([("assistant", "How can I help?"), ("user", "Don't book red-eye flights for me.")], user="jo")
    assert [s.instruction for s in conversation_statements(assistant, {"user"}, "Jo")] == [True]


def test_several_standing_instructions_are_no_conflict_for_the_reviewer() -> None:
    from agents.offline.reviewer import conflicting_facts

    writes = plan([item([("user", "Always answer in French."), ("user", "Never book red-eye flights.")], user="jo")], "jo", "Jo")
    page = profile(writes, "jo")
    assert len([f for f in page.meta["facts"] if f["key"] == "instruction"]) == 2
    assert conflicting_facts(page) == []


def test_interests_former_jobs_places_and_more_pets() -> None:
    assert values("I'm passionate about fashion and dance.") == [("interest:fashion", "fashion")]
    assert values("Lost my job as a banker yesterday, so I'm gonna start a business.")[0] == ("former-job:banker", "banker")
    assert values("I also lost my job at Door Dash this month.") == [("former-job:door-dash", "Door Dash")]
    assert values("I've been to Paris twice.") == [("visited:paris", "Paris")]
    assert values("We got another cat named Bailey too.") == [("pet:bailey", "Bailey")]
    assert values("We celebrated my daughter's birthday.") == [("family:daughter", "daughter")]
    assert values("I went to a support group yesterday.") == []  # an event, not a place


def test_gonna_is_a_plan_only_with_a_when_or_a_where() -> None:
    assert values("I'm gonna make it happen!") == []
    assert values("I'm going through a lot.") == []
    assert values("I'm passionate about it.") == []
    assert values("I'm going to a transgender conference this month.") == [
        ("plan:a-transgender-conference-this-month", "a transgender conference this month")
    ]
    assert values("We're going to Rome in May.") == [("plan:rome-in-may", "Rome in May")]


def test_facts_said_without_i_are_the_speakers_when_nobody_else_is_the_subject() -> None:
    conversation = item(
        [
            ("Jolene", "How have you been?"),
            ("Deborah", "Love my new job at the bakery!"),
            ("Deborah", "Just got back from Paris. Been teaching yoga for 5 years. Going to adopt a puppy next month."),
            ("Deborah", "Researching adoption agencies - it's been a dream."),
            ("Deborah", "Took a short trip last week to Rome. Highly recommend it for sure!"),
        ]
    )
    sts = {s.quote: s for s in conversation_statements(conversation, {"Deborah"}, "Deborah")}
    assert sts["Just got back from Paris."].claim == "Deborah just got back from Paris."
    assert sts["Been teaching yoga for 5 years."].claim == "Deborah has been teaching yoga for 5 years."
    assert sts["Going to adopt a puppy next month."].claim == "Deborah is going to adopt a puppy next month."
    assert sts["Highly recommend it for sure!"].claim == "Deborah highly recommends it for sure!"
    assert sts["Love my new job at the bakery!"].claim == 'Deborah said: "Love my new job at the bakery!"'  # "my" stays quoted
    found = cards(profile(plan([conversation])))
    assert found["employer"]["value"] == "the bakery"
    assert found["visited:paris"]["value"] == "Paris" and found["visited:rome"]["value"] == "Rome"
    assert found["occupation"]["value"] == "teaching yoga"
    assert found["plan:adopt-a-puppy-next-month"]["value"] == "adopt a puppy next month"
    assert found["plan:researching-adoption-agencies"]["value"] == "Researching adoption agencies"
    line = conversation.text.splitlines()[2]
    assert all(f["value"] in conversation.text for f in found.values()) and "Paris" in line


def test_a_sentence_without_i_about_someone_else_is_not_the_speakers() -> None:
    conversation = item(
        [
            ("Jolene", "How's your sister doing?"),
            ("Deborah", "Just got back from Paris!"),  # the sister did: the question was about her
            ("Deborah", "My brother is visiting. Started a new job at Google last week."),  # the brother did
            ("Deborah", "Loves her new job at the bakery."),  # "loves": someone else
            ("Deborah", "Teaching yoga is hard work."),  # the -ing phrase is the subject
            ("Deborah", "Gonna be a great night."),  # "it" is
            ("Deborah", "Love your painting!"),  # about Jolene's painting
            ("Deborah", "Sounds like a great plan."),
        ]
    )
    page = profile(plan([conversation]))
    assert {k for k in cards(page)} == {"family:brother"}  # "My brother" is hers; nothing else is
    sts = conversation_statements(conversation, {"Deborah"}, "Deborah")
    assert not any(s.implied for s in sts)
    assert "Deborah just got back from Paris" not in "\n".join(plan([conversation]).values())


def test_phrasings_that_look_like_attributes_but_are_not() -> None:
    """Found by judging the profile benchmark's items (bench/data/profile_judgments.yaml)."""
    assert values("Here's a photo of my horse painting I did recently.") == []  # a painting, not a pet
    assert values("It reminds me why I love being a mom.") == []  # a role, not a hobby
    assert values("I love running my own studio.") == []  # a business, not running
    assert values("I love running in the park.") == [("hobby:running", "running")]
    assert values("I painted that lake sunrise last year.") == [("hobby:paint", "paint")]  # but a painting is a craft
    assert values("I'm starting to realize that self-care is really important.") == []  # not a plan
    assert values("I'm starting a dance studio.") == [("plan:a-dance-studio", "a dance studio")]
    assert entities_of_text("Let Westbrook do it - you'll get better rates.", {}) == []  # a name, but of no card
    assert entities_of_text("I'm using my corporate Westbrook card for the flights.", {}) == [("cards", "Westbrook")]
    assert entities_of_text("Excellent card choice!", {}) == []  # a capital that opens a sentence names nothing
    assert entities_of_text("I moved it to my Gold Rewards Savings.", {}) == [("accounts", "Gold Rewards Savings")]
    assert entities_of_text("My Savings is low.", {}) == []
