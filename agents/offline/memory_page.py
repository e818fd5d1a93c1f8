"""The page model of the offline Proposer: sections of cited bullets, typed fact cards and
sources, read back from a page it wrote earlier and rendered again after an update.

Pages it writes carry the tag ``kb-extractive``; a page without it (written by a person or a
model) is never rewritten by the offline Proposer. The L1 (``## Overview``) never lists an entry
that tries to steer a model or asks that personal data be given to anyone (``kb.injection``):
the extractor files none today, but a page it wrote before may hold one, and the profile's L1
goes first in every memory context.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb.citations import ANY_REF_RE
from kb.errors import KbError
from kb.injection import unsafe_statement
from kb.markdown import FOOTDEF_RE
from kb.page import Page, page_id_for_path, parse_page, render_page

GENERATED_TAG = "kb-extractive"


@dataclass
class Entry:
    line: str  # the bullet, without the leading "- "
    label: str
    citation: str  # the footnote definition line
    key: str = ""


@dataclass
class MemoryPage:
    path: str
    title: str
    type: str
    scope: str
    sections: dict[str, list[Entry]] = field(default_factory=dict)
    facts: list[dict[str, Any]] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)
    valid_from: str = ""

    def has_label(self, label: str) -> bool:
        return any(e.label == label for entries in self.sections.values() for e in entries)


def load_memory_page(text: str, path: str) -> MemoryPage:
    """Read back a page this proposer wrote (bullets, citations, facts) for an incremental update."""
    page = parse_page(text, path)
    defs = {}
    for line in page.body.splitlines():
        m = FOOTDEF_RE.match(line)
        if m:
            defs[m.group(1)] = line
    memory = MemoryPage(path, page.title, str(page.meta.get("type", "topic")), page.scope)
    memory.facts = [dict(f) for f in page.meta.get("facts") or []]
    memory.sources = set(page.meta.get("sources") or [])
    memory.valid_from = str(page.meta.get("valid_from") or "")
    section = ""
    for line in page.body.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        if section and section != "Overview" and line.startswith("- "):
            labels = ANY_REF_RE.findall(line)
            label = labels[0] if labels else ""
            memory.sections.setdefault(section, []).append(Entry(line[2:], label, defs.get(label, "")))
    return memory


def render_memory_page(memory: MemoryPage, summary: str, overview_limit: int = 12, leads_only: bool = False) -> str:
    """Render the page; L1 lists the first current entries (or each section's lead entry)."""
    body = [f"# {memory.title}", "", "## Overview", ""]
    if leads_only:
        current = [entries[0] for name, entries in memory.sections.items() if name != "History" and entries]
    else:
        current = [e for name, entries in memory.sections.items() if name != "History" for e in entries]
    current = [e for e in current if not unsafe_statement(e.line)]
    if current:
        body += [f"- {e.line}" for e in current[:overview_limit]]
        if len(current) > overview_limit:
            body.append(f"- … and {len(current) - overview_limit} more below.")
    else:
        body.append("Nothing current is recorded here.")
    cited: dict[str, str] = {}
    for name, entries in memory.sections.items():
        if not entries:
            continue
        body += ["", f"## {name}", ""]
        for entry in entries:
            body.append(f"- {entry.line}")
            if entry.citation:
                cited[entry.label] = entry.citation
    body.append("")
    body += [cited[k] for k in sorted(cited)]
    meta: dict[str, Any] = {
        "id": page_id_for_path(memory.path),
        "type": memory.type,
        "title": memory.title,
        "summary": summary,
        "scope": memory.scope,
        "status": "active",
    }
    if memory.valid_from:
        meta["valid_from"] = memory.valid_from
    meta["sources"] = sorted(memory.sources)
    meta["tags"] = [GENERATED_TAG]
    if memory.facts:
        meta["facts"] = [{k: v for k, v in fact.items() if v is not None} for fact in memory.facts]
    return render_page(meta, "\n".join(body) + "\n")


def is_generated(text: str, path: str) -> bool:
    try:
        page: Page = parse_page(text, path)
    except KbError:  # a page that does not parse was not written by this proposer
        return False
    return GENERATED_TAG in (page.meta.get("tags") or [])
