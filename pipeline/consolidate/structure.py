"""Structure upkeep beyond L0s, indexes and links: oversized pages split by their sections,
tiny pages merged into the sibling about the same subject, and L1 outlines that no longer match
their page's sections rebuilt. Offline and deterministic, like the other jobs; none drops a
cited span: a split moves each claim with its citation, verbatim, to a child page; a merge copies
the tiny page's claims with their citations into its sibling and deprecates it with a pointer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agents.offline.document_writer import REMOVED
from agents.offline.document_writer import outline_entries as _outline_entries
from agents.offline.document_writer import outline_links as _outline
from agents.offline.document_writer import page_sections as _sections
from kb.citations import cited_evidence
from kb.markdown import FOOTDEF_RE, FOOTREF_RE, Claim
from kb.page import Page, page_id_for_path, parse_page, render_page
from kb.scopes import scope_for_path
from kb.tokens import count_tokens
from pipeline.consolidate.conflicts import current_conflicts
from pipeline.consolidate.jobs import l0_faults
from pipeline.consolidate.page_text import add_related, is_current, next_label, section_of_line, set_page, slug, strip_refs
from pipeline.consolidate.record import Action
from pipeline.consolidate.result import Found, JobResult, claim_key
from pipeline.consolidate.view import Texts, folder_of, root_of

OVERVIEW = "Overview"
# Sections that stay on a split page (they are about the page, not a part of its subject).
KEPT_SECTIONS = frozenset({OVERVIEW, "Introduction", "History", "Related", REMOVED})
# Pages that are never split or merged into a sibling: listings, a person's cards and dated
# views, entities, and events (each is one dated happening: two are not one page's sections).
NOT_MERGED = frozenset({"index", "profile", "timeline", "entity", "event"})
_OUTLINE_ROW = re.compile(r"^\s*- (?:\[[^\]]*\]\(#[^)]*\)|… and \d+ more sections below\.)\s*$")
_OUTLINE_LEAD = "Sections of this page:"


def _rows_of_h2(page: Page) -> list[tuple[str, str, int, int]]:
    """(title, anchor, first row, end row exclusive) of each level-2 section, as body rows; a
    section ends at the next level-2 heading or the first footnote definition."""
    rows = page.body.splitlines()
    first_def = next((i for i, r in enumerate(rows) if FOOTDEF_RE.match(r)), len(rows))
    heads = [(s.title.strip(), s.anchor, s.line - page.header_lines - 1) for s in page.structure.sections if s.level == 2]
    out = []
    for n, (title, anchor, start) in enumerate(heads):
        end = heads[n + 1][2] if n + 1 < len(heads) else first_def
        out.append((title, anchor, start, min(end, first_def) if start < first_def else end))
    return out


def _defs(page: Page) -> dict[str, str]:
    return {m.group(1): row for row in page.body.splitlines() if (m := FOOTDEF_RE.match(row))}


def _labels(rows: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(label for row in rows if not FOOTDEF_RE.match(row) for label in FOOTREF_RE.findall(row)))


def _sources(defs: Iterable[str]) -> list[str]:
    return cited_evidence("\n".join(defs))


def built_l0(path: str, meta: dict[str, Any], body: str, max_words: int = 40) -> str:
    """An L0 as ``rewrite_l0`` builds one offline: ``title: first claim`` (or the first claim)
    within ``max_words``, the first the checks find nothing unstated in; else the title."""
    page = Page(path, dict(meta) | {"summary": meta.get("title", "")}, body, 0)
    claims = [strip_refs(c.text) for c in page.structure.claims if section_of_line(page, c.line) not in ("History", OVERVIEW)]
    for words in [f"{meta['title']}: {claims[0]}".split(), claims[0].split()] if claims else []:
        candidate = " ".join(words[:max_words]) + (" …" if len(words) > max_words else "")
        if not l0_faults(Page(path, dict(meta) | {"summary": candidate}, body, 0)):
            return candidate
    return f"{meta['title']}."


def _all_paths(texts: Texts) -> list[str]:
    return sorted(set(texts.view.files) | set(texts.edits))


def _unique_path(folder: str, name: str, taken: set[str]) -> str:
    path = f"{folder}/{name}.md"
    n = 2
    while path in taken:
        path = f"{folder}/{name}-{n}.md"
        n += 1
    taken.add(path)
    return path


# ---- split oversized pages ---------------------------------------------------------------


def split_oversized(
    texts: Texts,
    paths: Iterable[str],
    max_tokens: int,
    frozen: frozenset[str] = frozenset(),
    l1_tokens: int = 2000,
    max_lines: int | None = None,
) -> JobResult:
    """A current page whose body is over ``max_tokens`` is split by its level-2 sections (all
    but Overview, Introduction, History, Related and removed claims) into child pages in its
    folder, ids ``<page>-<section>``: each child holds its section with its claims and their
    citations verbatim (and the page's ``facts`` those cite). The page stays, short: its Overview
    lists the children, so links to it still resolve; links elsewhere in its scope to a moved
    section (``[[page#section]]``) are retargeted to the child. A page with fewer than two such
    sections is reported, not split; so is one whose split would write a ``frozen`` page (one
    withdrawn after a review). A part over ``l1_tokens`` opens with an Overview outlining its
    sections, as the budgets rule asks of a long page."""
    result = JobResult()
    taken = set(_all_paths(texts))
    for path in paths:
        page = texts.page(path)
        if page is None or not is_current(page) or str(page.meta.get("type")) in NOT_MERGED:
            continue
        tokens = count_tokens(page.body)
        if tokens <= max_tokens:
            continue
        sections = _rows_of_h2(page)
        parts = [s for s in sections if s[0] not in KEPT_SECTIONS]
        if len(parts) < 2:
            result.found.append(
                Found(
                    "oversized",
                    path,
                    f"{tokens} tokens (budget {max_tokens}) in {len(parts)} section(s) of its own: left for a person",
                    False,
                )
            )
            continue
        now = _fitting(parts, max_lines)
        split = JobResult()
        more = _split(texts, page, (tokens, max_tokens, l1_tokens), sections, now, taken, split, frozen, len(parts) - len(now))
        if set(split.changes) & frozen:
            result.found.append(
                Found("oversized", path, f"{tokens} tokens (budget {max_tokens}): its split was withdrawn after review", False)
            )
            continue
        for name in ("changes", "claims", "pages"):
            getattr(result, name).update(getattr(split, name))
        result.found += split.found
        result.again = result.again or more
    return result


# What a part costs besides its rows: the child's header, title, citations and Related line,
# and the parent's listing, L0 and index entry.
_PART_OVERHEAD = 30


def _fitting(parts: list[tuple[str, str, int, int]], max_lines: int | None) -> list[tuple[str, str, int, int]]:
    """The first ``parts`` whose move fits in ``max_lines`` diff lines (at least one)."""
    if max_lines is None:
        return parts
    out: list[tuple[str, str, int, int]] = []
    used = 0
    for part in parts:
        cost = 2 * (part[3] - part[2]) + _PART_OVERHEAD
        if out and used + cost > max_lines:
            break
        out.append(part)
        used += cost
    return out


_SPLIT_LEAD = "This page was split into parts (it was over the page budget):"
_MORE_RE = re.compile(r"^\d+ more section\(s\) of this page will move to parts of their own\.$")


def _listed_parts(page: Page) -> list[str]:
    """The part rows (``- [[child]]: L0``) an earlier pass of the split wrote in the Overview."""
    overview = page.overview() or ""
    if _SPLIT_LEAD not in overview:
        return []
    prefix = f"- [[{page_id_for_path(page.path)}-"
    return [row for row in overview.splitlines() if row.startswith(prefix)]


def _earlier_titles(page: Page) -> list[str]:
    """The part titles an earlier pass named in the L0 (``<title>, in parts: a, b.``)."""
    lead = f"{page.title}, in parts: "
    summary = str(page.summary or "")
    if not _listed_parts(page) or not summary.startswith(lead):
        return []
    return [t for t in summary[len(lead) :].rstrip(".").split(", ") if t]


def _child(page: Page, child_path: str, title: str, content: list[str], l1_tokens: int) -> tuple[str, list[str]]:
    """The text of the child page holding ``content`` (a section of ``page``), and its labels."""
    defs = _defs(page)
    labels = _labels(content)
    child_defs = [defs[label] for label in labels if label in defs]
    child_title = f"{page.title}: {title}"
    if count_tokens("\n".join(content + child_defs)) > l1_tokens:  # the budgets rule wants an Overview
        outline = _outline(_outline_entries(_sections(content)))
        content = [f"## {OVERVIEW}", "", _OUTLINE_LEAD, "", *outline, "", *content]
    body = "\n".join([f"# {child_title}", "", *content, "", *child_defs]) + "\n"
    body = add_related(body, f"- Part of [[{page_id_for_path(page.path)}]].")
    meta: dict[str, Any] = {
        "id": page_id_for_path(child_path),
        "type": page.meta.get("type", "fact"),
        "title": child_title,
        "summary": "",
        "scope": page.meta.get("scope", scope_for_path(page.path)),
        "status": "active",
    }
    meta |= {key: page.meta[key] for key in ("valid_from", "valid_to") if page.meta.get(key)}
    meta["sources"] = _sources(child_defs)
    own_facts = [f for f in page.meta.get("facts") or [] if isinstance(f, dict) and str(f.get("label") or "") in labels]
    if own_facts:
        meta["facts"] = own_facts
    meta["summary"] = built_l0(child_path, meta, body)
    return render_page(meta, body), labels


def _parent_body(page: Page, sections: list[tuple[str, str, int, int]], moved_rows: set[int], listing: list[str]) -> tuple[str, list[str]]:
    """``page`` without its moved rows, its Overview listing the parts (its outline of moved
    sections dropped), with the citations still used; and those labels."""
    rows = page.body.splitlines()
    kept = [r for i, r in enumerate(rows) if i not in moved_rows and not FOOTDEF_RE.match(r)]
    overview = next((s for s in sections if s[0] == OVERVIEW), None)
    if overview is not None:
        earlier = set(_listed_parts(page))
        old = [
            r
            for r in rows[overview[2] + 1 : overview[3]]
            if not _OUTLINE_ROW.match(r) and r.strip() not in (_OUTLINE_LEAD, _SPLIT_LEAD) and r not in earlier and not _MORE_RE.match(r)
        ]
        while old and not old[0].strip():
            old.pop(0)
        old = [r for i, r in enumerate(old) if r.strip() or (i and old[i - 1].strip())]
        while old and not old[-1].strip():
            old.pop()
        at = kept.index(rows[overview[2]])
        kept[at : at + (overview[3] - overview[2])] = [
            f"## {OVERVIEW}",
            "",
            *old,
            *([""] if any(r.strip() for r in old) else []),
            *listing,
            "",
        ]
    else:
        heading = next((i for i, r in enumerate(kept) if r.startswith("# ")), -1)
        kept[heading + 1 : heading + 1] = ["", f"## {OVERVIEW}", "", *listing, ""]
    while kept and not kept[-1].strip():
        kept.pop()
    left = _labels(kept)
    defs = _defs(page)
    parent_defs = [defs[label] for label in left if label in defs]
    body = "\n".join(kept) + "\n" + ("\n" + "\n".join(parent_defs) + "\n" if parent_defs else "")
    return re.sub(r"\n{3,}", "\n\n", body), left


def _split(
    texts: Texts,
    page: Page,
    budget: tuple[int, int, int],  # the page's tokens, the page budget, the L1 budget
    sections: list[tuple[str, str, int, int]],
    parts: list[tuple[str, str, int, int]],
    taken: set[str],
    result: JobResult,
    frozen: frozenset[str],
    remaining: int = 0,
) -> bool:
    """Writes the split into ``result``; True when sections that still overflow are left for a next part."""
    path, parent_id = page.path, page_id_for_path(page.path)
    tokens, max_tokens, l1_tokens = budget
    rows = page.body.splitlines()
    moved_anchor: dict[str, str] = {}  # anchor on the parent -> child id (with its own anchor when a subsection)
    children: list[tuple[str, str]] = []  # (child id, its L0)
    moved_rows: set[int] = set()
    for title, anchor, start, end in parts:
        child_path = _unique_path(folder_of(path), f"{path.rsplit('/', 1)[-1][:-3]}-{slug(title) or 'part'}", taken)
        child_id = page_id_for_path(child_path)
        content = rows[start:end]
        while content and not content[-1].strip():
            content.pop()
        result.changes[child_path], labels = _child(page, child_path, title, content, l1_tokens)
        children.append((child_id, str(parse_page(result.changes[child_path], child_path).summary)))
        moved_rows.update(range(start, end))
        for section in page.structure.sections:
            if start <= section.line - page.header_lines - 1 < end:
                moved_anchor[section.anchor] = child_id if section.anchor == anchor else f"{child_id}#{section.anchor}"
        for label in labels:
            result.claims[claim_key(path, label)] = (Action.CHANGED, f"moved with its citation to {child_id} (page split)")
    earlier = _listed_parts(page)
    listing = [_SPLIT_LEAD, "", *earlier, *(f"- [[{c}]]: {l0}" for c, l0 in children)]
    body, left = _parent_body(page, sections, moved_rows, listing)
    if remaining and count_tokens(body) <= max_tokens:
        remaining = 0  # what is left fits the page budget: it stays here
    if remaining:
        listing += ["", f"{remaining} more section(s) of this page will move to parts of their own."]
        body, left = _parent_body(page, sections, moved_rows, listing)
    meta = dict(page.meta)
    if "sources" in meta:
        meta["sources"] = _sources(line for line in body.splitlines() if FOOTDEF_RE.match(line))
    facts = [f for f in page.meta.get("facts") or [] if isinstance(f, dict) and str(f.get("label") or "") in left]
    meta.pop("facts", None)
    if facts:
        meta["facts"] = facts
    titles = [*_earlier_titles(page), *(title for title, *_ in parts)]
    l0 = f"{page.title}, in parts: {', '.join(titles)}."
    if not l0_faults(Page(path, meta | {"summary": l0}, body, 0)):  # the old L0 may name what moved
        meta["summary"] = l0
    result.changes[path] = render_page(meta, body)
    result.pages[path] = Action.CHANGED
    rest = f"; {remaining} more section(s) in the next part" if remaining else ""
    result.found.append(
        Found("oversized", path, f"{tokens} tokens (budget {max_tokens}): split into {', '.join(c for c, _ in children)}{rest}")
    )
    _retarget_links(texts, root_of(path), parent_id, moved_anchor, result, frozen)
    return bool(remaining)


def _retarget_links(texts: Texts, root: str, target_id: str, moved: dict[str, str], result: JobResult, frozen: frozenset[str]) -> None:
    """Links in ``root`` (but on ``frozen`` pages) to a section of ``target_id`` that moved
    (``moved``: anchor -> new target) point to where it went."""
    for path in _all_paths(texts):
        if root_of(path) != root or path in frozen:
            continue
        text = result.changes.get(path) or texts.text(path)
        if text is None:
            continue
        new = text
        for anchor, to in moved.items():
            new = re.sub(rf"\[\[{re.escape(target_id)}(?:\.md)?#{re.escape(anchor)}(?=[\]|])", f"[[{to}", new)
        if new != text:
            result.changes[path] = new
            result.pages.setdefault(path, Action.CHANGED)
            result.found.append(Found("link", path, f"links to moved sections of [[{target_id}]] retargeted to its parts"))


# ---- merge tiny pages --------------------------------------------------------------------

_TITLE_WORD = re.compile(r"[^\W_]+")
_GENERIC = frozenset("a an the of and or for to in on at about notes note page misc other more".split())


def subject_words(page: Page) -> frozenset[str]:
    """The words of a page's title and file name that say what it is about."""
    name = page.path.rsplit("/", 1)[-1][:-3].replace("-", " ").replace("_", " ")
    return frozenset(w for w in _TITLE_WORD.findall(f"{page.title} {name}".lower()) if w not in _GENERIC)


def _own_claims(page: Page) -> list[Claim]:
    """Cited claims in the page's current sections (not Overview, History or Related)."""
    return [c for c in page.structure.claims if c.labels and section_of_line(page, c.line) not in (OVERVIEW, "History", "Related")]


def merge_tiny(texts: Texts, paths: Iterable[str], max_claims: int, today: str, frozen: frozenset[str] = frozenset()) -> JobResult:
    """A current page with at most ``max_claims`` cited claims (not an index, profile, timeline,
    entity or event page) is merged into the one sibling in its folder of the same type that has more
    claims and whose subject words hold all of its own (or whose own are all in its): its claim
    lines go under a section named after it, with their citations (relabelled, quotes verbatim)
    and the facts they back; it is deprecated, ``superseded_by`` that sibling, and links to it in
    its scope (but ``frozen`` ones) are retargeted. Pages whose facts contradict are never merged; no or several
    candidate siblings: left alone."""
    result = JobResult()
    if max_claims < 1:
        return result
    paths = list(paths)
    pages = {p: page for p in paths if (page := texts.page(p)) is not None and is_current(page)}
    merged_away: set[str] = set()
    targets: set[str] = set()
    bodies: dict[str, str] = {}
    metas: dict[str, dict[str, Any]] = {}
    for path, page in sorted(pages.items()):
        kind = str(page.meta.get("type", ""))
        claims = _own_claims(page)
        if kind in NOT_MERGED or page.status != "active" or not claims or len(claims) > max_claims or path in targets:
            continue
        words = subject_words(page)
        siblings = [
            other
            for o, other in sorted(pages.items())
            if o != path
            and folder_of(o) == folder_of(path)
            and o not in merged_away
            and other.status == "active"
            and str(other.meta.get("type", "")) == kind
            and len(_own_claims(other)) > len(claims)
            and words
            and (words <= subject_words(other) or subject_words(other) <= words)
            and not current_conflicts([page, other])
        ]
        if len(siblings) != 1:
            if len(siblings) > 1:
                names = ", ".join(s.path for s in siblings)
                result.found.append(
                    Found("tiny", path, f"{len(claims)} claim(s); several siblings on its subject ({names}): not merged", False)
                )
            continue
        target = siblings[0]
        bodies.setdefault(target.path, target.body)
        metas.setdefault(target.path, dict(target.meta))
        _merge_into(page, claims, target.path, bodies, metas, result)
        metas[path] = dict(page.meta) | {"status": "deprecated", "valid_to": today, "superseded_by": [page_id_for_path(target.path)]}
        bodies[path] = page.body.rstrip("\n") + f"\n\n> Deprecated: merged into [[{page_id_for_path(target.path)}]].\n"
        merged_away.add(path)
        targets.add(target.path)
        result.pages[path] = Action.MERGED
        result.pages.setdefault(target.path, Action.CHANGED)
        result.found.append(Found("tiny", path, f"{len(claims)} claim(s): merged into {target.path}, deprecated"))
    for path in sorted(bodies):
        result.changes[path] = render_page(metas[path], bodies[path])
    for path in sorted(merged_away):
        successor = page_id_for_path(str(metas[path]["superseded_by"][0]))
        _retarget_page_links(texts, root_of(path), page_id_for_path(path), successor, merged_away | frozen, result)
    return result


def _merge_into(
    page: Page, claims: list[Claim], target: str, bodies: dict[str, str], metas: dict[str, dict[str, Any]], result: JobResult
) -> None:
    """``page``'s claim rows appended to ``target`` under ``## <its title>``, labels renumbered."""
    rows = page.body.splitlines()
    defs = _defs(page)
    wanted = {c.line - page.header_lines - 1 for c in claims}
    lines: list[str] = []
    for title, _, start, end in _rows_of_h2(page) or [("", "", 0, len(rows))]:
        if title in (OVERVIEW, "History", "Related"):
            continue
        block = [r for r in rows[start + 1 : end] if r.strip() and not r.startswith("#") and not FOOTDEF_RE.match(r)]
        if any(start < w < end for w in wanted) or not title:
            lines += block
    if not lines:  # claims outside any section: their own rows
        lines = [rows[w] for w in sorted(wanted)]
    relabel: dict[str, str] = {}
    body = bodies[target]
    new_defs = []
    for label in _labels(lines):
        if label not in defs:
            continue
        new = next_label(body + "\n" + "\n".join(f"[^{x}]" for x in relabel.values()))
        relabel[label] = new
        new_defs.append(f"[^{new}]:" + defs[label].split(":", 1)[1])  # the citation as written, relabelled
    moved = [FOOTREF_RE.sub(lambda m: f"[^{relabel.get(m.group(1), m.group(1))}]", r) for r in lines]
    body_rows = body.splitlines()
    at = next((i for i, r in enumerate(body_rows) if r.strip() in ("## History", "## Related") or FOOTDEF_RE.match(r)), len(body_rows))
    while at > 0 and not body_rows[at - 1].strip():
        at -= 1
    body_rows[at:at] = ["", f"## {page.title}", "", *moved, ""]
    body = "\n".join(body_rows).rstrip("\n") + "\n" + "\n".join(new_defs) + "\n"
    bodies[target] = add_related(re.sub(r"\n{3,}", "\n\n", body), f"- Statements merged here from [[{page_id_for_path(page.path)}]].")
    meta = metas[target]
    if "sources" in meta or new_defs:
        meta["sources"] = sorted(set(meta.get("sources") or []) | set(_sources(new_defs)))
    facts = [
        dict(f) | {"label": relabel[str(f.get("label"))]}
        for f in page.meta.get("facts") or []
        if isinstance(f, dict) and str(f.get("label")) in relabel
    ]
    if facts:
        meta["facts"] = [*(meta.get("facts") or []), *facts]
    meta["supersedes"] = sorted(set(meta.get("supersedes") or []) | {page_id_for_path(page.path)})
    for claim in claims:
        for label in claim.labels:
            result.claims[claim_key(page.path, label)] = (
                Action.MERGED,
                f"merged with its citation into {page_id_for_path(target)} [^{relabel.get(label, label)}]",
            )


def _retarget_page_links(texts: Texts, root: str, old: str, new: str, skip: set[str], result: JobResult) -> None:
    """``[[old]]`` links on current pages of ``root`` (but the merged pages) become ``[[new]]``."""
    pattern = re.compile(rf"\[\[{re.escape(old)}(?:\.md)?(?=[\]|#])")
    for path in _all_paths(texts):
        if root_of(path) != root or path in skip or path == f"{new}.md":
            continue
        text = result.changes.get(path) or texts.text(path)
        page = texts.page(path)
        if text is None or page is None or not is_current(page) or page.meta.get("type") == "index":
            continue
        changed = pattern.sub(f"[[{new}", text)
        if changed != text:
            result.changes[path] = changed
            result.pages.setdefault(path, Action.CHANGED)
            result.found.append(Found("link", path, f"[[{old}]] was merged into [[{new}]]; link retargeted"))


# ---- L1 outlines -------------------------------------------------------------------------


def rewrite_l1(texts: Texts, paths: Iterable[str]) -> JobResult:
    """A page whose ``## Overview`` outlines its sections (``- [Title](#anchor)``, as the offline
    document agent writes it) but names a section that is gone or misses one that is there gets
    its outline rebuilt the way that agent builds it; the lead and any claims stay as written."""
    result = JobResult()
    for path in paths:
        page = texts.page(path)
        if page is None or not is_current(page):
            continue
        sections = [s for s in _rows_of_h2(page) if s[0] == OVERVIEW]
        if not sections:
            continue
        _, _, start, end = sections[0]
        rows = page.body.splitlines()
        outline_rows = [i for i in range(start + 1, end) if _OUTLINE_ROW.match(rows[i])]
        if not outline_rows:
            continue
        linked = {m.group(1) for i in outline_rows for m in re.finditer(r"\]\(#([^)]*)\)", rows[i])}
        entries = _outline_entries(_sections(rows))
        anchors = {a for _, _, a in entries}
        top = {a for level, _, a in entries if level == min(x for x, _, _ in entries)} if entries else set()
        gone = sorted(linked - anchors)
        missing = sorted(top - linked)
        truncated = any("more sections below" in rows[i] for i in outline_rows)
        if not gone and (not missing or truncated):
            continue
        new = _outline(entries)
        first = outline_rows[0]
        rows = [r for i, r in enumerate(rows) if i not in set(outline_rows[1:])]
        rows[first : first + 1] = new or ["(no sections)"]
        what = "; ".join(
            x for x in (f"named gone section(s) {', '.join(gone)}" if gone else "", f"missed {', '.join(missing)}" if missing else "") if x
        )
        result.changes[path] = set_page(page, body="\n".join(rows) + "\n")
        result.pages[path] = Action.CHANGED
        result.found.append(Found("l1", path, f"the Overview's outline {what}; rebuilt from the sections"))
    return result
