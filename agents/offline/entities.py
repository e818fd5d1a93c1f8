"""Things a user owns or deals with, named in one sentence without a model: vehicles, cards,
accounts, insurance policies, warranties, devices, doctors; and the identifiers, amounts and
dates said with them. A thing named in part later ("the Civic") is the known one it names."""

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
_BRAND_CARD = r"(?:Chase (?:Sapphire (?:Reserve|Preferred)|Freedom(?: Unlimited| Flex)?)|Sapphire (?:Reserve|Preferred)|AmEx(?: [A-Z]\w+)?|American Express(?: [A-Z]\w+)?|Capital One [A-Z]\w+|Citi [A-Z]\w+|Discover(?: it)?|Apple Card|Visa(?: [A-Z]\w+)?|Mastercard)"
ENTITY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("cards", re.compile(rf"\b({_BRAND_CARD})\b(?: (?:card|credit card))?")),
    (
        "cards",
        re.compile(
            r"(?i:\b(?:my|the|a|your) (?:new )?)((?:[A-Z][\w&]*\s){0,3}(?i:credit|debit|library|gym|membership|gift|loyalty|id|insurance) card)\b"
        ),
    ),
    (
        "accounts",
        re.compile(
            r"\b((?:[A-Z][\w&]* ){0,2}(?i:checking|savings|brokerage|retirement|joint|business|student|roth ira|ira|401\(k\)|hsa|paypal|venmo) account)\b"
        ),
    ),
    ("accounts", re.compile(r"\b((?:Premium|Basic|Elite|Student|Everyday) (?:Checking|Savings))\b")),
    (
        "policies",
        re.compile(
            r"\b((?:[A-Z][\w&]* ){0,2}(?i:car|auto|home|renters|health|life|travel|dental|pet|homeowners?) insurance(?: policy)?)\b"
        ),
    ),
    ("policies", re.compile(r"\b((?:[A-Z][\w&]* ){1,2}(?i:policy))\b")),
    ("warranties", re.compile(r"\b((?:[A-Z][\w&]* ){0,3}(?i:extended )?(?i:warranty))\b")),
    (
        "devices",
        re.compile(
            r"\b((?:Apple |Samsung |Google )?(?:iPhone|iPad|MacBook(?: Air| Pro)?|iMac|Galaxy|Pixel|Kindle|Apple Watch|AirPods|ThinkPad|Surface|PlayStation|Xbox|Nintendo Switch)(?: (?:Pro|Max|Plus|Mini|Ultra|Air|\d+[A-Za-z]*))*)\b"
        ),
    ),
    ("doctors", re.compile(r"\b((?:Dr\.|Doctor) [A-Z][\w'\-]+(?: [A-Z][\w'\-]+)?)")),
]
VEHICLE_RE = re.compile(r"\b((?:19|20)\d{2}) ([A-Z][a-zA-Z]+(?:-[A-Z][a-z]+)?) ([A-Z0-9][\w-]*(?: [0-9A-Z][\w-]*)?)")
# identifiers and amounts said with an entity: numbers, confirmations, expiry
DETAIL_RE = re.compile(
    r"\b(?:number|no\.|#|confirmation|policy|account|card ending in|ending in|expires?|expiring|expiration|valid until|due|renews?|limit|fee|balance)\b[^.;!?]{0,40}?"
    r"(?:[A-Z]{1,5}-?\d[\w-]{2,}|\$?\d[\d,.\-/]*\d|\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b[^.;!?]{0,12})",
    re.I,
)


def entities_of_text(text: str, known: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The (kind, name) of each thing a sentence names: a new one ("my Chase Sapphire Reserve",
    "a 2019 Honda Accord") or a known one named in part ("the Sapphire", "the Civic"). A part
    that fits two known things of a kind (two Hondas) names neither."""
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
    lowered = text.lower()
    for kind, names in known.items():
        if kind == "vehicles":
            continue
        hits = [n for n in names if _distinctive(n) and _distinctive(n).lower() in lowered]
        if len(hits) == 1:
            found.append((kind, hits[0]))
    return found


def _distinctive(name: str) -> str:
    """The part of a name that alone still names it: "Sapphire" of "Chase Sapphire Reserve"."""
    words = [w for w in name.split() if w[:1].isupper() and w.lower() not in ("chase", "apple", "google", "samsung", "dr.", "doctor")]
    return words[0] if words else ""


def vehicle_of(text: str, known: list[str]) -> str | None:
    """The vehicle a sentence is about: a new "2019 Honda Accord", or a known one named by make
    or model ("the Honda", "my Tesla"). Same-make vehicles stay apart by year and model."""
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
