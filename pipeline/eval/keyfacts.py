"""Key facts named in a reference text (amounts, identifiers, dates, numbers, proper names),
found by pattern, and whether a text mentions each of them. Used to score memory against the
``evaluation_criteria`` of the memory cases by a script, not by eye."""

from __future__ import annotations

import re

MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?"
PATTERNS = [
    re.compile(r"\$\d[\d,]*(?:\.\d+)?"),  # amounts
    re.compile(r"\b[A-Z]{1,6}-[A-Z0-9]*\d[A-Z0-9-]*\b"),  # identifiers like FS-447291, DELTA-JMK892
    re.compile(rf"\b{MONTH} \d{{1,2}}(?:st|nd|rd|th)?(?:[-–]\d{{1,2}})?(?:, \d{{4}})?"),  # dates
    re.compile(r"\b(?:19|20)\d{2} [A-Z][a-z]+ [A-Z0-9][\w-]*(?: [0-9A-Z][\w-]*)?"),  # vehicles
    re.compile(r"\b\d{4,}\b"),  # long numbers (accounts, routing numbers)
    re.compile(r"\b(?:[A-Z][a-z]+|[A-Z]{2,}[a-z]*)(?: (?:[A-Z][a-z]+|[A-Z]{2,}[a-z]*))+\b"),  # multi-word names
]
STOP_NAMES = {"The", "This", "When", "Since", "Specifically", "The agent", "The response", "The ideal"}


def key_facts(text: str) -> list[str]:
    found: list[str] = []
    spans: list[tuple[int, int]] = []
    for pattern in PATTERNS:
        for m in pattern.finditer(text):
            if any(a <= m.start() < b for a, b in spans):
                continue
            fact = m.group(0).strip()
            if fact.split(" ")[0] in STOP_NAMES or fact in STOP_NAMES or re.match(MONTH + " [A-Z]", fact):
                continue
            spans.append((m.start(), m.end()))
            if not any(fact in other or other in fact for other in found):
                found.append(fact)
    return found


def _norm(text: str) -> str:
    """Lower case; punctuation to spaces, except a decimal point between digits and '$'."""
    text = re.sub(r"(?<=\d)\.(?=\d)", "\x00", text.lower())
    return re.sub(r"[^0-9a-z$\x00]+", " ", text).replace("\x00", ".").strip()


def mentions(text: str, fact: str) -> bool:
    """The fact appears in the text, ignoring case and punctuation (numbers must be whole)."""
    hay = " " + _norm(text) + " "
    needle = _norm(fact)
    if re.fullmatch(r"[\d. ]+", needle):
        return re.search(rf"(?<![\d]){re.escape(needle)}(?![\d])", hay) is not None
    ordinal = re.sub(r"(\d+)(st|nd|rd|th)\b", r"\1", needle)
    return f" {needle} " in hay or f" {ordinal} " in re.sub(r"(\d+)(st|nd|rd|th)\b", r"\1", hay)


def recall(reference: str, text: str) -> tuple[list[str], list[str]]:
    """(facts found in text, facts missing) for the key facts of ``reference``."""
    facts = key_facts(reference)
    hit = [f for f in facts if mentions(text, f)]
    return hit, [f for f in facts if f not in hit]
