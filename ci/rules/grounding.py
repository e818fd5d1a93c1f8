"""Claim-level grounding: what a claim states must be in what it cites.

Each sentence of a page is read on its own (``ci.rules.factcheck``) and compared with the
evidence it cites (a sentence of a bullet without its own references is read against the
bullet's): numbers with their units, dates, proper names, quantifiers, negations (the cited
sentence around a quote counts, not only the quote) and, for conversations, who said it.
A claim bullet of a sourced page must cite. Every finding names the rule, the page line and
the evidence lines.

Page-level rules (fact cards, timeline headings, L0 and Overview, closed facts, instruction-like
text, evidence added on the change branch) are in ``ci.rules.page_grounding``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ci.findings import Finding
from ci.rules import factcheck as fc
from ci.rules import support
from ci.snapshot import Snapshot, normalise_quote
from kb.markdown import CODESPAN_RE, FOOTDEF_RE, FOOTREF_RE, SENTENCE_END_RE
from kb.page import Page
from kb.scopes import user_of

GroundingRule = Literal[
    "grounding.date",
    "grounding.number",
    "grounding.unit",
    "grounding.negation",
    "grounding.qualifier",
    "grounding.name",
    "grounding.speaker",
    "grounding.wording",
    "grounding.support",
]

_TIMESTAMP_RE = re.compile(r"^\[[^\]]*\]\s*", re.MULTILINE)
# a conversation line's prefix: time, speaker and turn id ("[2023-05-08T13:56:00] Jon (D1:3): ");
# the digits of the turn id are not the content's numbers
_TURN_PREFIX_RE = re.compile(r"^(?:\[[^\]\n]*\]\s*)?[^:\n]{1,80}? \([^)\n]{1,40}\): ", re.MULTILINE)
_LINE_RE = re.compile(r"^(?:\[(?P<time>[^\]]+)\] )?(?P<speaker>[^:\n]{1,80}?)(?: \((?P<turn>[^)]+)\))?: (?P<text>.*)$")
_TAG_RE = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
_CLAUSE_END = ".!?;,:。！？；，："
_USER_SPEAKERS = {"user", "human"}
_ASSISTANT_SPEAKERS = {"assistant", "ai", "bot", "chatbot", "agent", "model", "system"}


@dataclass(frozen=True)
class Ungrounded:
    """One way a claim is not supported by what it cites."""

    rule: GroundingRule
    message: str


@dataclass(frozen=True)
class Cited:
    """One resolved citation: its quote, its line span and the evidence item's lines."""

    label: str
    evidence_id: str
    start: int
    end: int
    quote: str
    lines: tuple[str, ...]
    conversation: bool = False
    date: str = ""

    @property
    def ref(self) -> str:
        return f"{self.evidence_id}#L{self.start}" + (f"-L{self.end}" if self.end != self.start else "")

    @property
    def span(self) -> str:
        return "\n".join(self.lines[self.start - 1 : self.end])

    def speakers(self) -> list[str]:
        """Who speaks on the cited lines (a continuation line belongs to the turn above it)."""
        if not self.conversation:
            return []
        out = []
        for n in range(self.start, self.end + 1):
            for back in range(n, 0, -1):
                m = _LINE_RE.match(self.lines[back - 1])
                if m and not self.lines[back - 1].startswith(" "):
                    out.append(m.group("speaker").strip())
                    break
        return out

    def introductions(self, speaker: str) -> set[str]:
        """Names the given speaker gives themself anywhere in the item ("I'm Marcus")."""
        names: set[str] = set()
        for line in self.lines:
            m = _LINE_RE.match(line)
            if m and m.group("speaker").strip() == speaker:
                names |= fc.introduced_names(m.group("text"))
        return names

    def sentence(self) -> str:
        """The sentence of the cited lines that holds the quote (the whole span if it is not there)."""
        span = normalise_quote(_TIMESTAMP_RE.sub("", self.span))
        quote = normalise_quote(self.quote)
        at = span.find(quote) if quote else -1
        if at < 0:
            return span
        left = max(span.rfind(c, 0, at) for c in ".!?。！？\n")
        end = at + len(quote) - (1 if quote[-1] in ".!?。！？" else 0)
        rights = [i for c in ".!?。！？\n" if (i := span.find(c, end)) >= 0]
        return span[left + 1 : min(rights) + 1 if rights else len(span)]

    def context(self) -> str:
        """The clause of the cited lines around the quote (the quote itself if it is not there)."""
        span = normalise_quote(_TIMESTAMP_RE.sub("", self.span))
        quote = normalise_quote(self.quote)
        at = span.find(quote) if quote else -1
        if at < 0:
            return self.quote
        left = max(span.rfind(c, 0, at) for c in _CLAUSE_END)
        end = at + len(quote) - (1 if quote[-1] in _CLAUSE_END else 0)
        rights = [i for c in _CLAUSE_END if (i := span.find(c, end)) >= 0]
        right = min(rights) if rights else len(span)
        return span[left + 1 : right]


