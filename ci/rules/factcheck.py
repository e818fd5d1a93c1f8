"""What a careful fact-checker reads out of a sentence, deterministically: quantities with their
units, dates (weekdays and month names included), proper names, quantifiers and negations,
attributed speakers, and instruction-like text.

Everything here is a pure function of text; ``ci.rules.grounding`` compares a claim's reading
with its evidence's. Readings are lenient on form ("two" = "2" = "2.0", "1,000" = "1000",
"March 1, 2025" = "2025-03-01", "never" = "non-") and strict on content (another value, unit,
day, month, weekday or name).
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from kb.citations import ANY_REF_RE

# ---- text -------------------------------------------------------------------------------

_QUOTED_RE = re.compile(r"\"[^\"]*\"|“[^”]*”|「[^」]*」|『[^』]*』|\"[^\"]*$|“[^”]*$")
# An editorial status note after a claim ("_(no longer current since 2025-06-18)_") is about
# the page's validity fields, not about what the evidence says.
STATUS_NOTE_RE = re.compile(r"\s_\([^)]*\)_")


def fold(text: str) -> str:
    """Width and compatibility forms folded, footnote references and emphasis marks dropped."""
    text = unicodedata.normalize("NFKC", ANY_REF_RE.sub(" ", text))
    return text.replace("’", "'").replace("‘", "'").replace("*", " ").replace("_(", " (").replace(")_", ") ")


def unquoted(text: str) -> str:
    """The text with quoted passages blanked: what the writer says, not whom they quote."""
    return _QUOTED_RE.sub(lambda m: " " * len(m.group(0)), text)


_WORD_RE = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")


@lru_cache(maxsize=8192)
def words(text: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in _WORD_RE.findall(fold(text).lower()))


def word_parts(text: str) -> frozenset[str]:
    """``words`` with hyphenated words also split into their stemmed parts ("well-being")."""
    out = set(words(text))
    for w in _WORD_RE.findall(fold(text).lower()):
        if "-" in w:
            out.update(_stem(part) for part in w.split("-"))
    return frozenset(out)


def is_number_word(word: str) -> bool:
    return word in _SMALL or word in _SCALES


def stem(word: str) -> str:
    return _stem(word)


def _stem(word: str) -> str:
    word = word.removesuffix("'s").removesuffix("'")
    for suffix in ("ies", "es", "s", "ed", "ing", "ly"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


# ---- numbers and units -------------------------------------------------------------------

_SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "dozen": 12, "twice": 2, "once": 1,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "k": 1000, "m": 10**6, "bn": 10**9}
_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_CN_BIG = {"万": 10**4, "亿": 10**8}
_CN_NUM = "零〇一二两三四五六七八九十百千万亿"
_CN_MEASURE = "个次天年月周日号岁元块位本件条张只台辆人点分秒倍层间份家所门"

UNIT_WORDS = {
    "second": "second", "sec": "second", "secs": "second", "seconds": "second", "秒": "second", "秒钟": "second",
    "minute": "minute", "minutes": "minute", "min": "minute", "mins": "minute", "分钟": "minute",
    "hour": "hour", "hours": "hour", "hr": "hour", "hrs": "hour", "h": "hour", "小时": "hour", "钟头": "hour",
    "day": "day", "days": "day", "天": "day", "日": "day",
    "night": "night", "nights": "night", "晚": "night",
    "week": "week", "weeks": "week", "周": "week", "星期": "week", "礼拜": "week",
    "month": "month", "months": "month", "个月": "month", "月": "month",
    "year": "year", "years": "year", "yr": "year", "yrs": "year", "年": "year", "岁": "year",
    "dollar": "usd", "dollars": "usd", "usd": "usd", "$": "usd", "bucks": "usd",
    "euro": "eur", "euros": "eur", "eur": "eur", "€": "eur",
    "pound": "gbp", "pounds": "gbp", "gbp": "gbp", "£": "gbp",
    "yen": "jpy", "jpy": "jpy", "¥": "cny", "yuan": "cny", "rmb": "cny", "cny": "cny", "元": "cny", "块": "cny",
    "percent": "percent", "per cent": "percent", "pct": "percent", "%": "percent", "百分之": "percent",
    "km": "km", "kilometer": "km", "kilometers": "km", "kilometre": "km", "kilometres": "km", "公里": "km",
    "mile": "mile", "miles": "mile", "mi": "mile",
    "meter": "m", "meters": "m", "metre": "m", "metres": "m", "米": "m",
    "kg": "kg", "kilogram": "kg", "kilograms": "kg", "kilo": "kg", "kilos": "kg", "公斤": "kg", "千克": "kg",
    "lb": "lb", "lbs": "lb", "gram": "g", "grams": "g", "g": "g", "克": "g",
    "liter": "l", "liters": "l", "litre": "l", "litres": "l", "l": "l", "ml": "ml", "gallon": "gallon", "gallons": "gallon",
    "gb": "gb", "mb": "mb", "tb": "tb", "cent": "cent", "cents": "cent",
    "mph": "mile", "kph": "km",
}  # fmt: skip
_RATE_ADJ = {
    "hourly": "hour",
    "daily": "day",
    "nightly": "night",
    "weekly": "week",
    "monthly": "month",
    "yearly": "year",
    "annually": "year",
    "annual": "year",
}
_RATE_CN = {"每天": "day", "每日": "day", "每晚": "night", "每周": "week", "每星期": "week", "每月": "month", "每个月": "month", "每年": "year", "每小时": "hour", "每分钟": "minute"}  # fmt: skip

_NUM_TOKEN_RE = re.compile(
    r"(?P<cnpct>百分之(?P<cnpv>[" + _CN_NUM + r"\d.]+))"
    r"|(?P<digits>(?<![.])(?<![^\W\u3400-\u9fff])\d{1,3}(?:[,'](?=\d{3}(?!\d))\d{3})+(?:\.\d+)?|(?<![.])(?<![^\W\u3400-\u9fff])\d+(?:\.\d+)?)"
    r"(?:\s?(?P<scale>hundred|thousand|million|billion|k|m|bn)\b)?"
    r"|(?P<cn>[" + _CN_NUM + r"]+)"
    r"|(?P<word>\b(?:(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen"
    r"|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|dozen|twice|once|hundred|thousand"
    r"|million|billion)(?:[\s-]+(?:and[\s-]+)?(?=(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen"
    r"|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred"
    r"|thousand|million|billion)\b))?)+\b)",
    re.IGNORECASE,
)
_AFTER_RE = re.compile(r"\s*(?:-\s*\d+(?:\.\d+)?\s*)?(%|per cent|percent|[^\W\d_]+|[$€£¥])", re.IGNORECASE)
_CURRENCY_BEFORE_RE = re.compile(r"(?:([$€£¥])|\b(usd|eur|gbp|jpy|rmb|cny)\s?)$", re.IGNORECASE)
_TIME_UNITS = ("second", "minute", "hour", "day", "night", "week", "month", "year")
_RATE_RE = re.compile(r"\b(?:per|a|an|each|every)\s+([a-z]+)|/\s?([a-z]+)\b", re.IGNORECASE)


def _fmt(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def _cn_value(text: str) -> float | None:
    if all(c in "0123456789." for c in text):
        try:
            return float(text)
        except ValueError:
            return None
    total, section, digit = 0, 0, None
    if all(c in _CN_DIGITS for c in text) and len(text) > 1:  # 二〇二五: digit by digit
        return float("".join(str(_CN_DIGITS[c]) for c in text))
    for c in text:
        if c in _CN_DIGITS:
            digit = _CN_DIGITS[c]
        elif c in _CN_UNITS:
            section += (digit if digit is not None else 1) * _CN_UNITS[c]
            digit = None
        elif c in _CN_BIG:
            total += (section + (digit or 0)) * _CN_BIG[c]
            section, digit = 0, None
        else:
            return None
    return float(total + section + (digit or 0))


def _word_value(text: str) -> float:
    total, current = 0, 0
    for tok in re.split(r"[\s-]+", text.lower()):
        if tok == "and" or not tok:
            continue
        if tok in _SMALL:
            current += _SMALL[tok]
        elif tok == "hundred":
            current = max(current, 1) * 100
        elif tok in _SCALES:
            total += max(current, 1) * _SCALES[tok]
            current = 0
    return float(total + current)


@dataclass(frozen=True)
class Quantity:
    value: str
    units: frozenset[str]
    rate: str  # the unit of a "per X" after it, or ""
    text: str
    start: int


@lru_cache(maxsize=8192)
def quantities(text: str, claim_side: bool = False) -> tuple[Quantity, ...]:
    """Numbers of ``text`` (digits, words, Chinese numerals, percentages) with their units.

    ``claim_side``: be strict about what counts as a number ("one" only with a unit after it,
    a lone Chinese numeral only with a measure word), as these words also have other senses.
    """
    text = fold(text)
    out = []
    for m in _NUM_TOKEN_RE.finditer(text):
        value = _value(m, text, claim_side)
        if value is None:
            continue
        units = {"percent"} if m.group("cnpct") else set()
        before = _CURRENCY_BEFORE_RE.search(text[max(0, m.start() - 5) : m.start()])
        if before:
            units.add(UNIT_WORDS[(before.group(1) or before.group(2)).lower()])
        after, rate = _units_after(text[m.end() : m.end() + 40])
        out.append(Quantity(_fmt(value), frozenset(units | after), rate, m.group(0), m.start()))
    return tuple(out)


def _value(m: re.Match[str], text: str, claim_side: bool) -> float | None:
    if m.group("cnpct"):
        return _cn_value(m.group("cnpv"))
    if m.group("digits"):
        raw = m.group("digits").replace(",", "").replace("'", "")
        return float(raw) * _SCALES.get((m.group("scale") or "").lower(), 1)
    if m.group("cn"):
        cn = m.group("cn")
        after = text[m.end() : m.end() + 1]
        if claim_side and len(cn) == 1 and not (after and after in _CN_MEASURE):
            return None
        return _cn_value(cn)
    word = m.group("word")
    if claim_side and word.lower() in ("one", "once"):
        nxt = _AFTER_RE.match(text, m.end())
        if not (nxt and nxt.group(1).lower() in UNIT_WORDS):
            return None
    return _word_value(word)


def _units_after(tail: str) -> tuple[set[str], str]:
    """The unit right after a number, and the time unit of a rate ("per hour") just after it."""
    units: set[str] = set()
    after = _AFTER_RE.match(tail)
    if not after:
        return units, ""
    rest = tail
    unit = after.group(1).lower()
    if unit in UNIT_WORDS:
        units.add(UNIT_WORDS[unit])
        rest = tail[after.end() :]
    units.update(UNIT_WORDS[cn] for cn in ("个月", "小时", "分钟", "公里", "公斤", "千克", "星期", "礼拜") if tail.startswith(cn))
    if tail[:1] in UNIT_WORDS and not re.match(r"[a-z]", tail[:1], re.I):
        units.add(UNIT_WORDS[tail[:1]])
    for r in _RATE_RE.finditer(" ".join(rest.split()[:4])):
        per = UNIT_WORDS.get((r.group(1) or r.group(2) or "").lower(), "")
        if per in _TIME_UNITS:
            return units, per
    return units, ""


@lru_cache(maxsize=8192)
def rates(text: str) -> frozenset[str]:
    """Every time unit that ``text`` states a rate per ("per hour", "a day", "weekly", 每天)."""
    text = fold(text)
    found = set()
    for m in _RATE_RE.finditer(text):
        unit = UNIT_WORDS.get((m.group(1) or m.group(2) or "").lower(), "")
        if unit in _TIME_UNITS:
            found.add(unit)
    lower = text.lower()
    found.update(u for adj, u in _RATE_ADJ.items() if re.search(rf"\b{adj}\b", lower))
    found.update(u for cn, u in _RATE_CN.items() if cn in text)
    if re.search(r"\b(?:mph|kph|km/h)\b", lower):
        found.add("hour")
    return frozenset(found)


COUNT_NOUNS = {"more", "statement", "statements", "entry", "entries", "item", "items", "claim", "claims", "fact", "facts", "page", "pages", "session", "sessions", "conversation", "conversations"}  # fmt: skip


def is_count(text: str, q: Quantity) -> bool:
    """ "(3 entries)", "and 4 more below": a count of the page's own items, not a fact."""
    after = re.match(r"\s*([a-z]+)", text[q.start + len(q.text) :].lower())
    bracketed = text[: q.start].rstrip().endswith("(") and text[q.start + len(q.text) :].lstrip().startswith(")")
    return bracketed or bool(after and after.group(1) in COUNT_NOUNS)


