"""What else a user's own sentence says, without a model: the "I" it leaves out, the topic it is
about, and relative dates anchored to the session.

Everything here reads one sentence. A relative date ("last year", "three years ago") is anchored
to the date the sentence was said, as a note; a vague one ("a few years ago") is only placed
before that date. Profile attributes are ``attributes``; things a user owns, ``entities``.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from agents.offline.attributes import ACTIVITY_WORDS, FAMILY_WORDS, PARTNER_WORDS, PET_WORDS, Attribute

# ---- sentences without "I" ---------------------------------------------------------------

# People leave the subject out when it is themselves: "Love my new job at the bakery!", "Just got
# back from Lisbon", "Been teaching yoga for 5 years", "Going to adopt a puppy next month". Each
# rule is a way such a sentence starts and the subject it leaves out; the verb forms are those
# that only "I" (or "we") fits: "Loves her job" (someone else) and "Sounds great" (it) are not.
_LEAD = r"(?:(?:oh|well|so|yeah|yes|and|also|plus|anyway|actually|honestly|finally)[,!]?\s+)*"
_ADV = r"(?:(?:just|finally|recently|also|really|currently|still|now|totally|absolutely|actually|already)\s+)?"
IMPLIED_SUBJECT_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"^{_LEAD}(?={_ADV}been\s+(?:\w+ing|to|busy|married|together|sick|away)\b)", re.I), "I've "),
    (
        re.compile(
            rf"^{_LEAD}(?={_ADV}(?:(?:going to|gonna)(?! be\b)|heading (?:to|off|out|home)|planning|thinking (?:of|about)|hoping to|looking forward|"
            rf"working (?:as|at|for|on)|teaching|learning|researching|looking into|trying to|starting|moving|volunteering|training for|"
            rf"studying|saving (?:up )?for|getting ready|loving)\b)",
            re.I,
        ),
        "I'm ",
    ),
    (
        re.compile(
            rf"^{_LEAD}(?={_ADV}(?:got|went|moved|started|finished|bought|adopted|visited|quit|lost|joined|took|spent|signed up|"
            rf"ran|painted|tried|decided|booked|learned|learnt|met|came back|returned|graduated|won(?!')|completed|celebrated|"
            rf"picked up|finally got)\b(?! by\b))",
            re.I,
        ),
        "I ",
    ),
    # a feeling about one's own things: "Love my new job", "Miss my dad" ("Love it!" says nothing)
    (re.compile(rf"^{_LEAD}(?={_ADV}(?:(?:love|miss|hate|adore|enjoy|need)\s+(?:my|our)\b|(?:highly )?recommend\b))", re.I), "I "),
]
# "you" in it: the sentence is about, or to, the other person
_TO_SOMEONE_RE = re.compile(r"\b(?:you|your|yours|you're|you've|you'll|ya)\b", re.I)
# a sentence whose subject is someone else ("My sister is visiting.", "How's your dad?",
# "Did Tom get the job?"): a subject-less sentence right after it may be about them
_OTHER_SUBJECT_RE = re.compile(
    rf"^(?i:{_LEAD}(?:(?:how|what|where|when|why|did|does|do|is|was|has|have|will|are|and)(?:'s| is| was| are| did| does| has)?\s+)?)"
    rf"(?:(?i:(?:my|your|his|her|their|our)\s+(?:\w+\s+)?(?:{PARTNER_WORDS}|{FAMILY_WORDS}|{PET_WORDS}|boss|manager|coworkers?|colleagues?|neighbou?rs?))\b"
    rf"|(?i:he|she|they|he's|she's|they're)\b"
    rf"|(?<=\s)(?<!\bI )(?-i:(?!I\b)[A-Z][a-z]+)(?= \w+[^?]*\?)"
    rf"|(?!(?:That|This|It|There|Here|How|What|Which|Who|Where|When|Why|Everything|Nothing|Life|Today|Wow|Thanks|Yes|Yeah|Oh|Well|So|Sounds|Looks)\b)"
    rf"[A-Z][a-z]+(?:'s)? (?:is|was|has|had|just|got|went|and|said|told|loves?|started|moved|will|can)\b)"
)


# "Teaching yoga is my passion": the -ing phrase is the subject, not something the speaker is doing
_SUBJECT_ING_RE = re.compile(
    rf"^{_LEAD}\w+ing\b[^.!?,\-–—]*?\b(?:is|was|are|were|has|had|makes|made|helps|helped|can|gives|gave|keeps|means)(?:n't)?\b", re.I
)


def implied_subject(sentence: str, before: str = "") -> str:
    """``sentence`` with the "I" it leaves out ("I just got back from Lisbon"), or "" when it has
    a subject of its own or it may be about someone else: it speaks to someone ("you"), or the
    sentence said just ``before`` it (the speaker's previous one, or the question it answers)
    has another person as its subject ("How's your sister?" / "Just got back from Lisbon!")."""
    text = sentence.strip()
    if (
        _TO_SOMEONE_RE.search(text)
        or _SUBJECT_ING_RE.match(text)
        or (before and _OTHER_SUBJECT_RE.search(before.strip()) and not implied_subject(before))
    ):
        return ""
    for pattern, subject in IMPLIED_SUBJECT_RULES:
        m = pattern.match(text)
        if m:
            rest = text[m.end() :]
            return f"{subject}{rest[:1].lower()}{rest[1:]}"
    return ""


# ---- topics: what a sentence is about ----------------------------------------------------

# Each topic is recognised by words that say what the sentence is about: a noun the speaker
# owns or deals with ("my job", "the flight"), or a verb whose subject is the speaker ("I work",
# "we flew"); a word that only appears in passing ("a time that works for both of us") is not one.
_SELF = r"(?:I|I'm|I've|I'll|I'd|we|we're|we've|we'll)"
TOPICS: list[tuple[str, str, re.Pattern[str]]] = [
    (
        "vehicles",
        "Vehicles",
        re.compile(
            rf"""
            \b(?:
                cars?
              | vehicles?
              | sedan
              | suv
              | pickup[ ]truck
              | minivan
              | hatchback
              | motorcycle
              | vin
              | mileage
              | odometer
              | dealership
              | tyres?
              | tires?
              | oil[ ]change
              | car[ ]wash
              | test[ ]drive
              | license[ ]plate
            )\b
            |\b{_SELF}[ ](?:drive|drove|leased?|bought[ ]a[ ]car)\b
            |\b(?:my|our|the)[ ](?:new[ ]|old[ ])?(?:car|truck|van|bike)\b
            |(?-i:\b(?:19|20)\d\d[ ][A-Z][a-zA-Z]+[ ][A-Z0-9][\w-]*)        # a year, a make, a model
            """,
            re.I | re.X,
        ),
    ),
    (
        "travel",
        "Travel",
        re.compile(
            rf"\b(?:flights?|trips?|airport|hotels?|passport|visa|vacation|holiday|airline|frequent flyer|itinerary|boarding|luggage|layover|road trip)\b"
            rf"|\b{_SELF} (?:(?:will |am |are |'m |'re )?(?:fly|flew|flying|travel\w*|went abroad))\b|\bseats?\b(?= on| in| for|\.|$)",
            re.I,
        ),
    ),
    (
        "health",
        "Health",
        re.compile(
            r"\b(?:doctor|allerg\w*|medication|medicine|hospital|health|dentist|therapy|therapist|diagnos\w*|symptoms?|surgery|pregnan\w*|"
            r"injur\w*|sick|illness|physio\w*|prescription|check-?up|asthma|diabetes)\b",
            re.I,
        ),
    ),
    (
        "finances",
        "Finances",
        re.compile(
            r"(?:\$|€|£|\b(?:bank|accounts?|income|salary|loan|mortgage|credit card|debit card|payments?|insurance|invest\w*|savings|budget|taxe?s?|"
            r"paycheck|rent|debt|retirement fund|401\(k\)|pension)\b)",
            re.I,
        ),
    ),
    (
        "pets",
        "Pets",
        re.compile(rf"\b(?:my|our|the|your) (?:{PET_WORDS})\b|\b(?:vet|veterinarian|adopted a (?:{PET_WORDS}))\b", re.I),
    ),
    (
        "food",
        "Food and drink",
        re.compile(
            rf"\b(?:vegetarian|vegan|food|meals?|dinner|lunch|breakfast|recipes?|restaurants?|coffee|alcohol|wine|beer|cooking|baking)\b|\b{_SELF} (?:eat|ate|drink|cook|cooked|bake|baked)\b",
            re.I,
        ),
    ),
    (
        "work",
        "Work",
        re.compile(
            r"\b(?:my|our|new|the|at|from|after|before|to) (?:work|job|boss|manager|employer|office|colleagues?|coworkers?|career|shift|clients?|promotion|team lead)\b"
            rf"|\b{_SELF} (?:(?:now |still |also |currently |started |stopped |began |kept )?(?:work|worked|working)|(?:got|quit|lost|started|love|hate) (?:a |my |the )?(?:new )?job)\b"
            r"|\b(?:salary|promotion|interview|career|hired|fired|resume|coworkers?)\b",
            re.I,
        ),
    ),
    (
        "family",
        "Family and friends",
        re.compile(rf"\b(?:{PARTNER_WORDS}|{FAMILY_WORDS}|family|fam|friends?|wedding|anniversary|married|divorced|engaged)\b", re.I),
    ),
    (
        "hobbies",
        "Hobbies",
        re.compile(
            rf"\b(?:hobby|hobbies|painting|paintings|drawing|pottery|knitting|gardening|photography|reading|books?|novels?|concerts?|band|music|"
            rf"guitar|violin|piano|{ACTIVITY_WORDS}|yoga|gym|workout|marathon|race|games?|movies?|hike|hikes)\b",
            re.I,
        ),
    ),
]

# an attribute decides the topic of its sentence
_ATTRIBUTE_TOPICS = {
    "occupation": "work",
    "employer": "work",
    "business": "work",
    "manager": "work",
    "partner": "family",
    "child": "family",
    "family": "family",
    "died": "family",
    "pet": "pets",
    "allergy": "health",
    "condition": "health",
    "medication": "health",
    "hobby": "hobbies",
    "interest": "hobbies",
    "former-job": "work",
    "visited": "travel",
    "diet": "food",
    "seat": "travel",
}


def topic_of_text(text: str, attributes: list[Attribute] | None = None) -> tuple[str, str]:
    """The topic a sentence is about: the one of its attribute, else the topic with the most
    telling words in it (the first of them on a tie), else "notes"."""
    titles = {slug: title for slug, title, _ in TOPICS}
    for attr in attributes or []:
        slug = _ATTRIBUTE_TOPICS.get(attr.key.split(":")[0])
        if slug:
            return slug, titles[slug]
    best: tuple[int, int, str] | None = None
    for slug, _title, pattern in TOPICS:
        hits = list(pattern.finditer(text))
        if hits:
            score = (-len(hits), hits[0].start(), slug)
            best = score if best is None or score < best else best
    if best is None:
        return "notes", "Other facts"
    return best[2], titles[best[2]]


# ---- relative dates ------------------------------------------------------------------------

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
RELATIVE_RE = re.compile(
    r"\b(?:(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|several) (?P<unit>days?|weeks?|months?|years?) ago"
    r"|(?P<rel>last|next|this past|this coming) (?P<what>week|weekend|month|year|summer|winter|spring|fall|autumn|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|(?P<day>yesterday|tomorrow))\b",
    re.I,
)


def _month_shift(d: date, months: int) -> tuple[int, int]:
    total = d.year * 12 + d.month - 1 + months
    return total // 12, total % 12 + 1


def anchor(phrase: re.Match[str], said: date) -> str:
    """What a relative date means, counted from the day it was said (never a guess: a vague
    amount only says "before")."""
    g = phrase.groupdict()
    if g["day"]:
        return (said - timedelta(days=1) if g["day"].lower() == "yesterday" else said + timedelta(days=1)).isoformat()
    if g["n"]:
        unit = g["unit"].lower().rstrip("s")
        amount = _NUMBERS.get(g["n"].lower()) if not g["n"].isdigit() else int(g["n"])
        if amount is None:
            return f"some {unit}s before {said.isoformat()}"
        if unit == "day":
            return (said - timedelta(days=amount)).isoformat()
        if unit == "week":
            return f"the week of {(said - timedelta(weeks=amount)).isoformat()}"
        if unit == "month":
            year, month = _month_shift(said, -amount)
            return f"{_MONTHS[month - 1]} {year}"
        return f"{said.year - amount}"
    step = 1 if g["rel"].lower() in ("next", "this coming") else -1
    what = g["what"].lower()
    if what in _WEEKDAYS:
        target = _WEEKDAYS.index(what)
        delta = (said.weekday() - target) % 7 or 7
        return (said - timedelta(days=delta) if step < 0 else said + timedelta(days=(target - said.weekday()) % 7 or 7)).isoformat()
    if what in ("week", "weekend"):
        return f"the {what} of {(said + timedelta(weeks=step)).isoformat()}"
    if what == "month":
        year, month = _month_shift(said, step)
        return f"{_MONTHS[month - 1]} {year}"
    if what == "year":
        return str(said.year + step)
    return f"the {what} {'before' if step < 0 else 'after'} {said.isoformat()}"


def date_note(text: str, said_on: str) -> str:
    """``"last year" = 2022, counted from 2023-05-08`` for each relative date of a sentence, or ""."""
    try:
        said = date.fromisoformat(said_on)
    except ValueError:
        return ""
    parts = [f'"{m.group(0)}" = {anchor(m, said)}' for m in RELATIVE_RE.finditer(text)]
    return f"{'; '.join(parts)}, counted from {said_on}" if parts else ""
