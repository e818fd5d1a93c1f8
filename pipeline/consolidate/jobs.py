"""The offline consolidation jobs: pure functions from page texts to new page texts and findings.

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
from typing import TYPE_CHECKING, Any

from agents.offline.reviewer import conflicting_facts
from agents.offline.revision import is_verbatim
from ci.rules import factcheck
from ci.rules.grounding import check_claim
from ci.rules.indexes import ENTRY_RE
from ci.rules.page_grounding import summary_problems
from ci.snapshot import normalise_quote
from kb.markdown import FOOTDEF_RE, FOOTREF_RE, Claim, format_citation
from kb.page import Page, page_id_for_path, render_page
from kb.scopes import scope_for_path, visible_from
from pipeline.consolidate.view import Texts, span_key

if TYPE_CHECKING:
    from pipeline.consolidate.model import ModelJobs

Action = str  # verified | changed | merged | retired | qualified | disputed | kept


ISO_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def _numbers(text: str) -> set[str]:
    return {q.value for q in factcheck.quantities(text)}


def _negated(text: str) -> bool:
    return factcheck.negated(text)


@dataclass(frozen=True)
class Found:
    """One defect a job found, and whether it wrote a fix for it."""

    kind: str  # grounding | duplicate | similar-not-same | expired | conflict | link | l0 | index | oversized | tiny | l1
    path: str
    detail: str
    fixed: bool = True


@dataclass
class JobResult:
    changes: dict[str, str] = field(default_factory=dict)  # path -> new text
    found: list[Found] = field(default_factory=list)
    claims: dict[str, tuple[Action, str]] = field(default_factory=dict)  # "path#label" -> (action, reason)
    pages: dict[str, Action] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # what it could not do without a model


def claim_key(path: str, label: str) -> str:
    return f"{path}#{label}"


def _strip_refs(text: str) -> str:
    return " ".join(FOOTREF_RE.sub("", text).split())


def _norm_claim(text: str) -> str:
    return normalise_quote(_strip_refs(text)).lower().rstrip(".!?。！？ ")


def _raw_pattern(claim_text: str) -> re.Pattern[str]:
    """The claim as written in the body (it is stored with whitespace folded)."""
    return re.compile(r"\s+".join(re.escape(t) for t in claim_text.split()))


def _replace_once(body: str, claim_text: str, new: str) -> str | None:
    match = _raw_pattern(claim_text).search(body)
    if match is None:
        return None
    return body[: match.start()] + new + body[match.end() :]


def _current(page: Page) -> bool:
    return page.status != "deprecated" and page.meta.get("type") != "index"


def _section_of_line(page: Page, line: int) -> str:
    best = ""
    for section in page.structure.sections:
        if section.line <= line <= section.end_line and section.level == 2:
            best = section.title.strip()
    return best


def _set_page(page: Page, meta: dict[str, Any] | None = None, body: str | None = None) -> str:
    return render_page(meta if meta is not None else page.meta, body if body is not None else page.body)


# ---- re-verification ---------------------------------------------------------------------


@dataclass
class _Checked:
    claim: Claim
    problems: list[str]
    quotes: list[str]
    restatable: bool


def _check_claims(texts: Texts, page: Page, cites: dict[str, Any]) -> list[_Checked]:
    """Each claim of ``page`` against what it cites: the gate's grounding rules, the quote in its lines."""
    out = []
    for claim in page.structure.claims:
        checked = _Checked(claim, [], [], True)
        for label in claim.labels:
            cite = cites.get(label)
            lines = texts.view.evidence_lines(cite.evidence_id or "") if cite else None
            if cite is None or lines is None or cite.start < 1 or cite.end > len(lines):
                checked.problems.append(f"[^{label}] does not resolve to evidence lines")
                checked.restatable = False
                continue
            span = "\n".join(lines[cite.start - 1 : cite.end])
            if normalise_quote(cite.quote) not in normalise_quote(span):
                checked.problems.append(f"[^{label}] quote is not in {cite.evidence_id}#L{cite.start}-L{cite.end}")
                checked.restatable = False
            checked.quotes.append(cite.quote)
            checked.problems += [f"[^{label}] {p.message}" for p in check_claim(claim.text, cite.quote, span)]
        out.append(checked)
    return out


