"""Things a user owns or deals with, named in one sentence without a model: vehicles, cards,
accounts, insurance policies, warranties, devices, doctors; and the identifiers, amounts and
dates said with them. A thing named in part later ("the V60") is the known one it names.

No pattern names a brand or a product: each finds a thing by how people name one (a year, a
make and a model; a capitalised name before the noun of its kind), so that what it finds in the
benchmark cases says how it does on anyone's (tests/agents/test_no_benchmark_words.py)."""

from __future__ import annotations

import re

from agents.offline.attributes import clean_value

# ---- things a user owns or deals with ----------------------------------------------------------

ENTITY_KINDS = {
    "vehicles": "cars and other vehicles",
    "cards": "cards",
    "accounts": "accounts",
    "policies": "insurance policies",
    "warranties": "warranties",
    "devices": "devices",
    "doctors": "doctors",
}
# Each pattern finds a thing by how people name one, never by a list of brands: a name of
# capitalised words before the noun of its kind ("the Northwind Rewards card", "my Gold
# Savings"), or a generic noun with an article ("my library card").
_DETERMINERS = r"(?:My|Our|Your|His|Her|Their|The|This|That|A|An|And|But|So|Or)\b"
ENTITY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        # a card by its name: "my Bayside Harbor card", "the old Northwind card" (the name only)
        "cards",
        re.compile(
            rf"""
            (?i:\b(?:my|our|your|his|her|their|the|a|an|this|that)[ ])
            (?:[a-z]+[ ])?                                   # an adjective: "old", "corporate"
            (
              (?:(?!{_DETERMINERS}|I\b|(?i:credit|debit|charge|gift)\b)[A-Z][\w&]*)
              (?:[ ][A-Z][\w&]*){{0,2}}
            )
            (?=[ ](?i:card|charge[ ]card)\b)
            """,
            re.X,
        ),
    ),
    (
        "cards",
        re.compile(
            r"""
            (?i:\b(?:my|the|a|your)[ ](?:new[ ])?)
            (
              (?:[A-Z][\w&]*\s){0,3}
              (?i:credit|debit|library|gym|membership|gift|loyalty|id|insurance)[ ]card
            )\b
            """,
            re.X,
        ),
    ),
    (
        # a card named by its last digits: "my Northwind ending in 4417"
        "cards",
        re.compile(
            r"""
            (?i:\b(?:my|the|your)[ ])
            ((?:[A-Z][\w&]*)(?:[ ][A-Z][\w&]*){0,2})
            (?=[ ](?i:ending[ ]in|that[ ]ends[ ]in|ends[ ]in)[ ]\d)
            """,
            re.X,
        ),
    ),
    (
        "accounts",
        re.compile(
            r"""
            \b(
              (?:[A-Z][\w&]*[ ]){0,2}
              (?i:checking|savings|brokerage|retirement|joint|business|student|roth[ ]ira|ira|401\(k\)|hsa|paypal|venmo)
              [ ]account
            )\b
            """,
            re.X,
        ),
    ),
    (
        # an account product named in title case: "Gold Rewards Savings", "Everyday Checking"
        "accounts",
        re.compile(
            rf"""
            \b(
              (?!{_DETERMINERS})[A-Z][\w&]+[ ]
              (?:(?!{_DETERMINERS})[A-Z][\w&]+[ ])?
              (?:Checking|Savings)
            )\b
            """,
            re.X,
        ),
    ),
    (
        "policies",
        re.compile(
            r"""
            \b(
              (?:[A-Z][\w&]*[ ]){0,2}
              (?i:car|auto|home|renters|health|life|travel|dental|pet|homeowners?)[ ]insurance
              (?:[ ]policy)?
            )\b
            """,
            re.X,
        ),
    ),
    ("policies", re.compile(r"\b((?:[A-Z][\w&]*[ ]){1,2}(?i:policy))\b", re.X)),
    ("warranties", re.compile(r"\b((?:[A-Z][\w&]*[ ]){0,3}(?i:extended[ ])?(?i:warranty))\b", re.X)),
    (
        # a device by its kind, with its make and model when said: "my new Fairline 12 laptop"
        "devices",
        re.compile(
            r"""
            (?i:\b(?:my|the|a|an|your|our)[ ](?:new[ ]|old[ ])?)
            (
              (?:(?:[A-Z]|[a-z]+[A-Z])[\w&]*[ ]|\d+[A-Za-z]*[ ]){0,3}
              (?i:
                  phone
                | smartphone
                | laptop
                | tablet
                | e-reader
                | smartwatch
                | headphones
                | earbuds
                | game[ ]console
                | console
                | camera
                | router
                | printer
                | tv
                | television
                | monitor
                | desktop
                | computer
              )
            )\b
            """,
            re.X,
        ),
    ),
    ("doctors", re.compile(r"\b((?:Dr\.|Doctor)[ ][A-Z][\w'\-]+(?:[ ][A-Z][\w'\-]+)?)", re.X)),
]
VEHICLE_RE = re.compile(r"\b((?:19|20)\d{2}) ([A-Z][a-zA-Z]+(?:-[A-Z][a-z]+)?) ([A-Z0-9][\w-]*(?: [0-9A-Z][\w-]*)?)")
# identifiers and amounts said with an entity: numbers, confirmations, expiry
DETAIL_RE = re.compile(
    r"\b(?:number|no\.|#|confirmation|policy|account|card ending in|ending in|expires?|expiring|expiration|valid until|due|renews?|limit|fee|balance)\b[^.;!?]{0,40}?"
    r"(?:[A-Z]{1,5}-?\d[\w-]{2,}|\$?\d[\d,.\-/]*\d|\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b[^.;!?]{0,12})",
    re.I,
)