@dataclass
class Evidence:
    """What a statement cites, read once."""

    cited: list[Cited]
    text: str = ""
    plain: str = ""  # without the line timestamps: their digits are not the content's numbers
    words: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        parts = [c.quote + "\n" + c.span for c in self.cited]
        self.text = "\n".join(parts)
        self.plain = "\n".join(c.quote + "\n" + (_TURN_PREFIX_RE.sub("", c.span) if c.conversation else c.span) for c in self.cited)
        self.plain = _TIMESTAMP_RE.sub("", self.plain)
        self.words = fc.words(self.text)

    @property
    def refs(self) -> str:
        return ", ".join(dict.fromkeys(c.ref for c in self.cited))


@dataclass(frozen=True)
class Reader:
    """Who the page is about: a user's page understands the user's names for the user."""

    user_names: frozenset[str] = frozenset()
    context: str = ""  # the page's title: a scope it names ("Schengen visas") need not be repeated

    @classmethod
    def for_page(cls, page: Page) -> Reader:
        user = user_of(page.scope)
        if not user:
            return cls(context=page.title)
        parts = {w for w in re.split(r"[-_. ]+", user.lower()) if w and not any(ch.isdigit() for ch in w)}
        return cls(frozenset(parts | {user.lower()} | _USER_SPEAKERS), context=page.title)

    def is_user(self, name: str) -> bool:
        parts = set(name.lower().split())
        return bool(self.user_names) and bool(parts) and parts <= self.user_names


