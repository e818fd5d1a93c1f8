"""Contradicting current facts: qualified by the condition each one's evidence carries, or both
kept and marked disputed; two current values of one fact on one page are left for a person."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from agents.offline.reviewer import conflicting_facts
from agents.schemas import Comment
from kb.citations import SPAN_RE
from kb.markdown import FOOTREF_RE
from kb.page import Page, page_id_for_path, render_page
from pipeline.consolidate.page_text import add_related, is_current, replace_once, slug
from pipeline.consolidate.record import Action
from pipeline.consolidate.result import Found, JobResult, claim_key
from pipeline.consolidate.view import Texts

_MARKERS = "for|in|on|at|during|when|if|unless|except|since|until|before|after|within|outside"
_CONDITION_RE = re.compile(rf"\b(?:{_MARKERS})\s+(?:(?!\b(?:{_MARKERS})\b)[^,.;:!?()])+", re.IGNORECASE)


def _conditions(line: str, value: str) -> set[str]:
    """Condition phrases of an evidence line (not the value itself, which is what differs)."""
    out = set()
    for match in _CONDITION_RE.finditer(line):
        phrase = " ".join(match.group(0).split())
        if value.lower() not in phrase.lower() and phrase.lower().split(" ", 1)[1] not in value.lower():
            out.add(phrase)
    return out


def _fact_line(texts: Texts, source: str) -> str | None:
    match = SPAN_RE.match(source.strip())
    if not match:
        return None
    lines = texts.view.evidence_lines(match.group(1))
    start, end = int(match.group(2)), int(match.group(3) or match.group(2))
    if lines is None or start < 1 or end > len(lines):
        return None
    return " ".join(lines[start - 1 : end])


@dataclass(frozen=True)
class Fact:
    path: str
    index: int
    key: str
    about: str
    value: str
    source: str
    label: str


def current_conflicts(pages: Iterable[Page]) -> list[list[Fact]]:
    """Groups of current facts (one per page) with one key and subject and different values."""
    by_key: dict[tuple[str, str], list[Fact]] = {}
    for page in pages:
        if not is_current(page):
            continue
        for n, fact in enumerate(page.meta.get("facts") or []):
            if not isinstance(fact, dict) or not fact.get("key") or ":" in str(fact["key"]) or fact.get("valid_to"):
                continue
            if fact.get("disputed_with"):  # qualified as disputed already: a person decides
                continue
            item = Fact(
                page.path,
                n,
                str(fact["key"]),
                str(fact.get("about") or ""),
                str(fact.get("value")),
                str(fact.get("source") or ""),
                str(fact.get("label") or ""),
            )
            by_key.setdefault((item.key, item.about), []).append(item)
    out = []
    for items in by_key.values():
        if len({i.value.lower() for i in items}) > 1 and len({i.path for i in items}) == len(items):
            out.append(items)
    return out


def qualify_conflicts(texts: Texts, paths: Iterable[str]) -> JobResult:
    """Contradicting current facts on different pages are traced to their evidence. When each
    evidence line carries a condition the other lacks, each fact gets its condition written in
    (key ``<key>:<condition>``, ``condition``, and the claim); otherwise both stay, their pages
    ``disputed`` with a note naming the other. The newer is never kept by default."""
    result = JobResult()
    pages = [p for path in paths if (p := texts.page(path)) is not None]
    metas = {p.path: dict(p.meta) for p in pages}
    bodies = {p.path: p.body for p in pages}
    for group in current_conflicts(pages):
        conditions: dict[Fact, str | None] = {}
        for fact in group:
            line = _fact_line(texts, fact.source)
            own = _conditions(line, fact.value) if line else set()
            theirs: set[str] = set().union(*[_conditions(_fact_line(texts, o.source) or "", o.value) for o in group if o is not fact])
            distinct = sorted(own - theirs)
            conditions[fact] = distinct[0] if distinct else None
        facts_of = {f.path: [dict(x) for x in metas[f.path].get("facts") or []] for f in group}
        if all(conditions.values()):
            for fact in group:
                cond = str(conditions[fact])
                facts_of[fact.path][fact.index] |= {"key": f"{fact.key}:{slug(cond)}", "condition": cond}
                page = texts.page(fact.path)
                claim = next((c for c in page.structure.claims if fact.label in c.labels), None) if page and fact.label else None
                if claim is not None and cond.lower() not in claim.text.lower():
                    plain = claim.text
                    refs = "".join(FOOTREF_RE.findall(plain) and [f"[^{x}]" for x in FOOTREF_RE.findall(plain)])
                    core = FOOTREF_RE.sub("", plain).rstrip()
                    end = core[-1] if core and core[-1] in ".!?。" else ""
                    new = f"{core[: len(core) - len(end)]} ({cond}){end}{refs}"
                    bodies[fact.path] = replace_once(bodies[fact.path], plain, new) or bodies[fact.path]
                result.found.append(Found("conflict", fact.path, f"`{fact.key}` = {fact.value} holds {cond}; qualified"))
                if fact.label:
                    result.claims[claim_key(fact.path, fact.label)] = (Action.QUALIFIED, cond)
                result.pages[fact.path] = Action.QUALIFIED
        else:
            for fact in group:
                others = [o for o in group if o is not fact]
                facts_of[fact.path][fact.index] |= {"disputed_with": sorted(page_id_for_path(o.path) for o in others)}
                metas[fact.path]["status"] = "disputed"
                names = ", ".join(f"[[{page_id_for_path(o.path)}]] ({o.value})" for o in others)
                note = f"> Disputed: `{fact.key}` is {fact.value} here and differs on {names}; the evidence does not say which holds."
                if note not in bodies[fact.path]:
                    bodies[fact.path] = add_related(bodies[fact.path], note)
                result.found.append(Found("conflict", fact.path, f"`{fact.key}` = {fact.value} contradicts {names}; both kept, disputed"))
                if fact.label:
                    result.claims[claim_key(fact.path, fact.label)] = (Action.DISPUTED, f"contradicts {names}")
                result.pages[fact.path] = Action.DISPUTED
        for path, facts in facts_of.items():
            metas[path]["facts"] = facts
    for page in pages:
        if metas[page.path] != page.meta or bodies[page.path] != page.body:
            result.changes[page.path] = render_page(metas[page.path], bodies[page.path])
    _one_page_conflicts(pages, result)
    return result


@dataclass(frozen=True)
class PageConflict:
    """Two current values of one fact on one page, as the Reviewer's rule reports it (``comment``),
    with the fact's ``key`` and the labels of the claims its current values back."""

    key: str
    comment: Comment
    labels: tuple[str, ...]