# ---- dates -------------------------------------------------------------------------------

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"]
_MONTH_ABBR = {m[:3]: i + 1 for i, m in enumerate(MONTHS)} | {"sept": 9}
_MONTH_ANY = {m: i + 1 for i, m in enumerate(MONTHS)} | _MONTH_ABBR
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_WD_CN = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}

_MON = r"(?P<mon>January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_DATE_RES = [
    re.compile(r"(?<!\d)(?P<year>\d{4})[-/.](?P<mnum>\d{1,2})[-/.](?P<day>\d{1,2})(?!\d)"),
    re.compile(r"(?P<year>\d{4})\s*年\s*(?P<mnum>\d{1,2})\s*月(?:\s*(?P<day>\d{1,2})\s*[日号])?"),
    re.compile(r"(?<!\d)(?P<mnum>\d{1,2})\s*月\s*(?P<day>\d{1,2})\s*[日号]"),
    re.compile(rf"\b{_MON}\s+{_DAY}\b(?:,?\s+{_YEAR}\b)?"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MON}\b(?:,?\s+{_YEAR}\b)?"),
    re.compile(rf"\b{_MON}\s*,?\s+{_YEAR}\b"),
    re.compile(r"(?<!\d)(?P<year>\d{4})-(?P<mnum>\d{2})(?![-\d])"),
    re.compile(r"\b(?P<mon>January|February|March|April|June|July|August|September|October|November|December)\b"),
    re.compile(r"(?<![a-z])(?P<mon>May)\b(?=\s+(?:\d|of\b|this\b|next\b|last\b|and\b|or\b|to\b|through\b|until\b|in\b)|\s*[,.;!?)]|\s*$)"),
]
_MAY_HAVE_DATE_RE = re.compile(r"\d|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|day|星期|礼拜|周|月|年", re.IGNORECASE)
_DATE_RES_ANY_CASE = [re.compile(p.pattern, re.IGNORECASE) for p in _DATE_RES]
_WEEKDAY_RE = re.compile(
    r"\b(?P<wd>Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?\b|(?:星期|礼拜|周)(?P<wdcn>[一二三四五六日天])", re.IGNORECASE
)


