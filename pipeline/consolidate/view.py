"""A commit's pages and evidence as the consolidation jobs read them, with a batch's edits on top.

Everything is read from git objects (never the working tree), so a plan computed from a commit
is the same however often it is computed; ``Texts`` layers the texts earlier jobs of the same
batch wrote over it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

import pygit2

from kb.errors import KbError
from kb.evidence import LedgerEntry, ledger_at
from kb.page import Page, page_id_for_path, parse_page
from kb.repo import Repo
from kb.scopes import PAGE_FOLDERS


def span_key(evidence_id: str, start: int, end: int) -> str:
    """How the coverage record and the conservation rule name a cited span."""
    return f"{evidence_id}#L{start}-L{end}"


def root_of(path: str) -> str:
    """The scope root of a page path: ``knowledge`` or ``users/<id>``."""
    parts = path.split("/")
    return "/".join(parts[:2]) if parts[0] == "users" else parts[0]


def folder_of(path: str) -> str:
    return path.rsplit("/", 1)[0]


@dataclass
class CommitView:
    """Pages and evidence lines of one commit, parsed on first use."""

    repo: Repo
    commit: pygit2.Commit
    _pages: dict[str, Page | None] = field(default_factory=dict)
    _lines: dict[str, list[str] | None] = field(default_factory=dict)

    @cached_property
    def files(self) -> dict[str, pygit2.Oid]:
        return {p: oid for p, oid in self.repo.tree_files(self.commit, PAGE_FOLDERS).items() if p.endswith(".md")}

    @cached_property
    def ids(self) -> set[str]:
        return {page_id_for_path(p) for p in self.files}

    @cached_property
    def evidence_entries(self) -> dict[str, LedgerEntry]:
        return {e.id: e for e in ledger_at(self.repo, self.commit)}

    @cached_property
    def evidence_paths(self) -> dict[str, str]:
        return {i: e.path for i, e in self.evidence_entries.items()}

    def text(self, path: str) -> str | None:
        oid = self.files.get(path)
        return None if oid is None else self.repo.read_blob(oid).decode("utf-8", errors="replace")

    def page(self, path: str) -> Page | None:
        if path not in self._pages:
            text = self.text(path)
            try:
                self._pages[path] = None if text is None else parse_page(text, path)
            except KbError:
                self._pages[path] = None
        return self._pages[path]

    def pages(self, prefix: str = "") -> Iterator[Page]:
        for path in sorted(self.files):
            if path.startswith(prefix):
                page = self.page(path)
                if page is not None:
                    yield page

    def evidence_lines(self, evidence_id: str) -> list[str] | None:
        if evidence_id not in self._lines:
            path = self.evidence_paths.get(evidence_id)
            data = self.repo.read_at(self.commit, path) if path else None
            self._lines[evidence_id] = None if data is None else data.decode("utf-8", errors="replace").splitlines()
        return self._lines[evidence_id]

    def children(self, folder: str) -> list[str]:
        """Paths listed by ``folder``'s index: its pages and its subfolders' index.md."""
        out = []
        for path in self.files:
            if path == f"{folder}/index.md" or not path.startswith(folder + "/"):
                continue
            rest = path[len(folder) + 1 :]
            if "/" not in rest or (rest.count("/") == 1 and rest.endswith("/index.md")):
                out.append(path)
        return sorted(out)


@dataclass
class Texts:
    """The page texts a batch's jobs see: the base commit's, with the edits of earlier jobs."""

    view: CommitView
    edits: dict[str, str] = field(default_factory=dict)

    def text(self, path: str) -> str | None:
        return self.edits[path] if path in self.edits else self.view.text(path)

    def children(self, folder: str) -> list[str]:
        """``CommitView.children`` with the pages earlier jobs created (a split's parts)."""
        new = [
            p
            for p in self.edits
            if p not in self.view.files and p.startswith(folder + "/") and "/" not in p[len(folder) + 1 :] and p != f"{folder}/index.md"
        ]
        return sorted(set(self.view.children(folder)) | set(new))

    def page(self, path: str) -> Page | None:
        if path not in self.edits:
            return self.view.page(path)
        try:
            return parse_page(self.edits[path], path)
        except KbError:
            return None