def _in_other_words(checked: _Checked) -> bool:
    """The gate passes it, and it says its quote in other words: only a model can tell whether
    the meaning held. A claim that holds each quote word for word (``Alice said: "…"``, the
    quote itself) is not in other words: what it adds around the quote is the gate's to check."""
    claim = checked.claim
    plain = _norm_claim(claim.text)
    return (
        not checked.problems
        and checked.restatable
        and bool(checked.quotes)
        and not claim.text.startswith("In the source: ")
        and not all(is_verbatim(claim, q) or _norm_claim(q) in plain for q in checked.quotes)
    )


def _ask_meaning(model: ModelJobs, texts: Texts, path: str, cites: dict[str, Any], todo: list[_Checked], result: JobResult) -> None:
    """The model's judgement of ``todo``; what it finds wrong becomes a problem of the claim."""
    asked = [
        (
            _strip_refs(c.claim.text),
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
        body = _restate(texts, path, page.body, cites, checked, result)
        if body != page.body:
            result.changes[path] = _set_page(page, body=body)
            result.pages[path] = "changed"
    if unchecked:
        result.skipped.append(f"{unchecked} claim(s) in other words than their quote: meaning not re-checked (needs a model)")
    return result


def _restate(texts: Texts, path: str, body: str, cites: dict[str, Any], checked: list[_Checked], result: JobResult) -> str:
    """Each claim with a problem restated as its quote, or reported for a person; the rest verified."""
    for c in checked:
        keys = [claim_key(path, label) for label in c.claim.labels]
        if not c.problems:
            for key in keys:
                result.claims.setdefault(key, ("verified", ""))
            continue
        kind = "meaning" if all(p.startswith("model: ") for p in c.problems) else "grounding"
        refs = "".join(f"[^{label}]" for label in c.claim.labels)
        restated = "In the source: " + " / ".join(f'"{q.strip()}"' for q in c.quotes) + "." + refs
        if c.restatable and not any(
            check_claim(restated, cites[label].quote, "\n".join(_span_lines(texts, cites[label]))) for label in c.claim.labels
        ):
            new_body = _replace_once(body, c.claim.text, restated)
            if new_body is not None:
                body = new_body
                result.found.append(Found(kind, path, f"line {c.claim.line}: {'; '.join(c.problems)}; restated from its evidence"))
                for key in keys:
                    result.claims[key] = ("changed", "restated from its evidence: " + "; ".join(c.problems))
                continue
        result.found.append(Found(kind, path, f"line {c.claim.line}: {'; '.join(c.problems)}; left for a person", fixed=False))
        for key in keys:
            result.claims[key] = ("kept", "unsupported, not fixable offline: " + "; ".join(c.problems))
    return body


def _span_lines(texts: Texts, cite: Any) -> list[str]:
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
            result.changes[path] = _set_page(page, body=body)
            result.pages[path] = "changed"
    return result


def _unlinked(plain: str) -> Callable[[re.Match[str]], str]:
    """A dead wikilink becomes its label, or its target's name, as plain text."""

    def replace(match: re.Match[str]) -> str:
        return match.group(1) or plain

    return replace


# ---- retirement --------------------------------------------------------------------------


def _history_insert(body: str, lines: list[str]) -> str:
    """``lines`` appended to the ``## History`` section (created before the footnotes)."""
    rows = body.splitlines()
    heading = next((i for i, r in enumerate(rows) if r.strip() == "## History"), None)
    if heading is None:
        first_def = next((i for i, r in enumerate(rows) if FOOTDEF_RE.match(r)), len(rows))
        while first_def > 0 and not rows[first_def - 1].strip():
            first_def -= 1
        rows[first_def:first_def] = ["", "## History", "", *lines]
    else:
        end = heading + 1
        while end < len(rows) and not rows[end].startswith("#") and not FOOTDEF_RE.match(rows[end]):
            end += 1
        while end > heading + 1 and not rows[end - 1].strip():
            end -= 1
        rows[end:end] = lines if rows[end - 1].strip() != "## History" else ["", *lines]
    return "\n".join(rows) + "\n"


def retire_expired(texts: Texts, paths: Iterable[str], today: str) -> JobResult:
    """Facts whose ``valid_to`` has passed but whose statement is still in a current section move
    to ``## History``; a page whose own ``valid_to`` has passed (events aside) is deprecated, so
    retrieval stops returning it as current. Nothing is deleted."""
    result = JobResult()
    for path in paths:
        page = texts.page(path)
        if page is None or not _current(page):
            continue
        valid_to = str(page.meta.get("valid_to") or "")
        if valid_to and valid_to[:10] < today and page.meta.get("type") != "event":
            meta = dict(page.meta) | {"status": "deprecated"}
            body = page.body.rstrip("\n") + f"\n\n> Deprecated: its validity ended on {valid_to[:10]}.\n"
            result.changes[path] = _set_page(page, meta, body)
            result.pages[path] = "retired"
            result.found.append(Found("expired", path, f"the page's validity ended on {valid_to[:10]}; deprecated"))
            for claim in page.structure.claims:
                for label in claim.labels:
                    result.claims[claim_key(path, label)] = ("retired", f"page validity ended {valid_to[:10]}")
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
                and _section_of_line(page, i + 1 + page.header_lines) not in ("History", "")
                and i not in drop
            ]
            if not hits:
                continue
            text = rows[hits[-1]].lstrip()[2:]
            drop.update(hits)
            moved.append(f"- {text} _(no longer current since {until})_")
            result.found.append(Found("expired", path, f"`{fact.get('key')}` = {fact.get('value')} ended {until}; moved to History"))
            result.claims[claim_key(path, str(fact["label"]))] = ("retired", f"no longer current since {until}; kept in History")
        if moved:
            body = "\n".join(r for i, r in enumerate(rows) if i not in drop) + "\n"
            result.changes[path] = _set_page(page, body=_history_insert(body, moved))
            result.pages[path] = "changed"
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


def stale_terms(page: Page) -> list[str]:
    """Names, numbers and dates of the L0 that the page's current text (title included) lacks."""
    current = (page.title + "\n" + _current_text(page)).lower()
    summary = page.summary
    terms = [m.group(0) for m in ISO_DATE_RE.finditer(summary)]
    terms += sorted(_numbers(ISO_DATE_RE.sub(" ", summary)))
    terms += _NAME_RE.findall(summary.split(" ", 1)[1] if " " in summary else "")
    return [t for t in dict.fromkeys(terms) if t.lower() not in current]


def _l0_faults(page: Page) -> list[str]:
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
        if page is None or not _current(page) or not page.summary:
            continue
        missing = _l0_faults(page)
        if not missing:
            continue
        current = [
            _strip_refs(c.text)
            for c in page.structure.claims
            if _section_of_line(page, c.line) not in ("History", "Overview") or _section_of_line(page, c.line) == ""
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
            faults = _l0_faults(Page(path, dict(page.meta) | {"summary": drafted}, page.body, page.header_lines)) if drafted else []
            if drafted and not faults:
                drafts.insert(0, drafted.split())
            else:
                problem = why or f"it states {', '.join(faults)}, which the page does not"
                result.found.append(Found("l0", path, f"the model's L0 was not used: {problem}", False))
        for words in drafts:
            candidate = " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")
            if not _l0_faults(Page(path, dict(page.meta) | {"summary": candidate}, page.body, page.header_lines)):
                summary = candidate
                break
        if not summary:
            result.found.append(Found("l0", path, f"L0 names {', '.join(missing)}; a rewrite from the claims would too", False))
            continue
        result.changes[path] = _set_page(page, dict(page.meta) | {"summary": summary})
        result.pages[path] = "changed"
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
    result.changes[index_path] = _set_page(index, body="\n".join(out_rows) + "\n")
    result.pages[index_path] = "changed"
    return result


# ---- duplicates --------------------------------------------------------------------------


def _signature(text: str) -> tuple[frozenset[str], frozenset[str], bool]:
    """What decides a statement's meaning beyond its words: its dates, numbers and negation."""
    plain = _strip_refs(text)
    dates = frozenset(m.group(0) for m in ISO_DATE_RE.finditer(plain))
    return dates, frozenset(_numbers(ISO_DATE_RE.sub(" ", plain))), _negated(plain)


@dataclass(frozen=True)
class _Stated:
    path: str
    label: str
    text: str
    spans: frozenset[str]
    quote: str = ""  # what the citation quotes of its span (one line may state several things)


def _stated_claims(page: Page) -> list[_Stated]:
    cites = {c.label: c for c in page.structure.citations if c.evidence_id}
    out = []
    for claim in page.structure.claims:
        if len(claim.labels) != 1 or claim.labels[0] not in cites or _section_of_line(page, claim.line) in ("History", "Overview"):
            continue
        cite = cites[claim.labels[0]]
        span = frozenset({span_key(cite.evidence_id or "", cite.start, cite.end)})
        out.append(_Stated(page.path, claim.labels[0], claim.text, span, normalise_quote(cite.quote).lower()))
    return out


def _references(body: str, ref: str) -> bool:
    return any(ref in row for row in body.splitlines() if not FOOTDEF_RE.match(row))


def _remove_claim(page: Page, label: str, claim_text: str) -> str:
    """The body without the claim carrying ``label`` (its bullets, or its sentence) and, when
    nothing else cites it, without its footnote definition."""
    ref = f"[^{label}]"
    rows = page.body.splitlines()
    body = "\n".join(r for r in rows if not (r.lstrip().startswith(("- ", "* ")) and FOOTREF_RE.findall(r) == [label])) + "\n"
    if _references(body, ref):
        body = _replace_once(body, claim_text, "") or body
    if not _references(body, ref):
        body = "\n".join(r for r in body.splitlines() if not r.startswith(f"{ref}:")) + "\n"
    return body


def _next_label(page_body: str) -> str:
    used = {int(m) for m in re.findall(r"\[\^(\d+)\]", page_body)}
    return str(max(used, default=0) + 1)


def _add_related(body: str, line: str) -> str:
    if line in body:
        return body
    rows = body.splitlines()
    first_def = next((i for i, r in enumerate(rows) if FOOTDEF_RE.match(r)), len(rows))
    while first_def > 0 and not rows[first_def - 1].strip():
        first_def -= 1
    heading = next((i for i, r in enumerate(rows) if r.strip() == "## Related"), None)
    if heading is not None:
        rows.insert(heading + 2 if heading + 1 < len(rows) and not rows[heading + 1].strip() else heading + 1, line)
    else:
        rows[first_def:first_def] = ["", "## Related", "", line]
    return "\n".join(rows) + "\n"


def _duplicate_groups(stated: dict[str, list[_Stated]], result: JobResult, model: ModelJobs | None = None) -> list[list[_Stated]]:
    """Statements that are the same fact: the same words, or the same quote of the same span with
    the same dates, numbers and negation (the same quote with a different one is reported, not
    grouped). A line that says several things is quoted differently by each statement it backs:
    those are different facts."""
    items = [i for group in stated.values() for i in group]
    parent = list(range(len(items)))

    def find(n: int) -> int:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    by_text: dict[str, int] = {}
    by_span: dict[tuple[frozenset[str], str], int] = {}
    for n, item in enumerate(items):
        text = _norm_claim(item.text)
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


NEAR = 0.5  # word overlap (Jaccard) from which two statements in other words are compared
MAX_POSTINGS = 200  # a word on more statements than this does not make two of them candidates
MAX_NEAR_PAIRS = 40  # pairs the model is asked about per batch; the rest are reported as skipped
_WORD_RE = re.compile(r"[^\W\d_]{3,}")
_STOP = frozenset("the and for are was were with that this from has have had not but you she her his they them their said".split())


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD_RE.findall(_strip_refs(text).lower()) if w not in _STOP)


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
    checks, why = model.sameness([(_strip_refs(items[a].text), _strip_refs(items[b].text)) for a, b in asked])
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
        if (page := texts.page(p)) is not None and _current(page) and str(page.meta.get("type", "")) not in VIEW_TYPES
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
            result.claims[claim_key(item.path, item.label)] = ("merged", f"stated on {page_id_for_path(canonical)} [^{keep.label}]")
            result.found.append(Found("duplicate", item.path, f"states what {canonical} states: {_strip_refs(item.text)[:80]}"))
            if item.spans <= spans_kept:
                continue
            spans_kept |= item.spans
            cite = next(c for c in pages[item.path].structure.citations if c.label == item.label)
            label = _next_label(bodies[canonical])
            bodies[canonical] = bodies[canonical].replace(f"[^{keep.label}]", f"[^{keep.label}][^{label}]", 1)
            bodies[canonical] = (
                bodies[canonical].rstrip("\n")
                + "\n"
                + format_citation(label, cite.evidence_id or "", cite.start, cite.end, cite.quote)
                + "\n"
            )
            metas[canonical]["sources"] = sorted(set(metas[canonical].get("sources") or []) | {cite.evidence_id or ""})
        result.claims.setdefault(claim_key(keep.path, keep.label), ("verified", ""))
    for path, items in sorted(removals.items()):
        left = {i.label for i in stated[path]} - {i.label for i, _ in items}
        successors = sorted({c for _, c in items})
        if not left and len(successors) == 1:  # nothing of its own left: deprecated, with its successor
            successor = page_id_for_path(successors[0])
            metas[path] |= {"status": "deprecated", "valid_to": today, "superseded_by": [successor]}
            bodies[path] = bodies[path].rstrip("\n") + f"\n\n> Deprecated: everything it states is on [[{successor}]].\n"
            metas[successors[0]]["supersedes"] = sorted(set(metas[successors[0]].get("supersedes") or []) | {page_id_for_path(path)})
            result.pages[path] = "retired"
            result.found.append(Found("duplicate", path, f"every statement is on {successors[0]}: deprecated, superseded by it"))
        else:
            body = bodies[path]
            for item, _ in items:
                body = _remove_claim(Page(path, metas[path], body, pages[path].header_lines), item.label, item.text)
            if metas[path].get("sources") is not None:
                metas[path]["sources"] = sorted({m.group(1) for m in re.finditer(r"^\[\^[^\]]+\]:\s*(ev-[0-9a-f]+)", body, re.M)})
            for successor in successors:
                body = _add_related(body, f"- Also stated on [[{page_id_for_path(successor)}]].")
            bodies[path] = body
            result.pages[path] = "merged"
        for successor in successors:
            bodies[successor] = _add_related(bodies[successor], f"- Statements merged here from [[{page_id_for_path(path)}]].")
            result.pages.setdefault(successor, "changed")
    for path, body in bodies.items():
        if body != pages[path].body or metas[path] != pages[path].meta:
            result.changes[path] = render_page(metas[path], body)
    return result


