"""Every citation resolves to an existing evidence line span and its quote is there; scopes hold.

A page in ``system`` scope may cite only system evidence; a page of ``user:<id>`` may cite that
user's evidence and system evidence. Quotes match after folding whitespace and character width.

A system page may not contain a user's words even without a footnote (``scope.private-text``):
no run of ``PRIVATE_RUN`` tokens (words, or single Han/kana/hangul characters; case and width
folded) of the page may occur in one line of any user's evidence unless it also occurs in a line
of shared evidence. The check hashes the page's runs once and streams the users' evidence lines,
looking only at stretches whose every token is in the page's vocabulary, so its cost is one
pass over user evidence, and only when a system page is checked.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

from ci.findings import Finding
from ci.rules import selected_pages
from ci.selection import Selection
from ci.snapshot import Snapshot, normalise_quote
from kb.page import Page
from kb.scopes import SYSTEM, scope_for_path, visible_from

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


PRIVATE_RUN = 8  # tokens in a row: long enough that a shared page and a chat agree on it by chance only rarely
_TOKEN_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]|[^\W_]+")


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(unicodedata.normalize("NFKC", text).casefold())


def _runs(tokens: list[str], vocabulary: set[str] | None = None) -> Iterator[tuple[int, tuple[str, ...]]]:
    """(start, run) for every ``PRIVATE_RUN`` tokens in a row, only inside stretches of tokens
    that are all in ``vocabulary`` when one is given."""
    n = PRIVATE_RUN
    start = 0
    while start + n <= len(tokens):
        if vocabulary is not None:
            miss = next((i for i in range(start + n - 1, start - 1, -1) if tokens[i] not in vocabulary), None)
            if miss is not None:
                start = miss + 1
                continue
        yield start, tuple(tokens[start : start + n])
        start += 1


def _evidence_lines(snapshot: Snapshot, shared: bool) -> Iterable[str]:
    for entry in snapshot.ledger:
        if (entry.scope == SYSTEM) == shared:
            yield from snapshot.evidence_lines(entry.id) or ()


def check_private_text(snapshot: Snapshot, pages: list[Page]) -> list[Finding]:
    """``scope.private-text`` for the system pages among ``pages``."""
    where: dict[tuple[str, ...], list[tuple[str, int]]] = {}  # run -> (page path, line) where it starts
    for page in pages:
        if scope_for_path(page.path) != SYSTEM:
            continue
        header = [(page.meta_lines.get(key, 1), str(page.meta.get(key) or "")) for key in ("title", "summary")]
        body = [(page.header_lines + n, line) for n, line in enumerate(page.body.splitlines(), 1)]
        for number, line in header + body:
            for _, run in _runs(_tokens(line)):
                where.setdefault(run, []).append((page.path, number))
    if not where:
        return []
    vocabulary = {token for run in where for token in run}
    found: set[tuple[str, ...]] = set()
    for line in _evidence_lines(snapshot, shared=False):
        found.update(run for _, run in _runs(_tokens(line), vocabulary) if run in where)
    if found:
        for line in _evidence_lines(snapshot, shared=True):
            found.difference_update(run for _, run in _runs(_tokens(line), vocabulary))
    places = sorted({place for run in found for place in where[run]})
    return [
        Finding(
            path,
            line,
            "scope.private-text",
            f"{PRIVATE_RUN}+ words in a row here are a user's evidence text, in a shared page",
            hint="write shared pages from shared evidence only; a user's words belong in users/<id>/",
        )
        for path, line in places
    ]


def check(snapshot: Snapshot, selection: Selection) -> list[Finding]:
    out: list[Finding] = []
    pages = list(selected_pages(snapshot, selection))
    for page in pages:
        out.extend(check_page(snapshot, page))
    out.extend(check_private_text(snapshot, pages))
    return out
