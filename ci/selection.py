"""Which pages, folders and evidence a check run looks at (all, or what changed since a base)."""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from ci.snapshot import Snapshot
from kb.evidence import EVIDENCE_DIR
from kb.page import page_id_for_path
from kb.scopes import PAGE_FOLDERS, folder_for_scope, scope_for_path


@dataclass(frozen=True)
class Selection:
    pages: tuple[str, ...]  # page paths to check (existing files)
    folders: tuple[str, ...]  # folders whose index.md listing to check
    evidence_paths: tuple[str, ...] | None = None  # None: all evidence
    base: pygit2.Commit | None = None
    full: bool = True


def page_folders(path: str) -> list[str]:
    """The folder of ``path`` and its ancestors up to the scope root (knowledge/ or users/<id>/)."""
    scope = scope_for_path(path)
    if scope is None:
        return []
    parts = path.split("/")[:-1]
    root_len = folder_for_scope(scope).count("/")
    return ["/".join(parts[:n]) for n in range(len(parts), root_len - 1, -1)]


def all_folders(snapshot: Snapshot) -> list[str]:
    folders: set[str] = set()
    for path in snapshot.page_paths:
        folders.update(page_folders(path))
    return sorted(folders)


def plan_full(snapshot: Snapshot, base: pygit2.Commit | None) -> Selection:
    return Selection(tuple(snapshot.page_paths), tuple(all_folders(snapshot)), base=base, full=True)


def plan_changed(snapshot: Snapshot, changed: list[str], base: pygit2.Commit) -> Selection:
    """Pages changed since ``base``, the pages whose links may break, and the folders touched."""
    page_set = set(snapshot.page_paths)
    changed_pages = [p for p in changed if p.endswith(".md") and p.startswith(PAGE_FOLDERS)]
    existing = {p for p in changed_pages if p in page_set}
    deleted = sorted(page_id_for_path(p) for p in changed_pages if p not in page_set)
    folders: set[str] = set()
    for path in changed_pages:
        folders.update(page_folders(path))
    pages = set(existing)
    for folder in folders:
        index = f"{folder}/index.md"
        if index in page_set:
            pages.add(index)
    if deleted:
        needles = [d.encode() for d in deleted]
        for path in snapshot.page_paths:
            if path in pages:
                continue
            data = (snapshot.root / path).read_bytes()
            if any(n in data for n in needles):
                pages.add(path)
    evidence_paths = tuple(p for p in changed if p.startswith(EVIDENCE_DIR + "/"))
    return Selection(tuple(sorted(pages)), tuple(sorted(folders)), evidence_paths, base, full=False)


def plan_paths(snapshot: Snapshot, paths: list[str], base: pygit2.Commit | None) -> Selection:
    """Exactly the named pages (and evidence files), plus the index listings of their folders."""
    pages = sorted(p for p in paths if snapshot.has_page(p))
    folders: set[str] = set()
    for path in pages:
        folders.update(page_folders(path))
    evidence_paths = tuple(p for p in paths if p.startswith(EVIDENCE_DIR + "/"))
    return Selection(tuple(pages), tuple(sorted(folders)), evidence_paths, base, full=False)
