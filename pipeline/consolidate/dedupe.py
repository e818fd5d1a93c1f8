"""Duplicates: the same statement on several current pages of one type, kept on one page with
every citation the copies had; similar is not the same (a number, a date or a negation differs,
or the model finds the statements differ), and such pairs are reported, never merged."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ci.snapshot import normalise_quote
from kb.citations import cited_evidence
from kb.markdown import format_citation
from kb.page import Page, page_id_for_path, render_page
from pipeline.consolidate.page_text import (
    ISO_DATE_RE,
    add_related,
    is_current,
    negated,
    next_label,
    norm_claim,
    numbers,
    remove_claim,
    section_of_line,
    strip_refs,
)
from pipeline.consolidate.record import Action
from pipeline.consolidate.result import Found, JobResult, claim_key
from pipeline.consolidate.view import Texts, span_key

if TYPE_CHECKING:
    from pipeline.consolidate.model import ModelJobs


def _signature(text: str) -> tuple[frozenset[str], frozenset[str], bool]:
    """What decides a statement's meaning beyond its words: its dates, numbers and negation."""
    plain = strip_refs(text)
    dates = frozenset(m.group(0) for m in ISO_DATE_RE.finditer(plain))
    return dates, frozenset(numbers(ISO_DATE_RE.sub(" ", plain))), negated(plain)


@dataclass(frozen=True)
class _Stated:
    path: str
    label: str
    text: str
    spans: frozenset[str]
    quote: str = ""  # what the citation quotes of its span (one line may state several things)


_ADMONITION_RE = re.compile(r"^(?:!!!|\?\?\?\+?|///+|:::+)\s*\w")
_FENCE_RE = re.compile(r"^(?:///+|:::+)\s*$")


def in_aside(page: Page, line: int) -> bool:
    """Whether file line ``line`` of ``page`` is inside a blockquote or an admonition (``> …``,
    ``!!! warning`` with its indented body, ``/// note`` … ``///``, ``::: tip`` … ``:::``):
    a warning or a note says something on purpose where it stands, so it is never merged away."""
    rows = page.body.splitlines()
    at = line - page.header_lines - 1
    if not 0 <= at < len(rows):
        return False
    if rows[at].lstrip().startswith(">"):
        return True
    depth = 0
    for row in rows[:at]:
        if _FENCE_RE.match(row.strip()):
            depth = max(0, depth - 1)
        elif _ADMONITION_RE.match(row.strip()) and not row.strip().startswith(("!!!", "???")):
            depth += 1
    if depth:
        return True
    if rows[at].startswith(("    ", "\t")):
        for row in reversed(rows[:at]):
            if row.strip() and not row.startswith(("    ", "\t")):
                return row.lstrip().startswith(("!!!", "???"))
    return False


def _stated_claims(page: Page) -> list[_Stated]:
    cites = {c.label: c for c in page.structure.citations if c.evidence_id}
    out = []
    for claim in page.structure.claims:
        if len(claim.labels) != 1 or claim.labels[0] not in cites or section_of_line(page, claim.line) in ("History", "Overview"):
            continue
        if in_aside(page, claim.line):
            continue
        cite = cites[claim.labels[0]]
        span = frozenset({span_key(cite.evidence_id or "", cite.start, cite.end)})
        out.append(_Stated(page.path, claim.labels[0], claim.text, span, normalise_quote(cite.quote).lower()))
    return out


def _duplicate_groups(stated: dict[str, list[_Stated]], result: JobResult, model: ModelJobs | None = None) -> list[list[_Stated]]:
    """Statements that are the same fact: the same words citing the same evidence item, or the
    same quote of the same span with the same dates, numbers and negation (the same quote with a
    different one is reported, not grouped). The same words from two sources are not grouped:
    two pages about two cities may each say "it opens at 9am", from two handbooks. A line that says
    several things is quoted differently by each statement it backs: those are different facts."""
    items = [i for group in stated.values() for i in group]
    parent = list(range(len(items)))

    def find(n: int) -> int:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    by_text: dict[tuple[str, frozenset[str]], int] = {}
    by_span: dict[tuple[frozenset[str], str], int] = {}
    for n, item in enumerate(items):
        text = (norm_claim(item.text), _sources(item))
        if text in by_text:
            parent[find(n)] = find(by_text[text])
        else:
            by_text[text] = n
        quoted = (item.spans, item.quote)
        if quoted in by_span:
            other = items[by_span[quoted]]
            if _signature(other.text) == _signature(item.text):
                parent[find(n)] = find(by_span[quoted])
            elif other.path != item.path:
                result.found.append(
                    Found(
                        "similar-not-same",
                        item.path,
                        f"cites {sorted(item.spans)[0]} like {other.path} but differs in a number, date or negation: not merged",
                        fixed=False,
                    )
                )
        else:
            by_span[quoted] = n
    for a, b in _near_same(items, find, model, result):
        parent[find(b)] = find(a)
    groups: dict[int, list[_Stated]] = {}
    for n, item in enumerate(items):
        groups.setdefault(find(n), []).append(item)
    return [g for g in groups.values() if len({i.path for i in g}) > 1]


