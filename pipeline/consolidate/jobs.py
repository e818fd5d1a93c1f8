"""The per-page consolidation jobs: re-verification, links, retirement, L0s and index pages
(duplicates: ``dedupe``; contradictions: ``conflicts``; splits, tiny pages, L1s: ``structure``).

Each job reads ``Texts`` (the batch's base commit with the edits of the jobs before it) and
returns a ``JobResult``: the pages it rewrote, what it found, and what it did to each claim
(coverage actions). No job drops a cited span: a claim is restated, moved to History, merged
into the page that already states it, qualified, or marked disputed; a page is deprecated, not
deleted. What an offline job cannot decide it reports and leaves alone (``skipped``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agents.offline.revision import is_verbatim
from ci.rules.grounding import Cited, Evidence, Reader, check_statement
from ci.rules.indexes import ENTRY_RE
from ci.rules.page_grounding import summary_problems
from ci.snapshot import normalise_quote
from kb.markdown import FOOTDEF_RE, Citation, Claim
from kb.page import Page, page_id_for_path
from kb.scopes import scope_for_path, visible_from
from pipeline.consolidate.page_text import (
    ISO_DATE_RE,
    history_insert,
    is_current,
    norm_claim,
    numbers,
    replace_once,
    section_of_line,
    set_page,
    strip_refs,
)
from pipeline.consolidate.record import Action
from pipeline.consolidate.result import Found, JobResult, claim_key
from pipeline.consolidate.view import Texts

if TYPE_CHECKING:
    from pipeline.consolidate.model import ModelJobs


# ---- re-verification ---------------------------------------------------------------------


@dataclass
class _Checked:
    claim: Claim
    problems: list[str]
    quotes: list[str]
    restatable: bool
    cited: list[Cited] = field(default_factory=list)


def _cited(texts: Texts, cite: Citation) -> Cited | None:
    """``cite`` resolved as the gate resolves it: its lines, and whether the item is a
    conversation and when it was said (so the speakers and relative dates read as they did)."""
    lines = texts.view.evidence_lines(cite.evidence_id or "")
    entry = texts.view.evidence_entries.get(cite.evidence_id or "")
    if lines is None or entry is None or cite.start < 1 or cite.end > len(lines) or cite.end < cite.start:
        return None
    conversation = entry.kind in ("conversation", "trajectory")
    return Cited(cite.label, entry.id, cite.start, cite.end, cite.quote, tuple(lines), conversation, entry.date)


def _check_claims(texts: Texts, page: Page, cites: dict[str, Citation]) -> list[_Checked]:
    """Each claim of ``page`` read as the gate reads it (``check_statement`` over everything the
    claim cites, with the page's reader: a user's page knows the user's names), and each quote
    in its lines. A claim the gate merged is not flagged here by a narrower reading."""
    out = []
    reader = Reader.for_page(page)
    for claim in page.structure.claims:
        checked = _Checked(claim, [], [], True)
        resolved: list[Cited] = []
        for label in claim.labels:
            cite = cites.get(label)
            cited = _cited(texts, cite) if cite else None
            if cite is None or cited is None:
                checked.problems.append(f"[^{label}] does not resolve to evidence lines")
                checked.restatable = False
                continue
            if normalise_quote(cite.quote) not in normalise_quote(cited.span):
                checked.problems.append(f"[^{label}] quote is not in {cite.evidence_id}#L{cite.start}-L{cite.end}")
                checked.restatable = False
            checked.quotes.append(cite.quote)
            resolved.append(cited)
        checked.cited = resolved
        if resolved:
            refs = "".join(f"[^{c.label}]" for c in resolved)
            checked.problems += [f"{refs} {p.message}" for p in check_statement(claim.text, Evidence(resolved), reader)]
        out.append(checked)
    return out


def _in_other_words(checked: _Checked) -> bool:
    """The gate passes it, and it says its quote in other words: only a model can tell whether
    the meaning held. A claim that holds each quote word for word (``Alice said: "…"``, the
    quote itself) is not in other words: what it adds around the quote is the gate's to check."""
    claim = checked.claim
    plain = norm_claim(claim.text)
    return (
        not checked.problems
        and checked.restatable
        and bool(checked.quotes)
        and not claim.text.startswith("In the source: ")
        and not all(is_verbatim(claim, q) or norm_claim(q) in plain for q in checked.quotes)
    )


def _ask_meaning(model: ModelJobs, texts: Texts, path: str, cites: dict[str, Citation], todo: list[_Checked], result: JobResult) -> None:
    """The model's judgement of ``todo``; what it finds wrong becomes a problem of the claim."""
    asked = [
        (
            strip_refs(c.claim.text),
            " / ".join(c.quotes),
            "\n".join(line for label in c.claim.labels if label in cites for line in _span_lines(texts, cites[label])),
        )
        for c in todo
    ]
    checks, why = model.support(path, asked)
    if why:
        result.found.append(
            Found("meaning", path, f"model re-verification failed ({why}); {len(asked)} claim(s) kept as the gate left them", False)
        )
        return
    for number in sorted(set(checks) - set(range(1, len(asked) + 1))):
        result.found.append(Found("meaning", path, f"the model answered about claim {number}, not in the list: ignored", False))
    for number, checked in enumerate(todo, 1):
        check = checks.get(number)
        if check is None:
            result.found.append(
                Found("meaning", path, f"line {checked.claim.line}: the model gave no answer; kept as the gate left it", False)
            )
            continue
        faults = ([] if check.supported else ["not supported by its quote"]) + [f"lost {x}" for x in check.lost]
        faults += ["a guess stated as fact"] if check.guess_as_fact else []
        if faults:
            checked.problems.append(f"model: {'; '.join(faults)} ({check.reason})")


def regrounding(texts: Texts, paths: Iterable[str], model: ModelJobs | None = None) -> JobResult:
    """Every claim checked again against what it cites (the gate's grounding rules and the quote
    being in the cited lines; with a model, also whether the quote still supports the claim in
    its other words, with nothing lost and no guess stated as fact). An unsupported claim is
    restated as the quote it cites; one whose quote is not in its evidence cannot be restated
    and is reported, not kept silently. Offline, claims in other words than their quote are
    counted as not re-checked for meaning (``skipped``)."""
    result = JobResult()
    unchecked = 0
    for path in paths:
        page = texts.page(path)
        if page is None:
            continue
        cites = {c.label: c for c in page.structure.citations if c.evidence_id}
        checked = _check_claims(texts, page, cites)
        todo = [c for c in checked if _in_other_words(c)]
        if todo and model is None:
            unchecked += len(todo)
        elif todo and model is not None:
            _ask_meaning(model, texts, path, cites, todo, result)
        body = _restate(path, page.body, Reader.for_page(page), checked, result)
        if body != page.body:
            result.changes[path] = set_page(page, body=body)
            result.pages[path] = Action.CHANGED
    if unchecked:
        result.skipped.append(f"{unchecked} claim(s) in other words than their quote: meaning not re-checked (needs a model)")
    return result


def _restatement(c: _Checked) -> str:
    """The claim said again as the quotes it cites, attributed to their speaker when they are
    one person's words in a conversation (``Alice said: "…"``): restating never loses who said it."""
    refs = "".join(f"[^{label}]" for label in c.claim.labels)
    quoted = " / ".join(f'"{q.strip()}"' for q in c.quotes)
    speakers = {s for cited in c.cited for s in cited.speakers()}
    if len(speakers) == 1 and all(cited.conversation for cited in c.cited):
        return f"{speakers.pop()} said: {quoted}.{refs}"
    return f"In the source: {quoted}.{refs}"


def _restate(path: str, body: str, reader: Reader, checked: list[_Checked], result: JobResult) -> str:
    """Each claim with a problem restated as its quote, or reported for a person; the rest verified."""
    for c in checked:
        keys = [claim_key(path, label) for label in c.claim.labels]
        if not c.problems:
            for key in keys:
                result.claims.setdefault(key, (Action.VERIFIED, ""))
            continue
        kind = "meaning" if all(p.startswith("model: ") for p in c.problems) else "grounding"
        restated = _restatement(c)
        if c.restatable and not check_statement(restated, Evidence(c.cited), reader):
            new_body = replace_once(body, c.claim.text, restated)
            if new_body is not None:
                body = new_body
                result.found.append(Found(kind, path, f"line {c.claim.line}: {'; '.join(c.problems)}; restated from its evidence"))
                for key in keys:
                    result.claims[key] = (Action.CHANGED, "restated from its evidence: " + "; ".join(c.problems))
                continue
        result.found.append(Found(kind, path, f"line {c.claim.line}: {'; '.join(c.problems)}; left for a person", fixed=False))
        for key in keys:
            result.claims[key] = (Action.KEPT, "unsupported, not fixable offline: " + "; ".join(c.problems))
    return body


def _span_lines(texts: Texts, cite: Citation) -> list[str]:
    lines = texts.view.evidence_lines(cite.evidence_id or "") or []
    return list(lines[cite.start - 1 : cite.end])


# ---- links -------------------------------------------------------------------------------


def repair_links(texts: Texts, paths: Iterable[str], all_ids: set[str]) -> JobResult:
    """Broken links: retarget to the one page of the same name the reader may see, drop an anchor
    the target does not have, or else unlink (the text stays, the dead link goes)."""
    result = JobResult()
    for path in paths:
        page = texts.page(path)
        if page is None:
            continue
        body = page.body
        scope = scope_for_path(path)
        for link in page.structure.links:
            if link.kind != "wiki":
                continue
            target = link.target.removesuffix(".md")
            old = f"[[{link.target}" + (f"#{link.anchor}" if link.anchor else "")
            if target in all_ids:
                if link.anchor:
                    other = texts.page(target + ".md")
                    if other is not None and link.anchor not in other.structure.anchors:
                        body = body.replace(old, f"[[{link.target}", 1)
                        result.found.append(Found("link", path, f"[[{target}#{link.anchor}]]: no such section; anchor dropped"))
                continue
            name = target.rsplit("/", 1)[-1]
            candidates = sorted(i for i in all_ids if i.rsplit("/", 1)[-1] == name and visible_from(scope, scope_for_path(i + ".md")))
            if len(candidates) == 1:
                body = body.replace(old, f"[[{candidates[0]}" + (f"#{link.anchor}" if link.anchor else ""), 1)
                result.found.append(Found("link", path, f"[[{target}]] pointed nowhere; retargeted to [[{candidates[0]}]]"))
            else:
                pattern = re.compile(re.escape(old) + r"(?:\|([^\]\n]*))?\]\]")
                body = pattern.sub(_unlinked(target.rsplit("/", 1)[-1].replace("-", " ")), body, count=1)
                result.found.append(Found("link", path, f"[[{target}]] pointed nowhere; unlinked ({len(candidates)} candidate pages)"))
        if body != page.body:
            result.changes[path] = set_page(page, body=body)
            result.pages[path] = Action.CHANGED
    return result


def _unlinked(plain: str) -> Callable[[re.Match[str]], str]:
    """A dead wikilink becomes its label, or its target's name, as plain text."""

    def replace(match: re.Match[str]) -> str:
        return match.group(1) or plain

    return replace


# ---- retirement --------------------------------------------------------------------------


def retire_expired(texts: Texts, paths: Iterable[str], today: str) -> JobResult:
    """Facts whose ``valid_to`` has passed but whose statement is still in a current section move
    to ``## History``; a page whose own ``valid_to`` has passed (events aside) is deprecated, so
    retrieval stops returning it as current. Nothing is deleted."""
    result = JobResult()
    for path in paths:
        page = texts.page(path)
        if page is None or not is_current(page):
            continue
        valid_to = str(page.meta.get("valid_to") or "")
        if valid_to and valid_to[:10] < today and page.meta.get("type") != "event":
            meta = dict(page.meta) | {"status": "deprecated"}
            body = page.body.rstrip("\n") + f"\n\n> Deprecated: its validity ended on {valid_to[:10]}.\n"
            result.changes[path] = set_page(page, meta, body)
            result.pages[path] = Action.RETIRED
            result.found.append(Found("expired", path, f"the page's validity ended on {valid_to[:10]}; deprecated"))
            for claim in page.structure.claims:
                for label in claim.labels:
                    result.claims[claim_key(path, label)] = (Action.RETIRED, f"page validity ended {valid_to[:10]}")
            continue
        rows = page.body.splitlines()
        moved: list[str] = []
        drop: set[int] = set()
        for fact in page.meta.get("facts") or []:
            if not isinstance(fact, dict) or not fact.get("label") or not fact.get("valid_to"):
                continue
            until = str(fact["valid_to"])[:10]
            if until > today:
                continue
            ref = f"[^{fact['label']}]"
            hits = [
                i
                for i, row in enumerate(rows)
                if row.lstrip().startswith(("- ", "* "))
                and ref in row
                and section_of_line(page, i + 1 + page.header_lines) not in ("History", "")
                and i not in drop
            ]
            if not hits:
                continue
            text = rows[hits[-1]].lstrip()[2:]
            drop.update(hits)
            moved.append(f"- {text} _(no longer current since {until})_")
            result.found.append(Found("expired", path, f"`{fact.get('key')}` = {fact.get('value')} ended {until}; moved to History"))
            result.claims[claim_key(path, str(fact["label"]))] = (Action.RETIRED, f"no longer current since {until}; kept in History")
        if moved:
            body = "\n".join(r for i, r in enumerate(rows) if i not in drop) + "\n"
            result.changes[path] = set_page(page, body=history_insert(body, moved))
            result.pages[path] = Action.CHANGED
    return result


# ---- L0 ----------------------------------------------------------------------------------

_NAME_RE = re.compile(r"\b[A-Z][\w'-]{2,}\b")


def _current_text(page: Page) -> str:
    rows = []
    section = ""
    for row in page.body.splitlines():
        if row.startswith("## "):
            section = row[3:].strip()
        if section != "History" and not FOOTDEF_RE.match(row):
            rows.append(row)
    return "\n".join(rows)


# How kb's memory writer counts a page's own entries in its L0 ("What Ann said about travel
# (12 statements).", "... newest first (31 entries)."): a count of the page, not a claim about
# the world, so not a number the page must state; the writer updates it on each ingest, and a
# rewrite here would only be undone by the next one.
_COUNT_RE = re.compile(r"\(\d+ (?:statements|entries)\)|\b\d+ statements\.$")


def stale_terms(page: Page) -> list[str]:
    """Names, numbers and dates of the L0 that the page's current text (title included) lacks."""
    current = (page.title + "\n" + _current_text(page)).lower()
    summary = _COUNT_RE.sub(" ", page.summary)
    terms = [m.group(0) for m in ISO_DATE_RE.finditer(summary)]
    terms += sorted(numbers(ISO_DATE_RE.sub(" ", summary)))
    terms += _NAME_RE.findall(summary.split(" ", 1)[1] if " " in summary else "")
    return [t for t in dict.fromkeys(terms) if t.lower() not in current]


def l0_faults(page: Page) -> list[str]:
    """What is wrong with the L0: names, numbers and dates the page's current text lacks, and
    what the gate's ``grounding.summary`` finds unstated by the page's cited claims."""
    terms = stale_terms(page)
    return terms + [p for p in summary_problems(page) if not any(repr(t) in p for t in terms)]


def rewrite_l0(texts: Texts, paths: Iterable[str], max_words: int = 40, model: ModelJobs | None = None) -> JobResult:
    """An L0 that names what its page no longer says is rewritten: by the model when one is
    configured (its draft used only if the checks find nothing in it the page does not state),
    else from the page's first current claim."""
    result = JobResult()
    for path in paths:
        page = texts.page(path)
        if page is None or not is_current(page) or not page.summary:
            continue
        missing = l0_faults(page)
        if not missing:
            continue
        current = [
            strip_refs(c.text)
            for c in page.structure.claims
            if section_of_line(page, c.line) not in ("History", "Overview") or section_of_line(page, c.line) == ""
        ]
        if not current:
            result.found.append(
                Found("l0", path, f"L0 names {', '.join(missing)}, absent from the page; no current claim to rewrite it from", False)
            )
            continue
        summary = ""
        drafts = [f"{page.title}: {current[0]}".split(), current[0].split()]
        if model is not None:
            drafted, why = model.summary(path, page.title, page.summary, current[:30])
            faults = l0_faults(Page(path, dict(page.meta) | {"summary": drafted}, page.body, page.header_lines)) if drafted else []
            if drafted and not faults:
                drafts.insert(0, drafted.split())
            else:
                problem = why or f"it states {', '.join(faults)}, which the page does not"
                result.found.append(Found("l0", path, f"the model's L0 was not used: {problem}", False))
        for words in drafts:
            candidate = " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")
            if not l0_faults(Page(path, dict(page.meta) | {"summary": candidate}, page.body, page.header_lines)):
                summary = candidate
                break
        if not summary:
            result.found.append(Found("l0", path, f"L0 names {', '.join(missing)}; a rewrite from the claims would too", False))
            continue
        result.changes[path] = set_page(page, dict(page.meta) | {"summary": summary})
        result.pages[path] = Action.CHANGED
        result.found.append(Found("l0", path, f"L0 named {', '.join(missing)}, no longer on the page; rewritten"))
    return result