@dataclass(frozen=True)
class DateMention:
    year: int | None
    month: int | None
    day: int | None
    weekday: int | None  # 0 = Monday
    text: str
    start: int
    end: int

    def weekday_of(self, year: int | None = None) -> int | None:
        y = self.year or year
        if y and self.month and self.day:
            try:
                return dt.date(y, self.month, self.day).weekday()
            except ValueError:
                return None
        return None


@lru_cache(maxsize=8192)
def dates(text: str, strict_case: bool = True) -> tuple[DateMention, ...]:
    """Dates of ``text``; a weekday next to a date (``Saturday, March 1``) joins it."""
    if not _MAY_HAVE_DATE_RE.search(text):
        return ()
    text = fold(text)
    found: list[DateMention] = []
    taken: list[tuple[int, int]] = []
    for pattern in _DATE_RES if strict_case else _DATE_RES_ANY_CASE:
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            g = m.groupdict()
            month = int(g["mnum"]) if g.get("mnum") else _MONTH_ANY.get((g.get("mon") or "").lower().rstrip("."))
            day = int(g["day"]) if g.get("day") else None
            if not month or month > 12 or (day is not None and not 1 <= day <= 31):
                continue
            year = int(g["year"]) if g.get("year") else None
            found.append(DateMention(year, month, day, None, m.group(0), m.start(), m.end()))
            taken.append((m.start(), m.end()))
    for m in _WEEKDAY_RE.finditer(text):
        wd = WEEKDAYS.index(m.group("wd").lower()) if m.group("wd") else _WD_CN[m.group("wdcn")]
        near = [d for d in found if d.weekday is None and 0 <= d.start - m.end() <= 3]
        if near:
            d = near[0]
            found[found.index(d)] = DateMention(d.year, d.month, d.day, wd, text[m.start() : d.end], m.start(), d.end)
        else:
            found.append(DateMention(None, None, None, wd, m.group(0), m.start(), m.end()))
    return tuple(sorted(found, key=lambda d: d.start))


