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
from dataclasses import dataclass, replace

from agents.offline.attributes import Attribute, attributes_of_text
from agents.offline.profile import date_note, implied_subject, topic_of_text
from agents.protocols import EvidenceItem
from kb.injection import unsafe_statement
from kb.markdown import format_citation

# Whether a sentence holds personal data that must not be copied into pages (``kb.privacy``:
# the kinds the policy masks or marks ``no-copy``); such a sentence is never extracted.
Withheld = Callable[[str], bool]


def keep_all(_sentence: str) -> bool:
    return False


LINE_RE = re.compile(r"^(?:\[(?P<time>[^\]]+)\] )?(?P<speaker>[^:\n]{1,80}?)(?: \((?P<turn>[^)]+)\))?: (?P<text>.*)$")
# a sentence ends at . ! ? (not after a title such as "St." or "Dr.": "St. Helen's" is one name)
SENTENCE_RE = re.compile(r".+?(?:(?<!\bSt)(?<!\bDr)(?<!\bMr)(?<!\bMs)(?<!\bMrs)(?<!\bJr)(?<!\bMt)[.!?]+(?=\s|$)|[。！？]+|$)", re.S)
SKIP_RE = re.compile(r"^(?:hi|hello|hey|thanks|thank you|ok|okay|sure|yes|no|great|perfect|bye|goodbye|wow|cool)\b[\s!,.]*$", re.I)
FIRST_PERSON_RE = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|we|we're|our|us)\b", re.I)
# first person left in a claim after the subject was moved to the third person (case-sensitive:
# "US" is a country)
FIRST_PERSON_LEFT_RE = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself|we|we're|our|us)\b")
SECOND_PERSON_FACT_RE = re.compile(r"\b(?:you|your)\b", re.I)
# a user's standing instruction to their assistant ("always answer in Dutch", "call me Sam")
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
    line: int = 0  # the sentence's own line when the span starts earlier (its label stays its own)
    addressee: str = ""  # whom a "you" in it means
    note: str = ""  # relative dates anchored to the day it was said
    instruction: bool = False  # a user's standing instruction to their assistant
    implied: str = ""  # the sentence with the "I" it leaves out ("I just got back from Lisbon")


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
    "highly",
}
_BASE_VERBS = set(
    "prefer like love hate need want live work own drive use eat drink take travel plan speak enjoy know think "
    "feel hope try keep make play run read write study teach watch visit cook paint bake sing dance swim walk "
    "ride fly book pay save spend earn owe rent lease support volunteer attend care wish miss remember "
    "believe mean get see find usually agree understand appreciate admire collect create practice recommend".split()
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
    """Informative sentences of a stored conversation, each with its line span.

    "You" is resolved from who spoke and to whom: in a conversation of two, or right after the
    other person spoke, a user's "you" is that person (``Deborah told Jolene: "I'm so proud of
    you."``, citing Jolene's turn too, so that her name is on the cited lines), and the other
    person's "you" is the user. A user's sentence with "you" in it is never moved to the third
    person: "Deborah is so proud of you" would read as a claim about the reader. No sentence that
    ``withheld`` keeps out of pages is filed."""
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
    is_user = lambda who: who.lower() in speakers or who.lower().split(" (")[0] in speakers  # noqa: E731
    everyone = list(dict.fromkeys(m[2] for m in messages))
    previous: tuple[int, int, str, str, str] | None = None
    for start, end, speaker, time, text in messages:
        by_user = is_user(speaker)
        answer = _short_answer(previous, speaker, text) if by_user else None
        addressee, via = _addressee(speaker, previous, everyone)
        previous_text = previous[4] if previous is not None else ""
        previous = (start, end, speaker, time, text)
        found = len(out)
        date = _iso_date(time) or item.date
        # what was said just before a sentence: a subject-less one may be about whoever that was about
        before = ([q.strip() for q in SENTENCE_RE.findall(previous_text) if q.strip()] or [""])[-1]
        for ordinal, raw in enumerate(SENTENCE_RE.findall(text)):
            sentence = raw.strip()
            said_before, before = before, sentence or before
            implied = implied_subject(sentence, said_before) if by_user and sentence else ""
            words = sentence.split()
            # a standing instruction is given to an assistant: "Don't worry" said to a friend is not one
            instruction = by_user and not (addressee and _is_person(addressee)) and bool(INSTRUCTION_RE.search(sentence))
            if len(words) < (3 if instruction else 4) or sentence.endswith("?") or SKIP_RE.match(sentence):
                continue
            if unsafe_statement(sentence):
                continue  # an injection or a request to disclose personal data: not a statement about anyone
            if withheld(sentence):
                continue  # personal data the privacy policy keeps out of pages
            if by_user:
                if not instruction and not implied and not FIRST_PERSON_RE.search(sentence) and not re.search(r"\d", sentence):
                    continue
                claim, span_start, to = _user_claim(sentence, name, start, instruction, addressee, via, implied)
            else:
                if addressee is None or not is_user(addressee) or not _about_the_user(sentence):
                    continue  # not said to the user, or not about them
                claim, span_start, to = f'{speaker} told {name}: "{sentence}"', start, name
            out.append(
                Statement(
                    item.id,
                    span_start,
                    end,
                    speaker,
                    sentence,
                    terminated(claim),
                    date,
                    by_user,
                    ordinal,
                    line=start if span_start != start else 0,
                    addressee=to,
                    note=date_note(sentence, date),
                    instruction=instruction,
                    implied=implied,
                )
            )
        if answer is not None and len(out) == found and not withheld(text) and not withheld(answer[1]):
            # nothing stood alone: keep the answer with its question
            q_start, question = answer
            claim = f'Asked "{question}", {name} answered: "{text.strip()}"'
            out.append(Statement(item.id, q_start, end, speaker, text.strip(), terminated(claim), date, True, note=date_note(text, date)))
    return out


def _user_claim(
    sentence: str, name: str, start: int, instruction: bool, addressee: str | None, via: int | None, implied: str = ""
) -> tuple[str, int, str]:
    """The claim of a user's sentence, the line its citation starts on, and whom it addresses
    (a subject-less sentence is moved to the third person from its ``implied`` form)."""
    if instruction or not addresses_someone(sentence):
        claim = third_person(implied or sentence, name)
        if claim == (implied or sentence) or FIRST_PERSON_LEFT_RE.search(claim[len(name) :]):
            # not moved to the third person, or only half ("Jo thinks I'll wait"):
            # quote the user instead, so that nobody reads "I" as someone else
            claim = f'{name} said: "{sentence}"'
        return claim, start, ""
    # "you" is the other person: quote the user, naming whom they spoke to (a person's name
    # is on the cited lines only with their turn before)
    to = addressee if addressee and (via is not None or not _is_person(addressee)) else ""
    span_start = via if to and _is_person(to) and via is not None else start
    who = f"the {to}" if to and not _is_person(to) else to
    return (f'{name} told {who}: "{sentence}"' if who else f'{name} said: "{sentence}"'), span_start, to


def _about_the_user(sentence: str) -> bool:
    """Another speaker's sentence to the user that says something of theirs: "you" or "your"
    with a number, a name, or one of their things ("your cats")."""
    if not SECOND_PERSON_FACT_RE.search(sentence):
        return False
    return bool(re.search(r"\d|[A-Z][a-z]+ [A-Z]", sentence) or YOUR_THING_RE.search(sentence))


# "you" that means the person spoken to (not "thank you", "you know", "see you")
YOU_RE = re.compile(r"\b(?:you|your|yours|yourself|you're|you've|you'd|you'll|ya|y'all)\b", re.I)
_YOU_IDIOM_RE = re.compile(
    r"\b(?:thank you|thanks to you|you know|see you|talk to you|catch you|love you|bless you|mind you|if you ask me|you see|you bet|"
    r"you never know|believe you me|you guys)\b",
    re.I,
)
# the other person's sentence about something of the user's ("your cats", "your new job")
YOUR_THING_RE = re.compile(
    r"\byour (?:new |late |little |lovely |sweet )?(?:job|work|career|business|studio|class(?:es)?|students|husband|wife|partner|boyfriend|girlfriend|"
    r"kids|children|son|daughter|mom|mother|dad|father|parents|brother|sister|family|grandma|grandmother|grandpa|grandfather|"
    r"cats?|dogs?|pupp(?:y|ies)|pets?|home|house|apartment|car|move|trip|wedding|birthday|health|allergy|hobby|painting|garden)\b",
    re.I,
)
_NOT_PEOPLE = {"user", "human", "assistant", "ai", "bot", "agent", "system", "model", "tool"}


def addresses_someone(sentence: str) -> bool:
    """The sentence speaks to someone ("I'm so proud of you"): "you" other than in idioms."""
    return bool(YOU_RE.search(_YOU_IDIOM_RE.sub(" ", sentence)))


def _is_person(who: str) -> bool:
    return who.lower().split(" (")[0] not in _NOT_PEOPLE


def _addressee(speaker: str, previous: tuple[int, int, str, str, str] | None, everyone: list[str]) -> tuple[str | None, int | None]:
    """Whom ``speaker`` talks to, and the line of that person's turn just before (or None): the
    other one of a conversation of two, else whoever spoke just before."""
    via = previous[0] if previous is not None and previous[2] != speaker else None
    others = [s for s in everyone if s != speaker]
    if len(others) == 1:
        return others[0], via if via is not None and previous is not None and previous[2] == others[0] else None
    if previous is not None and previous[2] != speaker:
        return previous[2], via
    return None, None


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


def terminated(text: str) -> str:
    """The sentence as a claim: ended with a full stop when it has no end mark of its own."""
    return text if re.search(r"[.!?。！？\"]$", text) else text + "."


def attributes_of(statement: Statement) -> list[Attribute]:
    """The profile attributes a user's own sentence states (none from anyone else's: the rules
    read "I" and "my", which are the speaker)."""
    if not statement.by_user:
        return []
    if statement.implied:  # read with its "I"; a value is still the verbatim part of the sentence
        quote = statement.quote
        at = [(a, quote.lower().find(a.value.lower())) for a in attributes_of_text(statement.implied)]
        return [replace(a, value=quote[n : n + len(a.value)]) for a, n in at if n >= 0]
    return attributes_of_text(statement.quote)


def topic_of(statement: Statement) -> tuple[str, str]:
    """The topic page of a statement: what the sentence is about (``agents.offline.profile``)."""
    return topic_of_text(statement.quote, attributes_of(statement))


def label_for(statement: Statement) -> str:
    base = f"{statement.evidence_id[3:11]}-{statement.line or statement.start}"
    return f"{base}-{statement.ordinal}" if statement.ordinal else base


# ---- page model ------------------------------------------------------------------------


def citation_line(statement: Statement) -> str:
    return format_citation(label_for(statement), statement.evidence_id, statement.start, statement.end, statement.quote)