def check_statement(text: str, evidence: Evidence, reader: Reader) -> list[Ungrounded]:
    """Problems of one sentence against everything it cites (empty when grounded)."""
    claim = fc.fold(FOOTREF_RE.sub("", text))
    problems: list[Ungrounded] = []
    ev_dates = list(fc.dates(evidence.text, strict_case=False))
    years = fc.years_of(evidence.text)
    resolved = _resolved_days(evidence)
    ev_dates += [fc.DateMention(d.year, d.month, d.day, None, "", 0, 0) for _, days, _ in resolved for d in days]
    keeps_relative = bool(fc.relative_dates(claim)) or bool(support.resolve(claim, dt.date(2000, 1, 1)))
    stated = fc.dates(" ".join(c.quote + " " + c.sentence() for c in evidence.cited), strict_case=False)
    blanked = claim
    for d in fc.dates(claim):
        if not fc.date_supported(d, ev_dates, years):
            problems.append(Ungrounded("grounding.date", f"the date {d.text!r} is not in the cited evidence"))
        elif not keeps_relative and d.day is not None and not fc.date_supported(d, stated, set()):
            for phrase, days, said in resolved:
                if (d.year in (None, said.year), d.month, d.day) == (True, said.month, said.day) and said not in days:
                    day = " or ".join(sorted(x.isoformat() for x in days))
                    problems.append(
                        Ungrounded("grounding.date", f"{d.text!r} is the day it was said; {phrase!r} said on {said.isoformat()} is {day}")
                    )
        blanked = blanked[: d.start] + " " * (d.end - d.start) + blanked[d.end :]
    ev_relative = fc.relative_dates(evidence.text)
    for rel in fc.relative_dates(claim):
        if not fc.relative_date_supported(rel, ev_relative):
            problems.append(Ungrounded("grounding.date", f"the time {rel[0]!r} is not in the cited evidence"))
    problems += _quantity_problems(blanked, evidence)
    problems += _negation_problems(claim, evidence)
    for q in fc.quantifiers(claim):
        if not fc.quantifier_supported(q, evidence.text):
            problems.append(Ungrounded("grounding.qualifier", f"{q!r} is in the claim but not in the cited evidence"))
    for name, _ in fc.names(claim):
        if not fc.name_supported(name, evidence.words, evidence.text.lower()) and not reader.is_user(name):
            problems.append(Ungrounded("grounding.name", f"the name {name!r} is not in the cited evidence"))
    problems += _speaker_problems(claim, evidence, reader)
    problems += [
        Ungrounded("grounding.support", p)
        for p in support.problems(claim, [c.quote for c in evidence.cited], evidence.plain, reader.context)
    ]
    return list(dict.fromkeys(problems)) or _wording_problems(claim, evidence, reader)


def _resolved_days(evidence: Evidence) -> list[tuple[str, set[dt.date], dt.date]]:
    """The relative days of cited conversation lines ("last Friday"), with the days they mean."""
    out = []
    for c in evidence.cited:
        said = support.said_on(c.lines[c.start - 1], c.date) if c.conversation else None
        if said is not None:
            out += [(phrase, days, said) for phrase, days in support.resolve(c.quote + " " + c.sentence(), said)]
    return out


# Words a faithful rewording may add or drop: negation and auxiliaries (their meaning is the
# negation rule's), number words and dates (the number and date rules'), pronouns and fillers.
_FORM_WORDS = {
    fc.stem(w)
    for w in """do does did is are was were be been am will would can could should shall must may might have has had
    wo ca not no never non don doesn didn isn aren wasn weren won can't cannot shouldn wouldn couldn haven hasn hadn
    i me my mine we us our ours you your yours he him his she her hers they them their theirs it its this that these
    those who whom which what the a an and or but of to in on at by for with from as so than then there here
    said says say told asked according quote also just very really too about
    """.split()
}
_MONTHS_WEEKDAYS = set(fc.MONTHS) | set(fc.WEEKDAYS)


def _content_words(text: str, reader: Reader) -> list[str]:
    out = []
    for raw in re.findall(r"[^\W\d_]+(?:'[^\W\d_]+)*", fc.fold(text).lower()):
        if "n't" in raw or raw in _MONTHS_WEEKDAYS or fc.is_number_word(raw) or reader.is_user(raw):
            continue
        word = fc.stem(raw)
        if word not in _FORM_WORDS and raw not in _FORM_WORDS and len(raw) > 1:
            out.append(word)
    return list(dict.fromkeys(out))


def _wording_problems(claim: str, evidence: Evidence, reader: Reader) -> list[Ungrounded]:
    """Words of a direct quotation must be the speaker's, and a claim must share most of its
    content words with what it cites (a claim attached to another line shares almost none)."""
    have = fc.word_parts(evidence.text)
    out = []
    for quoted in re.findall(r"\"([^\"]{12,})\"|“([^”]{12,})”", fc.fold(claim)):
        missing = [w for w in _content_words(quoted[0] or quoted[1], reader) if w not in have]
        if missing:
            out.append(Ungrounded("grounding.wording", f"the quoted words {', '.join(map(repr, missing[:4]))} are not in the cited lines"))
    if out:
        return out
    content = _content_words(claim, reader)
    missing = [w for w in content if w not in have and not any(w in h or h in w for h in have if len(h) > 3)]
    if len(missing) >= 3 and 2 * len(missing) > len(content):
        out.append(
            Ungrounded(
                "grounding.wording",
                f"most of the claim's words ({', '.join(map(repr, missing[:4]))}) are not in the cited lines: does it cite the right line?",
            )
        )
    return out