def date_supported(claim: DateMention, evidence: Iterable[DateMention], years: set[int]) -> bool:
    """Whether a date of a claim is one the evidence states (form aside)."""
    for e in evidence:
        if claim.month is not None and e.month != claim.month:
            continue
        if claim.day is not None and e.day != claim.day:
            continue
        if claim.month is None and claim.day is None and claim.year is None:
            # a weekday alone: stated, or the weekday of a full date of the evidence
            if e.weekday == claim.weekday or (e.weekday is None and e.weekday_of(_only(years)) == claim.weekday):
                return True
            continue
        if claim.year is not None and e.year != claim.year and not (e.year is None and claim.year in years):
            continue
        if claim.weekday is not None:
            stated = e.weekday if e.weekday is not None else e.weekday_of(e.year or claim.year)
            if stated is None:
                stated = claim.weekday_of()
            if stated != claim.weekday:
                continue
        return True
    return False


def _only(years: set[int]) -> int | None:
    return next(iter(years)) if len(years) == 1 else None


_REL_DIRECTION = {"last": "past", "past": "past", "previous": "past", "next": "next", "coming": "next", "this": "this"}
_REL_UNITS = "week|weekend|month|year|summer|winter|spring|fall|autumn|semester|season|night|morning|afternoon|evening|" + "|".join(
    WEEKDAYS
)
_RELATIVE_RE = re.compile(
    rf"\b(?:(?P<dir>last|past|previous|next|coming|this)\s+(?P<unit>{_REL_UNITS})s?|(?P<day>yesterday|tomorrow|tonight|today)"
    rf"|(?P<agounit>day|week|month|year)s?\s+ago)\b",
    re.IGNORECASE,
)


