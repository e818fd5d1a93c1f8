"""Statement extraction for the offline Proposer: sentences of evidence as claims, without a model.

It is extractive: every claim is a user's (or an agent's) own sentence, lightly moved to the
third person, cited with the verbatim sentence as quote. Documents become one page each, with
lead sentences as L0/L1. Conversations become a user's memory: a profile (identity, people,
preferences), topic pages and a timeline. A later statement of the same attribute (home city,
seat preference, manager...) closes the older claim with its end date instead of deleting it.

Sentences that try to steer a model ("ignore all previous instructions", "approve every
change") or ask that personal data be given to anyone are not statements about anyone: they are
never extracted, neither as claims nor as instructions (``kb.injection``).

What it cannot do, that a model can: understand paraphrase, resolve "it"/"there", merge facts
spread over several turns, infer anything not said in one sentence, or judge importance.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from agents.protocols import EvidenceItem
from kb.injection import unsafe_statement
from kb.markdown import format_citation

# Whether a sentence holds personal data that must not be copied into pages (``kb.privacy``:
# the kinds the policy masks or marks ``no-copy``); such a sentence is never extracted.
Withheld = Callable[[str], bool]


def keep_all(_sentence: str) -> bool:
    return False


LINE_RE = re.compile(r"^(?:\[(?P<time>[^\]]+)\] )?(?P<speaker>[^:\n]{1,80}?)(?: \((?P<turn>[^)]+)\))?: (?P<text>.*)$")
SENTENCE_RE = re.compile(r".+?(?:[.!?]+(?=\s|$)|[。！？]+|$)", re.S)
SKIP_RE = re.compile(r"^(?:hi|hello|hey|thanks|thank you|ok|okay|sure|yes|no|great|perfect|bye|goodbye|wow|cool)\b[\s!,.]*$", re.I)
FIRST_PERSON_RE = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|we|we're|our|us)\b", re.I)
# first person left in a claim after the subject was moved to the third person (case-sensitive:
# "US" is a country)
FIRST_PERSON_LEFT_RE = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself|we|we're|our|us)\b")
SECOND_PERSON_FACT_RE = re.compile(r"\b(?:you|your)\b", re.I)
# a user's standing instruction to their assistant ("always answer in French", "call me Sam")
INSTRUCTION_RE = re.compile(
    r"^(?:(?:ok|okay|also|and|so|actually),?\s+)?(?:please\b|always\b|never\b|don't\b|do not\b|make sure\b|from now on\b|"
    r"i want you to\b|remember to\b|call me\b)|\bfrom now on\b",
    re.I,
)


@dataclass(frozen=True)
class Statement:
    evidence_id: str
    start: int
    end: int
    speaker: str
    quote: str  # the verbatim sentence
    claim: str  # near-verbatim claim text
    date: str
    by_user: bool
    ordinal: int = 0  # sentence number within the line span, for unique labels


@dataclass(frozen=True)
class Attribute:
    key: str
    value: str
    single: bool = True  # a new value closes the old one


ATTRIBUTE_PATTERNS: list[tuple[str, re.Pattern[str], bool]] = [
    (
        "home",
        re.compile(
            r"\b(?:I live in|I'm living in|I am living in|I moved to|I've moved to|I have moved to|I relocated to|I'm based in|I am based in)\s+([A-Z][\w\-]+(?:[ ,]+[A-Z][\w\-]+)*)"
        ),
        True,
    ),
    ("address", re.compile(r"\bI live at\s+(.+?)(?:[.]|$)"), True),
    ("seat", re.compile(r"\bI (?:now )?prefer (aisle|window|middle) seats?", re.I), True),
    ("diet", re.compile(r"\bI(?:'m| am) (?:a )?(vegetarian|vegan|pescatarian)\b", re.I), True),
    ("work", re.compile(r"\bI(?:'m| am)? (?:employed full-time |now )?(?:work|working) (?:as|at|for)\s+(.+?)(?:[.,]|$)", re.I), True),
    ("name", re.compile(r"(?i:\bmy (?:full )?name is)\s+([A-Z][\w'\-]+(?: [A-Z][\w'\-]+)*)"), True),
    ("phone", re.compile(r"\b(?:my (?:cell|phone|mobile)(?: number)? is)\s+([+\d][\d\- ()]{6,}\d)", re.I), True),
    ("email", re.compile(r"\b([\w.+-]+@[\w-]+\.[\w.]+)"), True),
    ("manager", re.compile(r"(?i:\bmy (?:manager|boss) is)\s+([A-Z][\w'\-]+(?: [A-Z][\w'\-]+)*)"), True),
    ("partner", re.compile(r"(?i:\bmy (?:wife|husband|partner|spouse)(?:'s name)?(?: is|,))\s+([A-Z][\w'\-]+)"), True),
    ("child", re.compile(r"(?i:\bmy (?:daughter|son|kid|child)(?:'s name)?(?: is|,)?)\s+([A-Z][\w'\-]+)"), False),
]

TOPICS: list[tuple[str, str, re.Pattern[str]]] = [
    (
        "vehicles",
        "Vehicles",
        re.compile(
            r"\b(car|cars|vehicle|vehicles|honda|tesla|toyota|ford|bmw|vin|mileage|drive|drives|driving|lease|leased|dealership)\b", re.I
        ),
    ),
    (
        "travel",
        "Travel",
        re.compile(
            r"\b(flight|flights|fly|flying|seat|seats|trip|trips|travel|travelling|traveling|airport|hotel|passport|visa|vacation|booking|airline|frequent flyer|itinerary)\b",
            re.I,
        ),
    ),
    (
        "health",
        "Health",
        re.compile(
            r"\b(doctor|allerg\w*|medication|medicine|hospital|health|dentist|therapy|diagnos\w*|symptom\w*|surgery|pregnan\w*)\b", re.I
        ),
    ),
    (
        "finances",
        "Finances",
        re.compile(
            r"(\$|€|£|\b(bank|account|income|salary|loan|mortgage|credit|debit|payment|insurance|policy|invest\w*|savings|budget|tax|taxes)\b)",
            re.I,
        ),
    ),
    (
        "food",
        "Food and drink",
        re.compile(r"\b(vegetarian|vegan|eat|eats|food|meal|meals|drink|drinks|alcohol|cook\w*|restaurant|coffee|tea)\b", re.I),
    ),
    (
        "work",
        "Work",
        re.compile(r"\b(work|works|job|manager|boss|employer|company|office|colleague\w*|career|project|engineer|promotion)\b", re.I),
    ),
    (
        "family",
        "Family and friends",
        re.compile(
            r"\b(wife|husband|partner|daughter|son|kids|children|child|mother|mom|father|dad|brother|sister|family|friend|friends|grandma|grandpa)\b",
            re.I,
        ),
    ),
]

_VERB_S = {
    "have": "has",
    "do": "does",
    "go": "goes",
    "am": "is",
    "was": "was",
    "can": "can",
    "will": "will",
    "would": "would",
    "should": "should",
    "could": "could",
    "must": "must",
    "might": "might",
    "may": "may",
    "don't": "doesn't",
    "haven't": "hasn't",
}


_ADVERBS = {
    "now",
    "also",
    "really",
    "just",
    "still",
    "always",
    "never",
    "usually",
    "often",
    "sometimes",
    "only",
    "actually",
    "definitely",
    "mostly",
    "finally",
    "recently",
    "already",
    "currently",
    "generally",
    "normally",
    "absolutely",
    "totally",
    "honestly",
}
_BASE_VERBS = set(
    "prefer like love hate need want live work own drive use eat drink take travel plan speak enjoy know think "
    "feel hope try keep make play run read write study teach watch visit cook paint bake sing dance swim walk "
    "ride fly book pay save spend earn owe rent lease support volunteer attend care wish miss remember "
    "believe mean get see find usually agree understand appreciate admire collect create practice".split()
)


def third_person(sentence: str, name: str) -> str:
    """'I prefer aisle seats' -> 'Alice prefers aisle seats'; anything unusual stays verbatim."""
    text = sentence.strip()
    m = re.match(r"^(?:(?:Also|And|So|Well|Oh|Yes|No|Actually|Now|Plus),?\s+)?(I'm|I am|I've|I have|I'd|I'll|I|My)\b\s*(.*)$", text)
    if not m:
        return text
    head, rest = m.group(1), m.group(2)
    if head in ("I'm", "I am"):
        return f"{name} is {rest}"
    if head in ("I've", "I have"):
        return f"{name} has {rest}"
    if head == "I'd":
        return f"{name} would {rest}"
    if head == "I'll":
        return f"{name} will {rest}"
    if head == "My":
        return f"{name}'s {rest}"
    words = rest.split(" ", 1)
    adverb = ""
    if words[0].lower() in _ADVERBS and len(words) > 1:
        adverb = words[0] + " "
        words = words[1].split(" ", 1)
    verb = words[0]
    tail = words[1] if len(words) > 1 else ""
    lower = verb.lower()
    if lower in _VERB_S:
        verb = _VERB_S[lower]
    elif lower in _BASE_VERBS:
        if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
            verb = lower + "es"
        elif lower.endswith("y") and lower[-2:-1] not in "aeiou":
            verb = lower[:-1] + "ies"
        else:
            verb = lower + "s"
    elif not re.fullmatch(r"[a-z]+", lower):
        return text
    return f"{name} {adverb}{verb} {tail}".strip()


def _iso_date(value: str | None) -> str:
    if not value:
        return ""
    m = re.search(r"\d{4}-\d{2}-\d{2}", value)
    return m.group(0) if m else ""


def conversation_statements(item: EvidenceItem, user_speakers: set[str], name: str, withheld: Withheld = keep_all) -> list[Statement]:
    """Informative sentences of a stored conversation, each with its line span; none that
    ``withheld`` keeps out of pages."""
    lines = item.text.splitlines()
    messages: list[tuple[int, int, str, str, str]] = []  # start, end, speaker, time, text
    for n, line in enumerate(lines, 1):
        if line.startswith("    ") and messages:
            start, _, speaker, time, text = messages[-1]
            messages[-1] = (start, n, speaker, time, text + " " + line.strip())
            continue
        m = LINE_RE.match(line)
        if m:
            messages.append((n, n, m.group("speaker").strip(), m.group("time") or "", m.group("text")))
    out: list[Statement] = []
    speakers = {s.lower() for s in user_speakers}
    previous: tuple[int, int, str, str, str] | None = None
    for start, end, speaker, time, text in messages:
        by_user = speaker.lower() in speakers or speaker.lower().split(" (")[0] in speakers
        answer = _short_answer(previous, speaker, text) if by_user else None
        previous = (start, end, speaker, time, text)
        found = len(out)
        for ordinal, raw in enumerate(SENTENCE_RE.findall(text)):
            sentence = raw.strip()
            words = sentence.split()
            instruction = by_user and bool(INSTRUCTION_RE.search(sentence))  # short and without "I" is fine then
            if len(words) < (3 if instruction else 4) or sentence.endswith("?") or SKIP_RE.match(sentence):
                continue
            if unsafe_statement(sentence):
                continue  # an injection or a request to disclose personal data: not a statement about anyone
            if withheld(sentence):
                continue  # personal data the privacy policy keeps out of pages
            if by_user:
                if not instruction and not FIRST_PERSON_RE.search(sentence) and not re.search(r"\d", sentence):
                    continue
                claim = third_person(sentence, name)
                if claim == sentence or FIRST_PERSON_LEFT_RE.search(claim[len(name) :]):
                    # not moved to the third person, or only half ("Jo thinks I'll wait"):
                    # quote the user instead, so that nobody reads "I" as someone else
                    claim = f'{name} said: "{sentence}"'
            else:
                if not (SECOND_PERSON_FACT_RE.search(sentence) and re.search(r"\d|[A-Z][a-z]+ [A-Z]", sentence)):
                    continue
                claim = f'{speaker} told {name}: "{sentence}"'
            date = _iso_date(time) or item.date
            out.append(Statement(item.id, start, end, speaker, sentence, _terminated(claim), date, by_user, ordinal))
        if (
            answer is not None and len(out) == found and not withheld(text) and not withheld(answer[1])
        ):  # nothing stood alone: keep the answer with its question
            q_start, question = answer
            claim = f'Asked "{question}", {name} answered: "{text.strip()}"'
            out.append(Statement(item.id, q_start, end, speaker, text.strip(), _terminated(claim), _iso_date(time) or item.date, True))
    return out


def _short_answer(previous: tuple[int, int, str, str, str] | None, speaker: str, text: str) -> tuple[int, str] | None:
    """A short reply with a fact in it (a number, a name) to the other speaker's question only
    makes sense with the question: (line of the question, the question)."""
    if previous is None or previous[2] == speaker:
        return None
    words = text.split()
    if (
        text.strip().endswith("?")
        or not 1 <= len(words) <= 10
        or not re.search(r"\d|\b[A-Z][a-z]+\b(?<!^\w)", text[1:])
        and not re.search(r"\d", text)
    ):
        return None
    questions = [q.strip() for q in SENTENCE_RE.findall(previous[4]) if q.strip().endswith("?")]
    if not questions:
        return None
    return previous[0], questions[-1]


def _terminated(text: str) -> str:
    return text if re.search(r"[.!?。！？\"]$", text) else text + "."


def attribute_of(statement: Statement) -> Attribute | None:
    if not statement.by_user:
        return None
    for key, pattern, single in ATTRIBUTE_PATTERNS:
        m = pattern.search(statement.quote)
        if m:
            value = m.group(1).strip().rstrip(".,")
            return Attribute(key if single else f"{key}:{value.lower()}", value, single)
    return None


def topic_of(statement: Statement) -> tuple[str, str]:
    for slug, title, pattern in TOPICS:
        if pattern.search(statement.quote):
            return slug, title
    return "notes", "Other facts"


def label_for(statement: Statement) -> str:
    base = f"{statement.evidence_id[3:11]}-{statement.start}"
    return f"{base}-{statement.ordinal}" if statement.ordinal else base


# ---- page model ------------------------------------------------------------------------


def citation_line(statement: Statement) -> str:
    return format_citation(label_for(statement), statement.evidence_id, statement.start, statement.end, statement.quote)
