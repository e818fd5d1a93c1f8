"""Pages for a batch of documents: where each one's page goes, the anchors of every page before
any is written (so that links between them keep only anchors that exist), the pages themselves,
and the folder index pages above them."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.offline.document_links import Linker
from agents.offline.document_reader import (
    Document,
    file_title,
    include_targets,
    is_code_source,
    page_path_for,
    read_blocks,
    read_document,
    resolve_include,
    source_path,
)
from agents.offline.document_writer import page_anchors, render_document
from agents.offline.extractive import Withheld, keep_all
from agents.offline.indexes import new_index, upsert_index_entry
from agents.offline.memory_page import is_generated
from agents.protocols import EvidenceItem
from kb.errors import KbError
from kb.page import page_id_for_path, parse_page

ReadPage = Callable[[str], "str | None"]


@dataclass(frozen=True)
class DocumentPlan:
    writes: dict[str, str]
    claims: int
    closed: int


def _document_fact(text: str, path: str) -> str | None:
    try:
        page = parse_page(text, path)
    except KbError:  # a page that does not parse is nobody's document page
        return None
    if page.meta.get("origin"):
        return str(page.meta["origin"])
    for fact in page.meta.get("facts") or []:  # pages written before `origin` existed
        if isinstance(fact, dict) and fact.get("key") == "document":
            return str(fact.get("value"))
    return None


def place(item: EvidenceItem, read: ReadPage, taken: dict[str, str]) -> str:
    """The page path of a document: from its source path; the same source keeps its page; a
    path held by another document or by a page this proposer did not write gets a suffix."""
    base = page_path_for(item.source, item.id)
    source = source_path(item.source) or item.id
    for path in (base, base[:-3] + f"-{item.id[3:9]}.md"):
        owner = taken.get(path)
        if owner is not None:
            if owner == source:
                return path
            continue
        text = read(path)
        if text is None:
            return path
        if is_generated(text, path) and _document_fact(text, path) in (source, None):
            return path
    return base[:-3] + f"-{item.id[3:19]}.md"


def plan_document_pages(items: list[EvidenceItem], read: ReadPage, writes: dict[str, str], withheld: Withheld = keep_all) -> DocumentPlan:
    """Pages for documents (kind ``document``), in the order given, and the folder index pages
    above them. ``writes`` (path -> text) receives them; it is read before the repository."""

    def current(path: str) -> str | None:
        return writes[path] if path in writes else read(path)

    files = {source_path(item.source) or item.id: item for item in items}
    included = _included(items, files)
    taken: dict[str, str] = {}
    docs: list[Document] = []
    for item in items:
        if item.id in included:  # a program a document includes: on that document's page
            continue
        path = place(item, current, taken)
        taken[path] = source_path(item.source) or item.id
        docs.append(read_document(item, path))
        docs[-1].files = files
    # the anchors of every page first (links to them keep only anchors that exist)
    targets = _Targets(current)
    for doc in docs:
        targets[doc.source] = (doc.path, set())
    for doc in docs:
        doc.anchors = page_anchors(doc, Linker(doc, {}))
        targets[doc.source] = (doc.path, doc.anchors)
    labels = {label: (doc.source, heading) for doc in docs for label, heading in doc.labels.items()}
    claims = closed = 0
    for doc in docs:
        text, new, shut = render_document(doc, Linker(doc, targets, labels), current(doc.path), withheld)
        writes[doc.path] = text
        claims += new
        closed += shut
        _list_in_indexes(doc.path, parse_page(text, doc.path).summary, current, writes)
    return DocumentPlan(writes, claims, closed)


def _included(items: list[EvidenceItem], files: dict[str, EvidenceItem]) -> set[str]:
    """The ids of the programs (not prose) that a Markdown document of the batch includes."""
    out: set[str] = set()
    for item in items:
        if is_code_source(item.source):
            continue
        source = source_path(item.source) or item.id
        for target in include_targets(read_blocks(list(enumerate(item.text.splitlines(), 1)))):
            found = resolve_include(source, target, files)
            if found is not None and is_code_source(found.source) and found.id != item.id:
                out.add(found.id)
    return out


class _Targets(dict[str, tuple[str, set[str]]]):
    """Source path -> (page path, anchors) of the documents of this plan; a document outside it
    is found by the page its source path names, when that page says it holds that document."""

    def __init__(self, read: ReadPage) -> None:
        super().__init__()
        self.read = read

    def get(self, key: str, default: Any = None) -> Any:  # dict's own signature
        if key in self:
            return self[key]
        path = page_path_for(key, key)
        text = self.read(path)
        if text is None or _document_fact(text, path) != key:
            return default
        return path, parse_page(text, path).structure.anchors


def _list_in_indexes(path: str, summary: str, read: ReadPage, writes: dict[str, str]) -> None:
    """List the page in its folder's index, and each folder in its parent's, up to knowledge/."""
    child_id, l0 = page_id_for_path(path), summary
    folder = posixpath.dirname(path)
    while folder.startswith("knowledge"):
        index_path = f"{folder}/index.md"
        text = writes.get(index_path) or read(index_path)
        if text is None:
            name = folder.rsplit("/", 1)[-1]
            title = "Knowledge" if folder == "knowledge" else file_title(name)
            summary = (
                "Entry page of the shared knowledge."
                if folder == "knowledge"
                else f"Pages made from the documents in {folder.removeprefix('knowledge/')}/."
            )
            text = new_index(folder, title, summary, "system")
        writes[index_path] = upsert_index_entry(text, index_path, child_id, l0)
        child_id, l0 = page_id_for_path(index_path), parse_page(writes[index_path], index_path).summary
        if folder == "knowledge":
            break
        folder = posixpath.dirname(folder)