def relative_dates(text: str) -> list[tuple[str, str, str]]:
    """Relative time references ("last week", "next month", "yesterday", "two weeks ago") as
    (text, direction, unit): another unit or direction is another time."""
    out = []
    for m in _RELATIVE_RE.finditer(fold(text)):
        if m.group("dir"):
            out.append((m.group(0), _REL_DIRECTION[m.group("dir").lower()], m.group("unit").lower()))
        elif m.group("day"):
            out.append((m.group(0), m.group("day").lower(), "day"))
        else:
            out.append((m.group(0), "ago", m.group("agounit").lower()))
    return out


def relative_date_supported(claim: tuple[str, str, str], evidence: Iterable[tuple[str, str, str]]) -> bool:
    return any(claim[1:] == e[1:] for e in evidence)


def years_of(text: str) -> set[int]:
    return {int(y) for y in re.findall(r"(?<!\d)((?:19|20)\d{2})(?!\d)", fold(text))}


# ---- names ----------------------------------------------------------------------------

_CAP_RE = re.compile(r"(?<![\w'-])([A-Z][^\W\d_]*(?:['-][^\W\d_]+)*|[A-Z]{2,})(?![\w])")
# Words that start sentences and fill templates; a capital here says nothing about a name.
_COMMON = set(
    """a about above according after again against all also although always am an and another any are as asked at
    be because been before being below besides both but by can could currently did do does during each either else
    even ever every except few finally first for formerly from further had has have having he her here hers him his
    how however i if in including instead into is it its just last later like many may meanwhile might more most
    much must my neither never next no none nor not now of off often on once only or other others otherwise our out
    over overall per perhaps please previously quite rather recently regarding said says see she should since so
    some sometimes soon still such than that the their theirs them then there these they this those though through
    thus to today together tomorrow too under unless until up upon us usually very was we were what whatever when
    whenever where whether which while who whom whose why will with within without would yes yesterday yet you your
    hi hello hey thanks thank ok okay sure great note notes summary overview dated events plans nothing instruction
    told answered replied mentioned wrote explained stated shared reported recalled confirmed
    lives works prefers likes loves has needs wants owns uses plans drives eats drinks travels speaks knows thinks
    feels goes gets makes takes keeps stays enjoys hates prefer like love need want own use plan visit visits
    """.split()
)
_COMMON_STEMS = {_stem(c) for c in _COMMON}
_HONORIFICS = {"mr", "mrs", "ms", "dr", "prof", "sir", "madam", "miss"}
_PRONOUN_SPEAKERS = {"he", "she", "they", "it", "we", "i", "you", "this", "that", "who", "which"}