# ---- conflicts ---------------------------------------------------------------------------

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
    match = re.match(r"^(ev-[0-9a-f]+)#L(\d+)(?:-L?(\d+))?$", source.strip())
    if not match:
        return None
    lines = texts.view.evidence_lines(match.group(1))
    start, end = int(match.group(2)), int(match.group(3) or match.group(2))
    if lines is None or start < 1 or end > len(lines):
        return None
    return " ".join(lines[start - 1 : end])


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


@dataclass(frozen=True)
class _Fact:
    path: str
    index: int
    key: str
    about: str
    value: str
    source: str
    label: str


def current_conflicts(pages: Iterable[Page]) -> list[list[_Fact]]:
    """Groups of current facts (one per page) with one key and subject and different values."""
    by_key: dict[tuple[str, str], list[_Fact]] = {}
    for page in pages:
        if not _current(page):
            continue
        for n, fact in enumerate(page.meta.get("facts") or []):
            if not isinstance(fact, dict) or not fact.get("key") or ":" in str(fact["key"]) or fact.get("valid_to"):
                continue
            if fact.get("disputed_with"):  # qualified as disputed already: a person decides
                continue
            item = _Fact(
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
        conditions: dict[_Fact, str | None] = {}
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
                facts_of[fact.path][fact.index] |= {"key": f"{fact.key}:{_slug(cond)}", "condition": cond}
                page = texts.page(fact.path)
                claim = next((c for c in page.structure.claims if fact.label in c.labels), None) if page and fact.label else None
                if claim is not None and cond.lower() not in claim.text.lower():
                    plain = claim.text
                    refs = "".join(FOOTREF_RE.findall(plain) and [f"[^{x}]" for x in FOOTREF_RE.findall(plain)])
                    core = FOOTREF_RE.sub("", plain).rstrip()
                    end = core[-1] if core and core[-1] in ".!?。" else ""
                    new = f"{core[: len(core) - len(end)]} ({cond}){end}{refs}"
                    bodies[fact.path] = _replace_once(bodies[fact.path], plain, new) or bodies[fact.path]
                result.found.append(Found("conflict", fact.path, f"`{fact.key}` = {fact.value} holds {cond}; qualified"))
                if fact.label:
                    result.claims[claim_key(fact.path, fact.label)] = ("qualified", cond)
                result.pages[fact.path] = "qualified"
        else:
            for fact in group:
                others = [o for o in group if o is not fact]
                facts_of[fact.path][fact.index] |= {"disputed_with": sorted(page_id_for_path(o.path) for o in others)}
                metas[fact.path]["status"] = "disputed"
                names = ", ".join(f"[[{page_id_for_path(o.path)}]] ({o.value})" for o in others)
                note = f"> Disputed: `{fact.key}` is {fact.value} here and differs on {names}; the evidence does not say which holds."
                if note not in bodies[fact.path]:
                    bodies[fact.path] = _add_related(bodies[fact.path], note)
                result.found.append(Found("conflict", fact.path, f"`{fact.key}` = {fact.value} contradicts {names}; both kept, disputed"))
                if fact.label:
                    result.claims[claim_key(fact.path, fact.label)] = ("disputed", f"contradicts {names}")
                result.pages[fact.path] = "disputed"
        for path, facts in facts_of.items():
            metas[path]["facts"] = facts
    for page in pages:
        if metas[page.path] != page.meta or bodies[page.path] != page.body:
            result.changes[page.path] = render_page(metas[page.path], bodies[page.path])
    _one_page_conflicts(pages, result)
    return result


def _one_page_conflicts(pages: list[Page], result: JobResult) -> None:
    """Two current values of one fact on one page: no change is proposed (the Reviewer refuses
    any change to such a page); the facts' claims are recorded as disputed, for a person."""
    for page in pages:
        if not _current(page):
            continue
        for comment in conflicting_facts(page):
            key = re.search(r"`([^`]+)`", comment.message)
            labels = [
                str(f["label"])
                for f in page.meta.get("facts") or []
                if isinstance(f, dict) and key and str(f.get("key")) == key.group(1) and f.get("label") and not f.get("valid_to")
            ]
            detail = f"{comment.message.split(';')[0]} on this one page: both kept, for a person to decide (disputed)"
            result.found.append(Found("conflict", page.path, detail, fixed=False))
            for label in labels:
                result.claims[claim_key(page.path, label)] = ("disputed", detail)
            result.pages.setdefault(page.path, "disputed")
