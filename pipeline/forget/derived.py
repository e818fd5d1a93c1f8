"""Text derived from what is forgotten: a page's L0 summary, its Overview, its folder index's
line, its profile facts, the consolidation records. Such text copies short values (a name, a
phone, an employer) without citing the item they came from, so removing the citing claims leaves
it behind; here it is rewritten or removed.

A short value is *derived* when no retained source holds it: evidence that stays, and the files
outside pages, evidence and consolidation records. Pages and records are derived from evidence,
so a value only a page still says, once its evidence is gone, is a copy of what is forgotten.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import yaml

from kb.page import render_frontmatter

SCRUBBED = "[forgotten]"
RECORDS_DIR = "consolidation/"  # the consolidation cycle's records: derived, like pages
_INDEX_LINE_RE = re.compile(r"^(\s*[-*]\s*\[\[([^\]|#]+)(?:[#|][^\]]*)?\]\]\s*:\s*)(.*)$")
_CLAUSE_RE = re.compile(r"(?<=[;.])\s+")

Holds = Callable[[str], bool]


def _split_front(text: str) -> tuple[list[str], list[str]] | None:
    lines = text.split("\n")
    if not lines or lines[0] != "---":
        return None
    try:
        end = lines.index("---", 1)
    except ValueError:
        return None
    return lines[: end + 1], lines[end + 1 :]


def _meta_value(line: str, key: str) -> Any:
    try:
        data = yaml.safe_load(line)
    except yaml.YAMLError:
        return None
    return data.get(key) if isinstance(data, dict) else None


def _meta_line(key: str, value: Any) -> str:
    rendered = render_frontmatter({key: value}).strip().splitlines()
    return next((x for x in rendered if x.startswith(f"{key}:")), f"{key}: ''")


def rewrite_summary(summary: str, title: str, holds: Holds) -> str:
    """The L0 without its clauses that hold forgotten values (``; `` and sentence ends split it);
    when none is left, the page's title."""
    clauses = _CLAUSE_RE.split(summary.strip())
    kept = [c for c in clauses if not holds(c)]
    text = " ".join(kept).strip().rstrip(";").strip()
    if not text or text.endswith(":"):
        return title.strip().rstrip(".") + "."
    return text if text.endswith((".", "!", "?")) else text + "."


def clean_page(text: str, holds: Holds) -> tuple[str, str | None]:
    """``text`` without the derived copies: body lines holding a forgotten value removed, the
    L0 rewritten, facts holding one dropped. Returns the new text and the new L0 (None when the
    L0 did not change)."""
    parts = _split_front(text)
    if parts is None:
        return "\n".join(line for line in text.split("\n") if not holds(line)), None
    front, body = parts
    title = str(next((_meta_value(x, "title") for x in front if x.startswith("title:")), "") or "")
    new_summary = None
    out_front = []
    for line in front:
        if line.startswith("summary:") and holds(line):
            old = str(_meta_value(line, "summary") or "")
            new_summary = rewrite_summary(old, title, holds)
            line = _meta_line("summary", new_summary)
        elif line.startswith("facts:") and holds(line):
            facts = _meta_value(line, "facts") or []
            line = _meta_line("facts", [f for f in facts if not holds(json.dumps(f, ensure_ascii=False, default=str))])
        out_front.append(line)
    out_body = [line for line in body if not holds(line) or _INDEX_LINE_RE.match(line)]
    return "\n".join(out_front + out_body), new_summary


def clean_index(text: str, summaries: dict[str, str], holds: Holds) -> str:
    """A folder index whose entries for pages with a changed L0 show the new L0; another entry
    holding a forgotten value is cleaned as an L0 is (other lines are ``clean_page``'s)."""
    out = []
    for line in text.split("\n"):
        m = _INDEX_LINE_RE.match(line)
        if m and m.group(2).removesuffix(".md") in summaries:
            line = m.group(1) + summaries[m.group(2).removesuffix(".md")]
        elif m and holds(line):
            line = m.group(1) + rewrite_summary(m.group(3), m.group(2).rsplit("/", 1)[-1], holds)
        out.append(line)
    return "\n".join(out)


def scrub_json(text: str, holds: Holds) -> str | None:
    """A JSON record with each string holding forgotten text replaced by ``SCRUBBED``, written as
    the consolidation records are (None when ``text`` is not JSON)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return SCRUBBED if holds(value) else value
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items() if not holds(str(k))}
        return value

    new = walk(data)
    if new == data:
        return text
    return json.dumps(new, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