def entities_of_text(text: str, known: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The (kind, name) of each thing a sentence names: a new one ("my Bayside Harbor card",
    "a 2017 Volvo V60") or a known one named in part ("the Harbor", "the V60"). A part that fits
    two known things of a kind (two Volvos) names neither."""
    found: list[tuple[str, str]] = []
    vehicle = vehicle_of(text, known.setdefault("vehicles", []))
    if vehicle:
        found.append(("vehicles", vehicle))
    for kind, pattern in ENTITY_PATTERNS:
        for m in pattern.finditer(text):
            name = clean_value(re.sub(r"^(?:my|the|a|your|new) ", "", m.group(1), flags=re.I))
            if len(name) < 3:
                continue
            names = known.setdefault(kind, [])
            same = next((n for n in names if n.lower() == name.lower() or name.lower() in n.lower().split(" ", 1)[-1:]), None)
            if same is None:
                names.append(name)
                same = name
            if (kind, same) not in found:
                found.append((kind, same))
    if found:
        return found
    words = set(re.findall(r"[\w'’.-]+", text))
    for kind, names in known.items():
        if kind == "vehicles":
            continue
        hits = [n for n in names if _distinctive(n, names) & words]
        if len(hits) == 1:
            found.append((kind, hits[0]))
    return found


# words that say what kind of thing a name is, and titles: they tell no two things apart
_KIND_WORDS = {"card", "credit", "debit", "charge", "checking", "savings", "account", "insurance", "policy", "warranty", "dr.", "doctor"}


def _distinctive(name: str, others: list[str]) -> set[str]:
    """The words of a name that alone still name it: capitalised, not a kind word or a title,
    and in no other name of its kind ("Harbor" of "Bayside Harbor Card" beside "Bayside Debit")."""
    taken = {w for other in others if other != name for w in other.split()}
    return {w for w in name.split() if w[:1].isupper() and len(w) >= 3 and w.lower() not in _KIND_WORDS and w not in taken}


def vehicle_of(text: str, known: list[str]) -> str | None:
    """The vehicle a sentence is about: a new "2017 Volvo V60", or a known one named by make or
    model ("the Volvo", "my V60"). Same-make vehicles stay apart by year and model."""
    m = VEHICLE_RE.search(text)
    if m:
        found = m.group(0)
        year, words = m.group(1), set(found.split()[1:])
        for vehicle in known:
            if vehicle.split()[0] == year and words & set(vehicle.split()[1:]):
                return vehicle
        known.append(found)
        return found
    lowered = text.lower()
    hits = [v for v in known if any(part.lower() in lowered.split() or f" {part.lower()}" in lowered for part in v.split()[1:])]
    return hits[0] if len(hits) == 1 else None


def entity_details(text: str) -> list[str]:
    """Identifiers, amounts and dates said in a sentence about a thing, verbatim."""
    return [clean_value(m.group(0)) for m in DETAIL_RE.finditer(text)]
