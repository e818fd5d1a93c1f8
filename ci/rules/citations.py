"""Every citation resolves to an existing evidence line span and its quote is there; scopes hold.

A page in ``system`` scope may cite only system evidence; a page of ``user:<id>`` may cite that
user's evidence and system evidence. Quotes match after folding whitespace and character width.
"""

from __future__ import annotations

from ci.findings import Finding
from ci.rules import selected_pages
from ci.selection import Selection
from ci.snapshot import Snapshot, normalise_quote
from kb.page import Page
from kb.scopes import scope_for_path, visible_from

CITE_HINT = 'cite as [^n]: ev-<id>#L3-L4 "verbatim quote"'


def check_page(snapshot: Snapshot, page: Page) -> list[Finding]:
    out = []
    structure = page.structure
    defined = {c.label for c in structure.citations}
    used = {label for claim in structure.claims for label in claim.labels}
    page_scope = scope_for_path(page.path)
    sources = page.meta.get("sources") if isinstance(page.meta.get("sources"), list) else []
    for claim in structure.claims:
        for label in claim.labels:
            if label not in defined:
                out.append(Finding(page.path, claim.line, "citation.undefined", f"footnote [^{label}] has no definition", hint=CITE_HINT))
    for cite in structure.citations:
        if cite.evidence_id is None:
            out.append(
                Finding(
                    page.path,
                    cite.line,
                    "citation.malformed",
                    f"footnote [^{cite.label}] is not a citation: {cite.raw[:80]!r}",
                    hint=CITE_HINT,
                )
            )
            continue
        if cite.label not in used:
            out.append(
                Finding(page.path, cite.line, "citation.unused", f"footnote [^{cite.label}] is never referenced", severity="warning")
            )
        entry = snapshot.evidence_by_id.get(cite.evidence_id)
        if entry is None:
            out.append(
                Finding(
                    page.path,
                    cite.line,
                    "citation.evidence",
                    f"[^{cite.label}] cites unknown evidence {cite.evidence_id}",
                    hint="cite an id from `kb evidence list`",
                )
            )
            continue
        if not visible_from(page_scope, entry.scope):
            out.append(
                Finding(
                    page.path,
                    cite.line,
                    "citation.scope",
                    f"[^{cite.label}] cites {entry.scope} evidence from a {page_scope} page",
                    hint="system pages cite system evidence; a user's pages cite that user's or system evidence",
                )
            )
            continue
        lines = snapshot.evidence_lines(cite.evidence_id)
        if lines is None:
            out.append(
                Finding(page.path, cite.line, "citation.evidence", f"[^{cite.label}]: the file of {cite.evidence_id} cannot be read")
            )
            continue
        if cite.start < 1 or cite.end > len(lines) or cite.end < cite.start:
            out.append(
                Finding(
                    page.path,
                    cite.line,
                    "citation.lines",
                    f"[^{cite.label}] cites L{cite.start}-L{cite.end} but {cite.evidence_id} has {len(lines)} lines",
                    hint=f"`kb evidence show {cite.evidence_id}` shows the numbered lines",
                )
            )
            continue
        span = normalise_quote("\n".join(lines[cite.start - 1 : cite.end]))
        quote = normalise_quote(cite.quote)
        if not quote or quote not in span:
            out.append(
                Finding(
                    page.path,
                    cite.line,
                    "citation.quote",
                    f"[^{cite.label}]: the quote is not in {cite.evidence_id}#L{cite.start}-L{cite.end}",
                    hint="quote the evidence verbatim (whitespace and width may differ)",
                )
            )
        if sources and cite.evidence_id not in sources:
            out.append(
                Finding(
                    page.path,
                    page.meta_lines.get("sources", 1),
                    "citation.sources",
                    f"{cite.evidence_id} is cited but not listed in `sources`",
                    severity="warning",
                )
            )
    return out


def check(snapshot: Snapshot, selection: Selection) -> list[Finding]:
    out: list[Finding] = []
    for page in selected_pages(snapshot, selection):
        out.extend(check_page(snapshot, page))
    return out