def _sources(item: _Stated) -> frozenset[str]:
    return frozenset(span.split("#")[0] for span in item.spans)


NEAR = 0.5  # word overlap (Jaccard) from which two statements in other words are compared
MAX_POSTINGS = 200  # a word on more statements than this does not make two of them candidates
MAX_NEAR_PAIRS = 40  # pairs the model is asked about per batch; the rest are reported as skipped
_WORD_RE = re.compile(r"[^\W\d_]{3,}")
_STOP = frozenset("the and for are was were with that this from has have had not but you she her his they them their said".split())


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD_RE.findall(strip_refs(text).lower()) if w not in _STOP)


def _near_candidates(items: list[_Stated], find: Callable[[int], int], result: JobResult) -> list[tuple[int, int]]:
    """Pairs on different pages whose words overlap by ``NEAR`` and whose dates, numbers and
    negation agree; pairs that overlap but differ in one of those are reported, not returned."""
    words = [_words(i.text) for i in items]
    postings: dict[str, list[int]] = {}
    for n, of_item in enumerate(words):
        for word in of_item:
            postings.setdefault(word, []).append(n)
    candidates: list[tuple[int, int]] = []
    for a in range(len(items)):
        # only statements sharing a word that is not everywhere (a word on most statements says nothing)
        others = sorted({b for w in words[a] if len(postings[w]) <= MAX_POSTINGS for b in postings[w] if b > a})
        for b in others:
            if items[a].path == items[b].path or find(a) == find(b):
                continue
            if _sources(items[a]) != _sources(items[b]):
                continue  # in other words and from another source: another subject, maybe
            if (items[a].spans, items[a].quote) == (items[b].spans, items[b].quote):
                continue  # one quote of one span: compared above
            if len(words[a] & words[b]) / len(words[a] | words[b]) < NEAR:
                continue
            if _signature(items[a].text) != _signature(items[b].text):
                detail = f"close to {items[a].path} [^{items[a].label}] but differs in a number, date or negation: not merged"
                result.found.append(Found("similar-not-same", items[b].path, detail, fixed=False))
                continue
            candidates.append((a, b))
    return candidates


def _near_same(items: list[_Stated], find: Callable[[int], int], model: ModelJobs | None, result: JobResult) -> list[tuple[int, int]]:
    """Pairs of statements on different pages, in other words, that are the same fact. Similar
    is not the same: a pair that differs in a number, a date or a negation is reported and never
    compared; the rest are asked of the model, which must find subject, scope, time, condition,
    negation and numbers all alike; offline they are counted as skipped."""
    candidates = _near_candidates(items, find, result)
    if not candidates:
        return []
    if model is None:
        result.skipped.append(f"{len(candidates)} near-duplicate pair(s) in other words not compared (needs a model)")
        return []
    asked = candidates[:MAX_NEAR_PAIRS]
    if len(candidates) > len(asked):
        result.skipped.append(f"{len(candidates) - len(asked)} near-duplicate pair(s) over the {MAX_NEAR_PAIRS} asked per batch")
    checks, why = model.sameness([(strip_refs(items[a].text), strip_refs(items[b].text)) for a, b in asked])
    if why:
        result.found.append(
            Found("duplicate", items[asked[0][1]].path, f"model comparison failed ({why}); {len(asked)} pair(s) not merged", False)
        )
        return []
    same = []
    for number, (a, b) in enumerate(asked, 1):
        check = checks.get(number)
        if check is None:
            result.found.append(Found("duplicate", items[b].path, f"the model gave no answer on [^{items[b].label}]; not merged", False))
        elif check.same_fact and not check.differs_in:
            same.append((a, b))
        else:
            differs = ", ".join(check.differs_in) or "meaning"
            detail = f"close to {items[a].path} [^{items[a].label}] but differs in {differs} ({check.reason}): not merged"
            result.found.append(Found("similar-not-same", items[b].path, detail, fixed=False))
    return same