# ---- index pages -------------------------------------------------------------------------


def regenerate_index(texts: Texts, folder: str) -> JobResult:
    """``folder``'s index lists exactly its children, each with its current L0; entries already
    right are kept as written, others rewritten, missing ones added, extra ones removed."""
    result = JobResult()
    index_path = f"{folder}/index.md"
    children = {page_id_for_path(p): texts.page(p) for p in texts.children(folder)}
    index = texts.page(index_path)
    if index is None:
        return result
    rows = index.body.splitlines()
    kept: list[str] = []
    seen: set[str] = set()
    first_entry: int | None = None
    out_rows: list[str] = []
    for row in rows:
        match = ENTRY_RE.match(row)
        if not match:
            out_rows.append(row)
            continue
        if first_entry is None:
            first_entry = len(out_rows)
        target = match.group(1).strip().removesuffix(".md")
        child = children.get(target)
        if child is None or target in seen:
            result.found.append(Found("index", index_path, f"removed the entry for `{target}` (not a page of {folder}/, or listed twice)"))
            continue
        seen.add(target)
        if child.summary and normalise_quote(child.summary) not in normalise_quote(match.group(2)):
            result.found.append(Found("index", index_path, f"the entry for `{target}` did not show its L0; rewritten"))
            row = f"- [[{target}]]: {child.summary}"
        kept.append(row)
    for child_id, child in sorted(children.items()):
        if child_id not in seen and child is not None:
            kept.append(f"- [[{child_id}]]: {child.summary}")
            result.found.append(Found("index", index_path, f"`{child_id}` was missing from the index; listed"))
    if not result.found:
        return result
    if first_entry is None:
        while out_rows and not out_rows[-1].strip():
            out_rows.pop()
        out_rows += ["", "## Pages", ""]
        first_entry = len(out_rows)
    out_rows[first_entry:first_entry] = kept
    result.changes[index_path] = set_page(index, body="\n".join(out_rows) + "\n")
    result.pages[index_path] = Action.CHANGED
    return result