def names(text: str) -> list[tuple[str, int]]:
    """Capitalised words that may be names (people, places, organisations), with positions.

    A capital at the start of a sentence or after a colon or an opening quote is only a name
    when the word is not a common sentence opener; month and weekday names are dates, not names.
    """
    text = fold(text)
    out = []
    for m in _CAP_RE.finditer(text):
        word = m.group(1).removesuffix("'s")
        lower = word.lower()
        if len(word) < 2 or lower in _HONORIFICS or lower in MONTHS or lower in WEEKDAYS or lower in _MONTH_ABBR:
            continue
        raw_before = text[: m.start()].rstrip(" ")
        before = raw_before.rstrip("\"“'(*")
        initial = not before or before[-1] in ".!?:;-–—\n。！？：" or raw_before[-1:] in ('"', "“", "(")
        if (initial or word == word.upper()) and _stem(lower) in _COMMON_STEMS:
            continue
        if initial and (lower in _COMMON or lower.endswith(("ed", "ing", "ly"))):
            continue  # a sentence opening with a verb or an adverb ("Moved to …", "Recently …")
        out.append((word, m.start()))
    return out


def name_supported(name: str, evidence_words: frozenset[str], evidence_text: str) -> bool:
    lower = fold(name).lower()
    if _stem(lower) in evidence_words or lower in evidence_words:
        return True
    return bool(re.search(rf"(?<![^\W_]){re.escape(lower)}(?![^\W_])", evidence_text))


# ---- quantifiers and negation ------------------------------------------------------------

NEGATION_RE = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|neither|nor|without|cannot|n't|non|nowhere)\b|n't\b|\bnon-|\bun(?=[a-z]{4,}able\b)"
    r"|[不没無无未别非]",
    re.IGNORECASE,
)
# A quantifier of a claim is supported by any word of its group in the evidence.
_NEG_GROUP = ("never", "not", "no", "n't", "none", "nobody", "nothing", "non-", "without", "cannot", "neither", "nor", "不", "没", "无", "未", "从不", "从来")  # fmt: skip
QUANTIFIERS: dict[str, tuple[str, ...]] = {
    "all": ("all", "every", "everyone", "everybody", "everything", "each", "entire", "whole", "any", "always", "都", "所有", "全部"),
    "every": ("all", "every", "everyone", "everybody", "everything", "each", "any", "always", "都", "所有", "每"),
    "everyone": ("all", "every", "everyone", "everybody", "anyone", "anybody", "所有人", "大家"),
    "everybody": ("all", "every", "everyone", "everybody", "anyone", "anybody", "所有人", "大家"),
    "everything": ("all", "every", "everything", "anything", "所有", "一切"),
    "always": (
        "always",
        "every time",
        "each time",
        "all the time",
        "constantly",
        "forever",
        "whenever",
        "without exception",
        "never fails",
        "总是",
        "一直",
        "始终",
        "永远",
        "每次",
    ),  # fmt: skip
    "only": (
        "only",
        "just",
        "solely",
        "exclusively",
        "nothing but",
        "no other",
        "nothing else",
        "except",
        "alone",
        "sole",
        "只",
        "仅",
        "唯一",
    ),  # fmt: skip
    "solely": ("only", "just", "solely", "exclusively", "sole", "只", "仅"),
    "exclusively": ("only", "just", "solely", "exclusively", "只", "仅"),
    "never": _NEG_GROUP,
    "none": _NEG_GROUP,
    "nobody": _NEG_GROUP,
    "forever": ("forever", "always", "permanently", "永远"),
    "entirely": ("entirely", "completely", "fully", "totally", "all", "whole"),
    "completely": ("entirely", "completely", "fully", "totally", "all", "whole"),
}


def quantifiers(text: str) -> list[str]:
    lower = fold(text).lower()
    return [q for q in QUANTIFIERS if re.search(rf"\b{q}\b", lower)]


def quantifier_supported(q: str, evidence: str) -> bool:
    lower = fold(evidence).lower()
    for alt in QUANTIFIERS[q]:
        if re.match(r"[\u4e00-\u9fff]", alt):
            if alt in lower:
                return True
        elif alt.endswith("-") or alt == "n't":
            if alt in lower:
                return True
        elif re.search(rf"\b{re.escape(alt)}\b", lower):
            return True
    return q in ("never", "none", "nobody") and bool(NEGATION_RE.search(lower))