# Pages that restate other pages' statements by design: a user's profile (the fact cards and
# their sentences) and timeline (the same statements under their dates) are views over the
# topic pages, not copies to merge away; removing a statement there loses its date or its card.
VIEW_TYPES = frozenset({"profile", "timeline"})


def merge_duplicates(texts: Texts, paths: Iterable[str], today: str, model: ModelJobs | None = None) -> JobResult:
    """The same statement on several current pages of one type is kept on one page (the one
    with the most claims), with every citation the copies had (the survivor cites each copy's
    span), and removed from the others, which link to it; a page whose every statement is
    stated there is deprecated with that page as successor. Views (``VIEW_TYPES``) are left
    alone. Similar is not the same: see ``_duplicate_groups``."""
    result = JobResult()
    pages = {
        p: page
        for p in paths
        if (page := texts.page(p)) is not None and is_current(page) and str(page.meta.get("type", "")) not in VIEW_TYPES
    }
    stated = {p: _stated_claims(page) for p, page in pages.items()}
    bodies = {p: page.body for p, page in pages.items()}
    metas: dict[str, dict[str, Any]] = {p: dict(page.meta) for p, page in pages.items()}
    removals: dict[str, list[tuple[_Stated, str]]] = {}
    by_type: dict[str, dict[str, list[_Stated]]] = {}
    for p, of_page in stated.items():
        by_type.setdefault(str(pages[p].meta.get("type", "")), {})[p] = of_page
    groups = [g for _, of_type in sorted(by_type.items()) for g in _duplicate_groups(of_type, result, model)]
    for group in groups:
        canonical = min({i.path for i in group}, key=lambda p: (-len(stated[p]), p))
        keep = next(i for i in group if i.path == canonical)
        spans_kept = set(keep.spans)
        for item in group:
            if item.path == canonical:
                continue
            removals.setdefault(item.path, []).append((item, canonical))
            result.claims[claim_key(item.path, item.label)] = (Action.MERGED, f"stated on {page_id_for_path(canonical)} [^{keep.label}]")
            result.found.append(Found("duplicate", item.path, f"states what {canonical} states: {strip_refs(item.text)[:80]}"))
            if item.spans <= spans_kept:
                continue
            spans_kept |= item.spans
            cite = next(c for c in pages[item.path].structure.citations if c.label == item.label)
            label = next_label(bodies[canonical])
            bodies[canonical] = bodies[canonical].replace(f"[^{keep.label}]", f"[^{keep.label}][^{label}]", 1)
            bodies[canonical] = (
                bodies[canonical].rstrip("\n")
                + "\n"
                + format_citation(label, cite.evidence_id or "", cite.start, cite.end, cite.quote)
                + "\n"
            )
            metas[canonical]["sources"] = sorted(set(metas[canonical].get("sources") or []) | {cite.evidence_id or ""})
        result.claims.setdefault(claim_key(keep.path, keep.label), (Action.VERIFIED, ""))
    for path, items in sorted(removals.items()):
        left = {i.label for i in stated[path]} - {i.label for i, _ in items}
        successors = sorted({c for _, c in items})
        if not left and len(successors) == 1:  # nothing of its own left: deprecated, with its successor
            successor = page_id_for_path(successors[0])
            metas[path] |= {"status": "deprecated", "valid_to": today, "superseded_by": [successor]}
            bodies[path] = bodies[path].rstrip("\n") + f"\n\n> Deprecated: everything it states is on [[{successor}]].\n"
            metas[successors[0]]["supersedes"] = sorted(set(metas[successors[0]].get("supersedes") or []) | {page_id_for_path(path)})
            result.pages[path] = Action.RETIRED
            result.found.append(Found("duplicate", path, f"every statement is on {successors[0]}: deprecated, superseded by it"))
        else:
            body = bodies[path]
            for item, _ in items:
                body = remove_claim(Page(path, metas[path], body, pages[path].header_lines), item.label, item.text)
            if metas[path].get("sources") is not None:
                metas[path]["sources"] = cited_evidence(body)
            for successor in successors:
                body = add_related(body, f"- Also stated on [[{page_id_for_path(successor)}]].")
            bodies[path] = body
            result.pages[path] = Action.MERGED
        for successor in successors:
            bodies[successor] = add_related(bodies[successor], f"- Statements merged here from [[{page_id_for_path(path)}]].")
            result.pages.setdefault(successor, Action.CHANGED)
    for path, body in bodies.items():
        if body != pages[path].body or metas[path] != pages[path].meta:
            result.changes[path] = render_page(metas[path], body)
    return result