def _quantity_problems(claim: str, evidence: Evidence) -> list[Ungrounded]:
    out = []
    ev_quantities = fc.quantities(evidence.plain)
    ev_rates = fc.rates(evidence.plain)
    for q in fc.quantities(claim, claim_side=True):
        same = [e for e in ev_quantities if e.value == q.value]
        if not same:
            out.append(Ungrounded("grounding.number", f"the number {q.text.strip()!r} ({q.value}) is not in the cited evidence"))
            continue
        if q.units and not any(q.units <= e.units for e in same):
            stated = sorted({u for e in same for u in e.units}) or ["no unit"]
            out.append(
                Ungrounded(
                    "grounding.unit", f"{q.value} {'/'.join(sorted(q.units))} in the claim, {q.value} {'/'.join(stated)} in the evidence"
                )
            )
        if q.rate and q.rate not in ev_rates:
            out.append(Ungrounded("grounding.unit", f"{q.value} per {q.rate} in the claim; the evidence states no rate per {q.rate}"))
    return out


def _negation_problems(claim: str, evidence: Evidence) -> list[Ungrounded]:
    claim_neg = fc.negated(claim)
    if claim_neg and not any(fc.negated(c.quote) or fc.negated(c.sentence()) for c in evidence.cited):
        return [Ungrounded("grounding.negation", "the claim is negated but the cited sentence is not")]
    if not claim_neg:
        for cited in evidence.cited:
            # code is not a negation (`None`, `not x`): the page parser blanks it in claim text
            # nor is markup: an HTML tag's attributes (<abbr title="... not ...">) are not what the text says
            context = _TAG_RE.sub(" ", CODESPAN_RE.sub(" ", cited.context()))
            if fc.negated(context):
                quoted = (
                    "the quote"
                    if fc.negated(_TAG_RE.sub(" ", CODESPAN_RE.sub(" ", cited.quote)))
                    else "the cited sentence around the quote"
                )
                return [Ungrounded("grounding.negation", f"{quoted} is negated ({context.strip()[:80]!r}) but the claim is not")]
    return []


def _speaker_problems(claim: str, evidence: Evidence, reader: Reader) -> list[Ungrounded]:
    conversations = [c for c in evidence.cited if c.conversation]
    if not conversations:
        return []
    out = []
    for who in fc.attributed_speakers(claim):
        spoken = [(c, s) for c in conversations for s in c.speakers()]
        if not spoken or any(same_speaker(who, c, s, reader) for c, s in spoken):
            continue
        by = ", ".join(dict.fromkeys(s for _, s in spoken))
        out.append(Ungrounded("grounding.speaker", f"the claim attributes the words to {who}, but the cited line is spoken by {by}"))
    return out


def same_speaker(who: str, cited: Cited, speaker: str, reader: Reader) -> bool:
    who_l = who.lower()
    base = speaker.lower().split(" (")[0].strip()
    words = set(re.split(r"[\s()]+", speaker.lower())) - {""}
    if who_l in _ASSISTANT_SPEAKERS:
        return base in _ASSISTANT_SPEAKERS
    if reader.is_user(who) or who_l in _USER_SPEAKERS:
        if base in _USER_SPEAKERS or reader.is_user(base):
            return True
    who_words = set(who_l.split())
    return who_words <= words or bool(who_words & cited.introductions(speaker.strip()))


# ---- the statements of a page ----------------------------------------------------------