def one_page_conflicts(page: Page) -> list[PageConflict]:
    """The Reviewer's ``conflicting_facts`` of ``page``, each with its key: the rule is asked about
    the facts of one key at a time, so the key is known, never read back out of the message."""
    if not conflicting_facts(page):
        return []
    facts = [f for f in page.meta.get("facts") or [] if isinstance(f, dict)]
    out = []
    for key in sorted({str(f.get("key")) for f in facts}):
        of_key = [f for f in facts if str(f.get("key")) == key]
        for comment in conflicting_facts(replace(page, meta=page.meta | {"facts": of_key})):
            labels = tuple(str(f["label"]) for f in of_key if f.get("label") and not f.get("valid_to"))
            out.append(PageConflict(key, comment, labels))
    return out


def _one_page_conflicts(pages: list[Page], result: JobResult) -> None:
    """Two current values of one fact on one page: no change is proposed (the Reviewer refuses
    any change to such a page); the facts' claims are recorded as disputed, for a person."""
    for page in pages:
        if not is_current(page):
            continue
        for conflict in one_page_conflicts(page):
            detail = f"{conflict.comment.message.split(';')[0]} on this one page: both kept, for a person to decide (disputed)"
            result.found.append(Found("conflict", page.path, detail, fixed=False))
            for label in conflict.labels:
                result.claims[claim_key(page.path, label)] = (Action.DISPUTED, detail)
            result.pages.setdefault(page.path, Action.DISPUTED)
