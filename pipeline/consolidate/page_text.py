"""A page's text as the consolidation jobs read and rewrite it: its claim rows, sections,
``## History`` and ``## Related`` rows, footnote labels, and what decides a statement's meaning
beyond its words (dates, numbers, negation).

Every job edits pages through these functions, so that a claim is found, replaced, moved or
removed the same way everywhere (a claim is stored with its whitespace folded; see
``replace_once``).
"""

from __future__ import annotations

import re
from typing import Any

from ci.rules import factcheck
from ci.snapshot import normalise_quote
from kb.citations import all_labels
from kb.markdown import FOOTDEF_RE, FOOTREF_RE
from kb.page import Page, render_page

ISO_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def numbers(text: str) -> set[str]:
    return {q.value for q in factcheck.quantities(text)}


def negated(text: str) -> bool:
    return factcheck.negated(text)


def strip_refs(text: str) -> str:
    return " ".join(FOOTREF_RE.sub("", text).split())


def norm_claim(text: str) -> str:
    return normalise_quote(strip_refs(text)).lower().rstrip(".!?。！？ ")


def _raw_pattern(claim_text: str) -> re.Pattern[str]:
    """The claim as written in the body (it is stored with whitespace folded)."""
    return re.compile(r"\s+".join(re.escape(t) for t in claim_text.split()))


def replace_once(body: str, claim_text: str, new: str) -> str | None:
    match = _raw_pattern(claim_text).search(body)
    if match is None:
        return None
    return body[: match.start()] + new + body[match.end() :]


def is_current(page: Page) -> bool:
    return page.status != "deprecated" and page.meta.get("type") != "index"


def section_of_line(page: Page, line: int) -> str:
    best = ""
    for section in page.structure.sections:
        if section.line <= line <= section.end_line and section.level == 2:
            best = section.title.strip()
    return best


def set_page(page: Page, meta: dict[str, Any] | None = None, body: str | None = None) -> str:
    return render_page(meta if meta is not None else page.meta, body if body is not None else page.body)


def history_insert(body: str, lines: list[str]) -> str:
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


def _references(body: str, ref: str) -> bool:
    return any(ref in row for row in body.splitlines() if not FOOTDEF_RE.match(row))


def remove_claim(page: Page, label: str, claim_text: str) -> str:
    """The body without the claim carrying ``label`` (its bullets, or its sentence) and, when
    nothing else cites it, without its footnote definition."""
    ref = f"[^{label}]"
    rows = page.body.splitlines()
    body = "\n".join(r for r in rows if not (r.lstrip().startswith(("- ", "* ")) and FOOTREF_RE.findall(r) == [label])) + "\n"
    if _references(body, ref):
        body = replace_once(body, claim_text, "") or body
    if not _references(body, ref):
        body = "\n".join(r for r in body.splitlines() if not r.startswith(f"{ref}:")) + "\n"
    return body


def next_label(page_body: str) -> str:
    used = {int(label) for label in all_labels(page_body) if label.isdigit()}
    return str(max(used, default=0) + 1)


def add_related(body: str, line: str) -> str:
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


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]