SKIP_SECTIONS = re.compile(r"^(?:see also|related(?: pages)?|links|pages|sources|references|contents|index)$", re.IGNORECASE)
_BULLET_RE = re.compile(r"^(?P<indent> {0,12})(?:[-*+]|\d{1,9}[.)])(?:[ \t]+(?P<text>.*))?$")
_FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK_ONLY_RE = re.compile(r"^\s*(?:\[\[[^\]]+\]\]|\[[^\]]*\]\([^)]*\))")


@dataclass(frozen=True)
class Statement:
    """A sentence of the page with the references it is read against."""

    text: str
    line: int
    labels: tuple[str, ...]
    section: str


@dataclass(frozen=True)
class Bullet:
    text: str
    line: int
    section: str


def bullets(page: Page) -> list[Bullet]:
    """The list items of the body (continuation lines joined), with their section titles."""
    out: list[Bullet] = []
    section = ""
    fence = ""
    current: list[str] = []
    start = 0
    current_section = ""

    def flush() -> None:
        if current:
            out.append(Bullet("\n".join(current), start, current_section))
            current.clear()

    for n, line in enumerate(page.body.splitlines(), start=page.header_lines + 1):
        fm = _FENCE_RE.match(line)
        if fence:
            if fm and fm.group(1) == fence:
                fence = ""
            continue
        if fm:
            flush()
            fence = fm.group(1)
            continue
        heading = _HEADING_RE.match(line)
        bullet = _BULLET_RE.match(line)
        if heading:
            flush()
            section = heading.group(2).strip()
        elif not line.strip() or FOOTDEF_RE.match(line):
            flush()
        elif bullet:
            flush()
            current.append(bullet.group("text") or "")
            start, current_section = n, section
        elif current:
            current.append(line.strip())
    flush()
    return out


def paragraphs(page: Page) -> list[Bullet]:
    """The prose paragraphs of the body (not list items, tables, quotes, code or definitions),
    lines joined, with their section titles."""
    out: list[Bullet] = []
    section, fence, start, in_list = "", "", 0, False
    current: list[str] = []
    for n, line in enumerate([*page.body.splitlines(), ""], start=page.header_lines + 1):
        fm = _FENCE_RE.match(line)
        if fence:
            fence, line = ("" if fm and fm.group(1) == fence else fence), ""
        elif fm:
            fence, line = fm.group(1), ""
        heading = _HEADING_RE.match(line)
        blank = not line.strip() or bool(heading) or bool(FOOTDEF_RE.match(line))
        if blank or _BULLET_RE.match(line) or line.lstrip().startswith(("|", ">", "<")) or line.startswith("    "):
            if current and not in_list:
                out.append(Bullet("\n".join(current), start, section))
            current = []
            in_list = bool(_BULLET_RE.match(line)) or (in_list and not blank)
            if heading:
                section = heading.group(2).strip()
            continue
        if in_list:
            continue  # a continuation line of a list item
        if not current:
            start = n
        current.append(line.strip())
    return out


def split_sentences(text: str, first_line: int) -> list[tuple[str, int]]:
    bounds = [0] + [m.end() for m in SENTENCE_END_RE.finditer(text)] + [len(text)]
    out = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        sentence = " ".join(text[a:b].split())
        if sentence:
            out.append((sentence, first_line + text.count("\n", 0, a)))
    return out


