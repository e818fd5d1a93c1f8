"""Personal data in text: detection (patterns with validators) and redaction at ingest.

Kinds, each with its placeholder tag (``[CARD-1]``):

- ``national_id`` (ID): the 18-character Chinese resident id, its birth date real and its ISO
  7064 MOD 11-2 check character right;
- ``ssn`` (SSN): a US social security number ``123-45-6789`` (or spaced; bare 9 digits only
  after "SSN"/"social security"), the never-issued ranges excluded (area 000, 666, 900-999;
  group 00; serial 0000);
- ``card`` (CARD): a payment card number of 13-19 digits (grouped by spaces or dashes or not)
  with a known issuer prefix and length, passing the Luhn check;
- ``iban`` (IBAN): an IBAN whose length fits its country and whose mod-97 remainder is 1;
- ``phone`` (PHONE): ``+<country> ...`` numbers, Chinese mobile numbers (``1[3-9]`` + 9
  digits), North American ``(212) 555-0143`` numbers, and any number after "phone", "tel",
  "mobile", "电话", "手机" ...;
- ``email`` (EMAIL): addresses, except at documentation domains (``example.com``, ``.test``...);
- ``ip`` (IP): IPv4 and IPv6 addresses that parse (loopback and unspecified ones aside);
- ``dob`` (DOB): the date in "born on ...", "DOB: ...", "date of birth ...", "出生于...",
  "生日是..." (only the date is the finding);
- ``address`` (ADDR): a street address: English ``221B Baker Street`` (a house number, one to
  four capitalised words and a street type) when a city, a US ZIP or a UK postcode follows or
  words such as "live at", "address", "ship to" come before it; Chinese
  ``北京市朝阳区建国路88号`` (a province, city, district or county, then a road or street and
  its number, then any building, unit or room);
- ``person`` (PERSON) and ``health`` (HEALTH): no pattern; found only by the optional model
  detector (a name; a health fact such as a diagnosis or a medication).

Credentials are not here: ``kb.secrets`` refuses them at the door. Where two findings overlap,
the kind listed first wins (an 18-digit resident id is not read as a card).

A finding is identified, for the ``privacy.allow`` list of reviewed findings, by the same slow
salted fingerprint as a secret (``kb.secrets.fingerprint``) of its kind and normalised value.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

from kb.secrets import fingerprint as _slow_fingerprint

KINDS = ("national_id", "ssn", "card", "iban", "phone", "email", "ip", "dob", "address", "person", "health")
# the kinds the optional model detector (agents/privacy_detector.py) is asked for, when masked:
# no pattern finds a name or a health fact, nor an address or a birth date written in words
MODEL_KINDS = ("person", "health", "address", "dob")
TAGS = {
    "national_id": "ID",
    "ssn": "SSN",
    "card": "CARD",
    "iban": "IBAN",
    "phone": "PHONE",
    "email": "EMAIL",
    "ip": "IP",
    "dob": "DOB",
    "address": "ADDR",
    "person": "PERSON",
    "health": "HEALTH",
}
PLACEHOLDER_RE = re.compile(r"\[(" + "|".join(TAGS.values()) + r")-(\d+)\]")
_PLACEHOLDER_SPLIT = re.compile(r"(\[(?:" + "|".join(TAGS.values()) + r")-\d+\])")


# The optional model detector: (text, kinds) -> [(kind, value as written in the text)]
Detector = Callable[[str, Collection[str]], list[tuple[str, str]]]


@dataclass(frozen=True)
class PersonalHit:
    kind: str
    start: int
    end: int
    value: str  # the text as found; never printed, never stored by kb

    @property
    def normalised(self) -> str:
        return normalise(self.kind, self.value)


def normalise(kind: str, value: str) -> str:
    """The value as compared and fingerprinted: digits (and X) only for numbers, case-folded
    addresses; so ``4111 1111 1111 1111`` and ``4111-1111-1111-1111`` are one card."""
    if kind in ("national_id", "ssn", "card", "phone"):
        return re.sub(r"[^0-9Xx+]", "", value).upper()
    if kind in ("iban",):
        return re.sub(r"\s", "", value).upper()
    if kind == "ip":
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            return value.lower()
    if kind == "address":
        return " ".join(value.casefold().replace(",", " ").split())
    return value.casefold() if kind == "email" else value.strip()


def fingerprint(kind: str, value: str) -> str:
    """The fingerprint printed for a finding and listed under ``privacy.allow``."""
    return _slow_fingerprint(f"pii:{kind}", normalise(kind, value))


# ---- validators -------------------------------------------------------------------------

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def cn_id_valid(value: str) -> bool:
    """The 18-character resident id (GB 11643): a real birth date and the ISO 7064 MOD 11-2
    check character."""
    value = value.upper()
    if not re.fullmatch(r"[1-9]\d{16}[0-9X]", value):
        return False
    try:
        dt.date(int(value[6:10]), int(value[10:12]), int(value[12:14]))
    except ValueError:
        return False
    total = sum(int(d) * w for d, w in zip(value[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == value[17]


def ssn_valid(value: str) -> bool:
    digits = re.sub(r"\D", "", value)
    if len(digits) != 9:
        return False
    area, group, serial = int(digits[:3]), int(digits[3:5]), int(digits[5:])
    return area != 0 and area != 666 and area < 900 and group != 0 and serial != 0


def luhn_valid(digits: str) -> bool:
    total = 0
    for n, char in enumerate(reversed(digits)):
        d = int(char)
        if n % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# issuer prefixes and the lengths their numbers have
_CARD_BRANDS: tuple[tuple[re.Pattern[str], tuple[int, ...]], ...] = (
    (re.compile(r"4"), (13, 16, 19)),  # Visa
    (re.compile(r"5[1-5]|2(?:2[2-9]|[3-6]\d|7[01]|720)"), (16,)),  # Mastercard
    (re.compile(r"3[47]"), (15,)),  # American Express
    (re.compile(r"6(?:011|5|4[4-9])"), (16, 17, 18, 19)),  # Discover
    (re.compile(r"62"), (16, 17, 18, 19)),  # UnionPay
    (re.compile(r"35(?:2[89]|[3-8])"), (16, 17, 18, 19)),  # JCB
    (re.compile(r"3(?:0[0-5]|[689])"), (14, 15, 16, 17, 18, 19)),  # Diners Club
)


def card_valid(value: str) -> bool:
    digits = re.sub(r"[ -]", "", value)
    if not digits.isdigit() or len(set(digits)) == 1:
        return False
    brand = any(p.match(digits) and len(digits) in lengths for p, lengths in _CARD_BRANDS)
    return brand and luhn_valid(digits)


# IBAN lengths by country (ISO 13616 registry, the countries most often seen)
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AT": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21, "CY": 28, "CZ": 24,
    "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GI": 23, "GR": 27, "HR": 21,
    "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "KW": 30, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25, "QA": 29, "RO": 24, "SA": 24, "SE": 24,
    "SI": 19, "SK": 24, "SM": 27, "TR": 26, "UA": 29,
}  # fmt: skip


def iban_valid(value: str) -> bool:
    compact = re.sub(r"\s", "", value).upper()
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


_DOC_DOMAINS = re.compile(r"(?i)(?:^|\.)(?:example\.(?:com|org|net)|[^.]+\.(?:example|test|invalid|localhost))$")


def email_valid(value: str) -> bool:
    return not _DOC_DOMAINS.search(value.rsplit("@", 1)[1])


def ip_valid(value: str) -> bool:
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return False
    if address.is_loopback or address.is_unspecified:
        return False
    if address.version == 6:  # "12:30:45" is a time: need hex letters, a long group or all eight groups
        return bool(re.search(r"[A-Fa-f]|[0-9]{3}", value)) or value.count(":") == 7
    return True


_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_MONTH_ABBR = "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"


def date_valid(value: str) -> bool:
    """A calendar date in one of the forms a date of birth is written in."""
    text = value.strip().rstrip(".,")
    m = re.fullmatch(r"(\d{4})[-/.年](\d{1,2})[-/.月](\d{1,2})日?", text)
    if m:
        y, mo, d = (int(g) for g in m.groups())
    elif m := re.fullmatch(r"(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})", text):
        a, b, y = (int(g) for g in m.groups())
        mo, d = (a, b) if a <= 12 else (b, a)
    else:
        words = re.findall(r"[A-Za-z]+|\d+", text)
        months = _MONTHS.split("|")
        month = next((w for w in words if w.isalpha()), "").lower()
        numbers = [int(w) for w in words if w.isdigit()]
        index = next((n for n, name in enumerate(months, 1) if name.startswith(month) and len(month) >= 3), 0)
        if not index or len(numbers) != 2:
            return False
        d, y = (numbers[0], numbers[1]) if numbers[1] > 31 else (numbers[1], numbers[0])
        mo = index
    try:
        born = dt.date(y, mo, d)
    except ValueError:
        return False
    return 1880 <= born.year <= dt.date.today().year


# ---- patterns ---------------------------------------------------------------------------

_NB = r"(?<![0-9A-Za-z])"  # no letter or digit before (a Chinese character is fine)
_NA = r"(?![0-9A-Za-z])"
_DATE = (
    rf"(?:\d{{4}}[-/.]\d{{1,2}}[-/.]\d{{1,2}}|\d{{1,2}}[/.-]\d{{1,2}}[/.-]\d{{4}}|"
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS}|{_MONTH_ABBR})\.?,?\s+\d{{4}}|"
    rf"(?:{_MONTHS}|{_MONTH_ABBR})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}|\d{{4}}年\d{{1,2}}月\d{{1,2}}日)"
)


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool]
    group: str | int = 0
    needs: tuple[str, ...] = field(default=())  # substrings (lower case), one of which must occur


def _ascii(pattern: str) -> re.Pattern[str]:
    """``\\w``, ``\\b`` and ``\\d`` in ASCII only: a Chinese character next to a number is a boundary."""
    return re.compile(pattern, re.ASCII)


def _digits_ok(low: int, high: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        return low <= len(re.sub(r"\D", "", value)) <= high

    return check


def _real_phone(check: Callable[[str], bool]) -> Callable[[str], bool]:
    """``check``, and not one of the North American numbers 555-0100 to 555-0199, which are
    reserved for fiction and examples (as example.com is for e-mail)."""

    def real(value: str) -> bool:
        return check(value) and not re.search(r"55501\d\d$", re.sub(r"\D", "", value))

    return real


def _nanp(value: str) -> bool:
    digits = re.sub(r"\D", "", value)
    return len(digits) == 10 and digits[0] in "23456789" and digits[3] in "23456789"


RULES: tuple[_Rule, ...] = (
    _Rule("national_id", _ascii(rf"{_NB}[1-9]\d{{16}}[0-9Xx]{_NA}"), cn_id_valid),
    _Rule("ssn", _ascii(r"(?<![0-9-])\d{3}([- ])\d{2}\1\d{4}(?![0-9-])"), ssn_valid),
    _Rule(
        "ssn",
        _ascii(r"(?i)\b(?:ssn|social\s+security(?:\s+number)?)\b\W{0,5}(?:is\s+)?(?P<v>\d{9})(?!\d)"),
        ssn_valid,
        "v",
        ("ssn", "social"),
    ),
    # not inside a word or an evidence id (ev-<16 hex digits> may be all digits)
    _Rule(
        "card",
        _ascii(rf"{_NB}(?<!ev-)\d{{4}}(?:([ -]?)\d{{4}}(?:\1\d{{4}}){{1,2}}(?:\1\d{{1,3}})?|[ -]?\d{{6}}[ -]?\d{{4,5}}){_NA}"),
        card_valid,
    ),
    _Rule("card", _ascii(rf"{_NB}(?<!ev-)\d{{13,19}}{_NA}"), card_valid),
    _Rule("iban", _ascii(rf"{_NB}[A-Z]{{2}}\d{{2}}(?: ?[A-Z0-9]{{1,4}}){{3,8}}{_NA}"), iban_valid),
    _Rule(
        "email",
        # after an escaped line break (a citation's JSON quote) a new address may start; "\n@app.route"
        # is not "n@app.route"
        _ascii(r"(?:(?<=\\n)|(?<![\w.+\\-]))[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b"),
        email_valid,
        0,
        ("@",),
    ),
    _Rule("phone", _ascii(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){2,5}(?![0-9])"), _real_phone(_digits_ok(8, 15)), 0, ("+",)),
    # not inside a word or a hex id ("ev-e963d16478162253")
    _Rule("phone", _ascii(rf"{_NB}(?<!ev-)1[3-9]\d(?:[ -]?\d{{4}}){{2}}{_NA}"), _digits_ok(11, 11)),
    _Rule("phone", _ascii(r"(?<![\w(-])(?:\(\d{3}\) ?|\d{3}[.-])\d{3}[.-]\d{4}(?![0-9-])"), _real_phone(_nanp)),
    _Rule(
        "phone",
        _ascii(
            r"(?i)(?:\b(?:phone|tel|telephone|mobile|cell|fax)\b|电话|手机|手机号|联系方式)(?:\s*(?:number|no\.?|#))?"
            r"(?:\s*(?:is|:|：|at|号码是|是|为))?\s*(?P<v>\+?\(?\d[\d ().-]{5,18}\d)(?![0-9])"
        ),
        _real_phone(_digits_ok(7, 15)),
        "v",
        ("phone", "tel", "mobile", "cell", "fax", "电话", "手机", "联系方式"),
    ),
    _Rule(
        "ip",
        _ascii(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?!\w|\.\d)"),
        ip_valid,
    ),
    _Rule("ip", _ascii(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:]|\.\w)"), ip_valid, 0, (":",)),
    _Rule(
        "dob",
        _ascii(
            rf"(?i)(?:\bborn\s+(?:on\s+)?|\b(?:DOB|D\.O\.B\.)\s*[:：]?\s*|\bdate\s+of\s+birth\s*(?:is\s+|[:：]\s*)?|"
            rf"\bbirth\s?day\s+is\s+|出生(?:于|日期[:：是]?)\s*|生日(?:是|[:：])\s*)(?P<v>{_DATE})"
        ),
        date_valid,
        "v",
        ("born", "dob", "d.o.b", "birth", "出生", "生日"),
    ),
)


_STREET_TYPES = (
    "Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|Terrace|Close|"
    "Crescent|Square|Sq|Parkway|Pkwy|Highway|Hwy|Row|Mews|Gardens|Grove|Walk|Alley|Circle|Cir|Loop"
)
# a house number (221B, 12-14), then one to four capitalised words (or N/S/E/W, 5th), then the street type
_STREET = (
    rf"(?<![\w.,/:-])[1-9]\d{{0,5}}[A-Za-z]?(?:-\d{{1,5}})?,?\s+"
    rf"(?:(?:[NSEW]\.?|[A-Z][a-z'’]+\.?|\d{{1,3}}(?:st|nd|rd|th))\s+){{1,4}}(?:{_STREET_TYPES})\b\.?(?:\s+(?:NW|NE|SW|SE)\b)?"
    rf"(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|Flat|Floor|#)\.?\s*#?[0-9A-Za-z]{{1,5}}\b)?"
)
_CITY = r"[A-Z][a-z'’-]+(?:\s+[A-Z][a-z'’-]+){0,2}"
_POSTCODE = r"(?:[A-Z]{2}\s+\d{5}(?:-\d{4})?|\d{5}(?:-\d{4})?|[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2})(?![\w-])"
_ADDRESS_CUE = (
    r"(?i:\b(?:live|lives|lived|living|reside|resides|residing|address|addresses|moved|move|moving|"
    r"ship|shipped|deliver|delivered|delivery|send|sent|mail|post|located|home|house|flat|apartment|visit)\b)"
)
# Chinese: the administrative parts (at least one), the road and its number, then the building
_CN_PART = r"[^\s\d\W在是于到住我你他她它的从去往址为把给和与及或请]"  # a place name character, not a function word
_CN_NUM = r"(?:\d{1,5}|[零一二三四五六七八九十百]{1,5})"
_CN_ADDRESS = (
    rf"(?:{_CN_PART}{{1,7}}?(?:省|自治区|特别行政区))?(?:{_CN_PART}{{1,7}}?(?:市|自治州|地区|盟))?"
    rf"(?:{_CN_PART}{{1,7}}?(?:区|县|旗))?(?:{_CN_PART}{{1,7}}?(?:镇|乡|街道))?"
    rf"{_CN_PART}{{1,9}}?(?:大街|大道|路|街|道|巷|胡同|里){_CN_NUM}(?:弄{_CN_NUM})?(?:号院|号)"
    rf"(?:{_CN_PART}{{0,8}}?{_CN_NUM}(?:号楼|栋|幢|座|单元|层|楼|室|号|户))*"
)


def cn_address_valid(value: str) -> bool:
    """A road and number in a named province, city, district or county (not a bare "3号")."""
    head = re.split(r"大街|大道|路|街|道|巷|胡同|里", value, maxsplit=1)[0]
    return bool(re.search(r"省|自治区|特别行政区|市|自治州|地区|盟|区|县|旗", head))


def _street_valid(value: str) -> bool:
    """Not a year before a capitalised name ("in 2019 Oxford Street was closed"), unless a
    postcode follows."""
    return not re.match(r"(?:19|20)\d\d\s", value) or bool(re.search(r",\s*" + _POSTCODE, value))


ADDRESS_RULES: tuple[_Rule, ...] = (
    _Rule("address", re.compile(_CN_ADDRESS), cn_address_valid, 0, ("号",)),
    _Rule("address", re.compile(rf"{_STREET}(?:,?\s+{_CITY})?,?\s+{_POSTCODE}"), _street_valid),
    _Rule(
        "address", re.compile(rf"{_ADDRESS_CUE}[^\n.!?;]{{0,30}}?(?P<v>{_STREET}(?:,\s*{_CITY}(?:,\s*[A-Z]{{2}})?)?)"), _street_valid, "v"
    ),
)
RULES = RULES + ADDRESS_RULES


def find_personal_data(text: str, kinds: Collection[str] = KINDS) -> list[PersonalHit]:
    """The personal data of ``kinds`` in ``text``, in order; overlaps go to the earlier rule."""
    lowered = text.lower()
    taken: list[tuple[int, int]] = []
    hits: list[PersonalHit] = []
    for rule in RULES:
        if rule.kind not in kinds or rule.needs and not any(n in lowered for n in rule.needs):
            continue
        for match in rule.pattern.finditer(text):
            start, end = match.span(rule.group)
            value = match.group(rule.group)
            if any(s < end and start < e for s, e in taken) or not rule.valid(value):
                continue
            taken.append((start, end))
            hits.append(PersonalHit(rule.kind, start, end, value))
    return sorted(hits, key=lambda h: h.start)


def _allowed(hits: list[PersonalHit], allow: Collection[str]) -> Iterator[PersonalHit]:
    for hit in hits:
        if not allow or fingerprint(hit.kind, hit.value) not in allow:
            yield hit


@dataclass(frozen=True)
class Redaction:
    text: str
    masked: dict[str, int]  # kind -> how many distinct values were masked


def mask(text: str, kinds: Collection[str], allow: Collection[str] = ()) -> Redaction:
    """``text`` with every value of ``kinds`` replaced by its typed placeholder, ``[CARD-1]``:
    the same value (normalised) gets the same placeholder throughout the text; numbering starts
    after any placeholder the text already holds, so that no two values share one."""
    hits = list(_allowed(find_personal_data(text, kinds), allow))
    if not hits:
        return Redaction(text, {})
    used: dict[str, int] = {}
    for tag, number in PLACEHOLDER_RE.findall(text):
        used[tag] = max(used.get(tag, 0), int(number))
    names: dict[tuple[str, str], str] = {}
    masked: dict[str, int] = {}
    out, last = [], 0
    for hit in hits:
        key = (hit.kind, hit.normalised)
        if key not in names:
            tag = TAGS[hit.kind]
            used[tag] = used.get(tag, 0) + 1
            names[key] = f"[{tag}-{used[tag]}]"
            masked[hit.kind] = masked.get(hit.kind, 0) + 1
        out.append(text[last : hit.start])
        out.append(names[key])
        last = hit.end
    out.append(text[last:])
    return Redaction("".join(out), masked)


def mask_values(text: str, findings: Collection[tuple[str, str]]) -> Redaction:
    """``text`` with every occurrence of each (kind, value) replaced by the kind's placeholder,
    numbered after any placeholder the text already holds (the model detector's findings, applied
    after ``mask``); longer values first, so a name inside a longer address is not split."""
    used: dict[str, int] = {}
    for tag, number in PLACEHOLDER_RE.findall(text):
        used[tag] = max(used.get(tag, 0), int(number))
    masked: dict[str, int] = {}
    for kind, value in sorted(set(findings), key=lambda f: (-len(f[1]), f)):
        parts = _PLACEHOLDER_SPLIT.split(text)  # placeholders at odd positions: never rewritten
        if not value.strip() or not any(value in part for part in parts[::2]):
            continue
        tag = TAGS[kind]
        used[tag] = used.get(tag, 0) + 1
        text = "".join(part if n % 2 else part.replace(value, f"[{tag}-{used[tag]}]") for n, part in enumerate(parts))
        masked[kind] = masked.get(kind, 0) + 1
    return Redaction(text, masked)


def holds(text: str, kinds: Collection[str], allow: Collection[str] = ()) -> bool:
    """Whether ``text`` holds a value of ``kinds`` (not allowed by fingerprint)."""
    return bool(kinds) and any(True for _ in _allowed(find_personal_data(text, kinds), allow))
