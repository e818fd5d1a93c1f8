"""The support check: the meaning markers of what a claim cites must be kept, and the claim may
add none the evidence does not state.

``ci.rules.grounding`` reads numbers, dates, names, negations and quantifiers; this module reads
what changes a claim's meaning while every number and name stays: modality (should -> must,
may -> will, "plans to" -> did), qualifiers and scope phrases ("by default", "in the EU",
"for Python 3.8+", "one of"), causal connectives ("because", "due to"), superlatives and roles
(one of -> the best; a name -> "X's doctor"), the sides of a condition or comparison
("If A is not set, B is used" -> "If B is not set, A is used"), and relative dates read against
the day they were said ("last Friday", said on 2023-06-21, is 2023-06-16, not 2023-06-21).

Everything is deterministic and lenient on form: a marker is matched by its group (must = has
to = required), words by their stems. Each problem is a short message; the rule id is
``grounding.support`` (and ``grounding.date`` for relative dates).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

from ci.rules import factcheck as fc

# ---- modality ---------------------------------------------------------------------------

# group -> the words or phrases that state it; a claim states a group when one of them is there
MODALITY: dict[str, tuple[str, ...]] = {
    "obligation": (
        "must",
        "have to",
        "has to",
        "had to",
        "required",
        "requires",
        "require",
        "mandatory",
        "shall",
        "need to",
        "needs to",
        "必须",
        "须",
    ),  # fmt: skip
    "advice": ("should", "ought to", "recommended", "recommend", "recommends", "advised", "应该", "应当", "建议"),
    "possibility": (
        "may",
        "might",
        "could",
        "can",
        "possibly",
        "perhaps",
        "maybe",
        "optional",
        "optionally",
        "可以",
        "可能",
        "能",
    ),  # fmt: skip
    "intention": (
        "plans to",
        "plan to",
        "planning to",
        "planned to",
        "intends to",
        "intend to",
        "going to",
        "hopes to",
        "hope to",
        "hoping to",
        "wants to",
        "want to",
        "wanted to",
        "considering",
        "thinking about",
        "thinking of",
        "would like to",
        "计划",
        "打算",
        "想",
    ),  # fmt: skip
    "habit-past": ("used to", "formerly", "previously", "no longer", "以前", "曾经"),
    "future": ("will", "'ll", "shall", "将", "会"),
}
# a group the quote states that the claim must keep (dropping "will" is a tense change a faithful
# rewording may make; dropping "must", "may" or "plans to" is not)
_KEPT = ("obligation", "advice", "possibility", "intention", "habit-past")

QUALIFIERS: tuple[str, ...] = (
    "by default", "one of", "some of", "in some cases", "in most cases", "at least", "at most", "up to", "no more than",
    "usually", "typically", "generally", "often", "sometimes", "mostly", "mainly", "partly", "partially", "currently",
    "nearly", "almost", "only if", "only when", "unless", "except",
    "on weekdays", "on weekends", "experimental", "deprecated", "beta", "if needed", "if necessary", "when possible",
    "默认", "通常", "一般", "大约", "约", "左右", "之一", "部分", "有时", "至少", "最多",
)  # fmt: skip
# "in the EU", "for Python 3.8+", "on Linux", "in Python 2": a scope named after a preposition
_SCOPE_RE = re.compile(r"\b(?:in|for|on|within|under|outside|with|from)\s+(?:the\s+)?(?:[A-Z][\w.+-]*|[A-Z]{2,})(?:\s+\d[\w.+-]*)?")
CAUSAL: tuple[str, ...] = ("because", "due to", "owing to", "thanks to", "as a result", "therefore", "hence", "caused", "causes", "leads to", "led to", "so that", "which is why", "that is why", "因为", "由于", "所以", "因此", "导致")  # fmt: skip
_CAUSAL_SO_RE = re.compile(r",\s+so\b")
SUPERLATIVES: tuple[str, ...] = ("best", "worst", "most", "least", "largest", "biggest", "greatest", "smallest", "fastest", "slowest", "highest", "lowest", "first", "favorite", "favourite", "top", "main", "primary", "leading", "最好", "最大", "最", "第一")  # fmt: skip
ROLES: tuple[str, ...] = ("doctor", "dentist", "teacher", "boss", "manager", "ceo", "founder", "owner", "author", "creator", "inventor", "maintainer", "lawyer", "therapist", "coach", "mentor", "wife", "husband", "partner", "girlfriend", "boyfriend", "mother", "father", "son", "daughter", "brother", "sister", "cousin", "colleague", "neighbor", "neighbour", "roommate", "landlord", "employer", "employee")  # fmt: skip


def _has(phrase: str, lower: str) -> bool:
    if re.match(r"[\u4e00-\u9fff]", phrase):
        return phrase in lower
    return bool(re.search(rf"(?<![\w'])({re.escape(phrase)})(?![\w'])", lower))


def modal_groups(text: str) -> set[str]:
    text = fc.fold(text)
    for d in fc.dates(text):  # "in May" is a month
        text = text[: d.start] + " " * (d.end - d.start) + text[d.end :]
    lower = text.lower()
    return {group for group, words in MODALITY.items() if any(_has(w, lower) for w in words)}


def _content(text: str, shortest: int = 3) -> set[str]:
    return {fc.stem(w) for w in re.findall(rf"[^\W\d_]{{{shortest},}}", fc.fold(text).lower())} - _FILLER


_FILLER = {
    fc.stem(w)
    for w in "the and that this with from for are was were has have had not you your its their they them there which what when".split()
}


def _covers(claim_words: set[str], sentence: str) -> bool:
    """Whether a claim restates ``sentence`` (most of its content words are the claim's)."""
    words = _content(sentence)
    return bool(words) and len(words & claim_words) * 2 >= len(words)


def problems(claim: str, quotes: list[str], evidence: str, context: str = "") -> list[str]:
    """What the claim changes in the markers of its cited quotes (``evidence`` is everything the
    claim cites: quotes and the cited sentences around them; ``context`` the page's title, whose
    scope a claim need not repeat)."""
    text = fc.fold(fc.unquoted(claim) if "said" in claim.lower() else claim)
    full = fc.fold(claim)
    lower = full.lower()
    ev = fc.fold(evidence).lower()
    out: list[str] = []
    claim_words = _content(full)
    ev_groups = modal_groups(evidence)
    claim_groups = modal_groups(full)
    for group in sorted(claim_groups - ev_groups):
        if group == "future" and not (ev_groups & {"possibility", "intention", "advice"}):
            continue  # "it retries" -> "it will retry": tense, not modality
        out.append(f"the claim states {group} ({_first(MODALITY[group], lower)!r}) that the cited evidence does not")
    sentences = [s for q in quotes for s in re.split(r"(?<=[.!?。！？;；])\s*", fc.fold(q)) if s.strip()]
    covered = [s for s in sentences if _covers(claim_words, s)]
    for s in covered:
        out += _kept(s, full, claim_groups, fc.fold(context))
    out += _added(text, lower, ev, fc.words(evidence))
    out += _sides(full, [fc.fold(s) for s in covered])
    return list(dict.fromkeys(out))


def _added(text: str, lower: str, ev: str, ev_words: frozenset[str]) -> list[str]:
    """A cause, superlative or role the claim adds to what it cites."""
    out = []
    if (any(_has(c, lower) for c in CAUSAL) or _CAUSAL_SO_RE.search(text)) and not (
        any(_has(c, ev) for c in CAUSAL) or _CAUSAL_SO_RE.search(ev) or re.search(r"\bsince\b", ev)
    ):
        out.append("the claim gives a cause that the cited evidence does not state")
    out += [f"{w!r} is in the claim but not in the cited evidence" for w in SUPERLATIVES if _has(w, lower) and not _has(w, ev)]
    out += [f"the role {r!r} is in the claim but not in the cited evidence" for r in ROLES if _has(r, lower) and fc.stem(r) not in ev_words]
    return out


def _kept(s: str, full: str, claim_groups: set[str], context: str = "") -> list[str]:
    """What a quote sentence the claim restates states that the claim must keep."""
    lower, here = full.lower(), s.lower()
    out = [
        f"the quote states {g} ({_first(MODALITY[g], here)!r}) but the claim does not"
        for g in sorted(modal_groups(s) & set(_KEPT) - claim_groups)
    ]
    out += [f"the quote's qualifier {q!r} is dropped" for q in QUALIFIERS if _has(q, here) and not _has(q, lower)]
    for m in _SCOPE_RE.finditer(s):
        scope = m.group(0).rstrip(".+")
        if fc.dates(scope) or fc.dates(scope, strict_case=False):
            continue  # "on Monday", "in March": the date rule's
        if not _content(scope, 2) - {"in", "for", "on", "with", "from"} <= _content(f"{full} {context}", 2):
            out.append(f"the quote's scope {scope!r} is dropped")
    return out


def _first(words: Iterable[str], lower: str) -> str:
    return next((w for w in words if _has(w, lower)), "")


# ---- the sides of a condition or comparison -------------------------------------------------

_SIDE_MARKERS = (r"\bif\b", r"\bunless\b", r"\bwhen\b", r"\bthan\b", r"\binstead of\b", r"\brather than\b", r"\bfrom\b(?=[^.]*\bto\b)")


def _split_sides(sentence: str, marker: str) -> tuple[set[str], set[str]] | None:
    m = re.search(marker, sentence, re.IGNORECASE)
    if not m:
        return None
    before, after = sentence[: m.start()], sentence[m.end() :]
    if marker in (r"\bif\b", r"\bunless\b", r"\bwhen\b"):
        cut = after.find(",")
        cond, main = (after[:cut], before + " " + after[cut + 1 :]) if cut >= 0 else (after, before)
        return _content(cond, 1), _content(main, 1)
    if marker.startswith(r"\bfrom"):
        to = re.search(r"\bto\b", after)
        return (_content(after[: to.start()], 1), _content(after[to.end() :], 1)) if to else None
    return _content(before, 1), _content(after, 1)


def _sides(claim: str, sentences: list[str]) -> list[str]:
    """A word on one side of a condition or comparison in the quote is on the other in the claim."""
    out = []
    for s in sentences:
        for marker in _SIDE_MARKERS:
            quote_sides = _split_sides(s, marker)
            claim_sides = _split_sides(claim, marker)
            if not quote_sides or not claim_sides:
                continue
            qa, qb = quote_sides[0] - quote_sides[1], quote_sides[1] - quote_sides[0]
            ca, cb = claim_sides
            swapped = (ca & qb) - qa
            if swapped and (cb & qa) - qb:
                word = re.sub(r"\\b|\(\?=.*", "", marker)
                out.append(f"the two sides of {word!r} are swapped against the quote")
    return out


# ---- relative dates read against the day they were said -------------------------------------

_WEEKDAY_IDX = {d: i for i, d in enumerate(fc.WEEKDAYS)}
_REL_DAY_RE = re.compile(
    r"\b(?:(?P<dir>last|next|this past|this coming|this) (?P<wd>" + "|".join(fc.WEEKDAYS) + r")"
    r"|(?P<day>yesterday|today|tonight|tomorrow)"
    r"|(?P<n>\d+|a|one|two|three|four|five|six|seven|eight|nine|ten) (?P<unit>days?|weeks?) ago)\b",
    re.IGNORECASE,
)
_SMALL = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_STAMP_RE = re.compile(r"^\[(\d{4}-\d{2}-\d{2})")


def resolve(text: str, said: dt.date) -> list[tuple[str, set[dt.date]]]:
    """Each relative day of ``text`` ("last Friday", "yesterday", "3 days ago") with the days it
    may mean, counted from ``said`` (two for "last Friday" said on a Saturday: either is read)."""
    out = []
    for m in _REL_DAY_RE.finditer(fc.fold(text)):
        if m.group("day"):
            shift = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}[m.group("day").lower()]
            out.append((m.group(0), {said + dt.timedelta(days=shift)}))
        elif m.group("wd"):
            target = _WEEKDAY_IDX[m.group("wd").lower()]
            direction = m.group("dir").lower()
            back = (said.weekday() - target) % 7 or 7
            ahead = (target - said.weekday()) % 7 or 7
            if direction in ("last", "this past"):
                days = {said - dt.timedelta(days=back)} | ({said - dt.timedelta(days=back + 7)} if back <= 1 else set())
            elif direction == "this":
                days = {said - dt.timedelta(days=back), said + dt.timedelta(days=ahead)}
            else:
                days = {said + dt.timedelta(days=ahead)} | ({said + dt.timedelta(days=ahead + 7)} if ahead <= 1 else set())
            out.append((m.group(0), days))
        else:
            n = int(m.group("n")) if m.group("n").isdigit() else _SMALL[m.group("n").lower()]
            step = 7 if m.group("unit").lower().startswith("week") else 1
            out.append((m.group(0), {said - dt.timedelta(days=n * step)}))
    return out


def said_on(first_line: str, item_date: str) -> dt.date | None:
    """The day a cited line was said: its timestamp, else the evidence item's date."""
    m = _STAMP_RE.match(first_line)
    for raw in (m.group(1) if m else "", item_date[:10]):
        try:
            return dt.date.fromisoformat(raw)
        except ValueError:
            continue
    return None