def statements(page: Page) -> tuple[list[Statement], list[Bullet]]:
    """Every sentence to check (claims of bullets and paragraphs), and the uncited bullets."""
    out: list[Statement] = []
    uncited: list[Bullet] = []
    bullet_lines: set[int] = set()
    for bullet in bullets(page):
        bullet_lines.update(range(bullet.line, bullet.line + bullet.text.count("\n") + 1))
        labels = tuple(FOOTREF_RE.findall(bullet.text))
        if not labels:
            uncited.append(bullet)
            continue
        for sentence, line in split_sentences(fc.STATUS_NOTE_RE.sub("", bullet.text), bullet.line):
            own = tuple(FOOTREF_RE.findall(sentence))
            out.append(Statement(sentence, line, own or labels, bullet.section))
    for para in paragraphs(page):
        # every sentence is a claim: one without references of its own is read against the
        # paragraph's citations
        labels = tuple(dict.fromkeys(FOOTREF_RE.findall(para.text)))
        if not labels or link_bullet(para.text):
            continue
        for sentence, line in split_sentences(fc.STATUS_NOTE_RE.sub("", para.text), para.line):
            if not FOOTREF_RE.search(sentence) and re.search(r"[^\W\d_]{2}", CODESPAN_RE.sub(" ", sentence)):
                out.append(Statement(sentence, line, labels, para.section))
    sections = page.structure.sections
    for claim in page.structure.claims:
        if claim.line not in bullet_lines:
            title = next((s.title for s in reversed(sections) if s.line <= claim.line <= s.end_line), "")
            out.append(Statement(claim.text, claim.line, claim.labels, title))
    return out, uncited


def resolve(snapshot: Snapshot, page: Page) -> dict[str, Cited]:
    """The page's citations that resolve to evidence lines (the citation rules report the rest)."""
    out = {}
    for cite in page.structure.citations:
        if not cite.evidence_id:
            continue
        lines = snapshot.evidence_lines(cite.evidence_id)
        entry = snapshot.evidence_by_id.get(cite.evidence_id)
        if lines is None or entry is None or cite.start < 1 or cite.end > len(lines) or cite.end < cite.start:
            continue
        conversation = entry.kind in ("conversation", "trajectory")
        out[cite.label] = Cited(cite.label, cite.evidence_id, cite.start, cite.end, cite.quote, tuple(lines), conversation, entry.date)
    return out


def is_sourced(page: Page) -> bool:
    return bool(page.structure.citations) or bool(page.meta.get("sources"))


def link_bullet(text: str) -> bool:
    return bool(_LINK_ONLY_RE.match(text)) or not re.sub(r"\[\[[^\]]*\]\]|\[[^\]]*\]\([^)]*\)|[\W_]", "", text)


def check_page_grounding(snapshot: Snapshot, page: Page) -> list[Finding]:
    cites = resolve(snapshot, page)
    reader = Reader.for_page(page)
    found, uncited = statements(page)
    out = [f for s in found for problems in _problems(s, cites, reader) for f in _findings(page, s, problems)]
    if is_sourced(page) and page.meta.get("type") != "index":
        # a list kept verbatim as a block claim is cited as a whole by the references after it
        blocks = [c.block for c in page.structure.claims if c.block is not None]
        for bullet in uncited:
            if bullet.section == "Overview" or SKIP_SECTIONS.match(bullet.section) or link_bullet(bullet.text):
                continue
            if any(first <= bullet.line <= last for first, last in blocks):
                continue
            out.append(
                Finding(
                    page.path,
                    bullet.line,
                    "grounding.uncited",
                    f"the claim bullet {_short(bullet.text)!r} cites no evidence",
                    hint='cite the evidence line that states it ([^n] and [^n]: ev-<id>#L3 "quote"), or remove the bullet',
                )
            )
    return out


def _problems(statement: Statement, cites: dict[str, Cited], reader: Reader) -> Iterable[tuple[list[Ungrounded], Evidence]]:
    cited = [cites[label] for label in dict.fromkeys(statement.labels) if label in cites]
    if not cited:
        return []
    evidence = Evidence(cited)
    problems = check_statement(statement.text, evidence, reader)
    return [(problems, evidence)] if problems else []


def _findings(page: Page, statement: Statement, found: tuple[list[Ungrounded], Evidence]) -> list[Finding]:
    problems, evidence = found
    labels = "".join(f"[^{label}]" for label in dict.fromkeys(statement.labels))
    return [
        Finding(
            page.path,
            statement.line,
            p.rule,
            f"{labels} {p.message} ({evidence.refs})",
            hint=f"cite the evidence that states it, or make the claim say what {evidence.refs} says",
        )
        for p in problems
    ]


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