def negated(text: str) -> bool:
    return bool(NEGATION_RE.search(fold(text)))


# ---- speakers --------------------------------------------------------------------------

_SAY_VERBS = (
    "said|says|told|tells|asked|asks|answered|answers|replied|replies|mentioned|mentions|wrote|writes|explained|explains"
    "|noted|added|stated|states|shared|shares|reported|reports|recalled|recalls|confirmed|confirms|claimed|claims"
    "|admitted|admits|promised|promises|suggested|suggests|recommended|recommends|insisted|insists"
)
_WHO = r"(?P<who>(?:[Tt]he )?(?:user|assistant)|[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)*)"
ATTRIBUTION_RE = re.compile(rf"{_WHO}(?:,[^,]{{1,30}},)? (?:{_SAY_VERBS})\b|\b[Aa]ccording to {_WHO.replace('?P<who>', '?P<who2>')}")


def attributed_speakers(text: str) -> list[str]:
    """Whom a sentence says the words are from ("Bob said …", "according to Bob")."""
    out = []
    for m in ATTRIBUTION_RE.finditer(unquoted(fold(text))):
        who = m.group("who") or m.group("who2") or ""
        who = re.sub(r"^[Tt]he ", "", who).strip()
        if who and who.lower() not in _PRONOUN_SPEAKERS and who.lower() not in _COMMON | {"asked"}:
            out.append(who)
    return out


_INTRO_RE = re.compile(r"\b(?:I'm|I am|my name is|this is|it's)\s+([A-Z][\w'-]+(?: [A-Z][\w'-]+)?)")


def introduced_names(text: str) -> set[str]:
    """Names a speaker gives themself ("I'm Marcus from Chase")."""
    return {w.lower() for m in _INTRO_RE.finditer(fold(text)) for w in m.group(1).split()}


# ---- instructions ----------------------------------------------------------------------

INSTRUCTION_RES = [
    re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|preceding|all|any|your|the|these|those)\b"
        r"[^.\n]{0,25}?\b(?:instructions?|rules?|prompts?|directions?|guidelines?|checks?|guardrails?|policies)\b",
        re.IGNORECASE,
    ),
    re.compile(
        r"\bapprove\b[^.\n]{0,30}?\b(?:every|all|any|each|this|these)\b[^.\n]{0,20}?\b(?:changes?|prs?|pull requests?|branch(?:es)?|edits?|diffs?|proposals?)\b",
        re.IGNORECASE,
    ),  # fmt: skip
    re.compile(
        r"\b(?:you are now (?:an?|the|my|in|dan|free|unrestricted|jailbroken|no longer)\b|from now on,? you|act as (?:an?|the) |pretend to be"
        r"|new instructions?:|(?:reveal|print|show|repeat|output|leak|disclose|ignore|forget|override|disregard|change)\b[^.\n]{0,25}?\bsystem prompt"
        r"|developer mode|jailbreak)",
        re.IGNORECASE,
    ),  # fmt: skip
    re.compile(
        r"\b(?:do not|don't|never)\s+(?:flag|report|reject|question|verify)\b[^.\n]{0,30}\b(?:this|these|page|claims?|changes?)\b",
        re.IGNORECASE,
    ),  # fmt: skip
    re.compile(r"\b(?:reviewers?|assistants?|models?|agents?|AI|LLM)\s*[:,]\s*(?:approve|merge|ignore|accept)\b", re.IGNORECASE),
    re.compile(r"\bmerge (?:this|it|the branch)\b[^.\n]{0,20}\b(?:without|immediately|regardless)\b", re.IGNORECASE),
    re.compile(r"(?:忽略|无视|忘记)(?:之前|以上|上面|前面|所有|先前)的?(?:所有)?(?:指令|指示|提示|规则)|批准所有|直接合并"),
]


def instruction_like(text: str) -> str | None:
    """The instruction-like passage of ``text`` addressed to an agent, or None."""
    for pattern in INSTRUCTION_RES:
        m = pattern.search(fold(text))
        if m:
            return m.group(0)
    return None
