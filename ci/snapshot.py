"""What the rules look at: the pages and evidence of a working tree, read lazily and cached.

A ``Snapshot`` lists page paths cheaply (no parsing) so that ``--changed-only`` can check a
few pages against the ids of all of them; pages and evidence are parsed on first use.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from kb.config import Config
from kb.errors import FormatError
from kb.evidence import LedgerEntry, load_ledger
from kb.page import Page, page_id_for_path, parse_page
from kb.scopes import PAGE_FOLDERS

_WS_RE = re.compile(r"\s+")
LINK_MODE = 0o120000  # git's mode of a symbolic link


_WIDTH_RE = re.compile(r"[\u3000\uff00-\uffef]")


def normalise_quote(text: str) -> str:
    """Whitespace collapsed and full/half-width forms folded; nothing else is forgiven."""
    folded = _WIDTH_RE.sub(lambda m: " " if m.group(0) == "\u3000" else unicodedata.normalize("NFKC", m.group(0)), text)
    return _WS_RE.sub(" ", folded).strip()


@dataclass
class Snapshot:
    root: Path
    config: Config
    page_paths: list[str] = field(default_factory=list)
    odd_entries: dict[str, int] = field(default_factory=dict)  # path -> git mode of a link under the page folders
    _pages: dict[str, Page | FormatError] = field(default_factory=dict)
    _ledger: list[LedgerEntry] | None = None
    _ledger_error: FormatError | None = None
    _evidence: dict[str, list[str] | None] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path, config: Config) -> Snapshot:
        """The page paths under the page folders; a symbolic link is never read as a page (it
        could point anywhere), only listed in ``odd_entries``."""
        paths: list[str] = []
        odd: dict[str, int] = {}
        for folder in PAGE_FOLDERS:
            base = root / folder
            for dirpath, dirnames, filenames in os.walk(base):
                rel = Path(dirpath).relative_to(root).as_posix()
                for name in dirnames + filenames:
                    if (Path(dirpath) / name).is_symlink():
                        odd[f"{rel}/{name}"] = LINK_MODE
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and f"{rel}/{d}" not in odd)
                paths.extend(
                    f"{rel}/{name}"
                    for name in filenames
                    if name.endswith(".md") and not name.startswith(".") and f"{rel}/{name}" not in odd
                )
        return cls(root=root, config=config, page_paths=sorted(paths), odd_entries=odd)

    @property
    def ids(self) -> set[str]:
        return {page_id_for_path(p) for p in self.page_paths}

    @property
    def folder_children(self) -> dict[str, dict[str, str]]:
        """Folder -> {child id: path}: its pages (index.md aside) and its subfolders' index.md."""
        if not hasattr(self, "_children"):
            children: dict[str, dict[str, str]] = {}
            for path in self.page_paths:
                folder, _, name = path.rpartition("/")
                if name != "index.md":
                    children.setdefault(folder, {})[page_id_for_path(path)] = path
                elif "/" in folder:
                    parent = folder.rpartition("/")[0]
                    children.setdefault(parent, {})[page_id_for_path(path)] = path
            self._children = children
        return self._children

    def page(self, path: str) -> Page | FormatError:
        cached = self._pages.get(path)
        if cached is None:
            try:
                cached = parse_page((self.root / path).read_bytes(), path)
            except FormatError as exc:
                cached = exc
            self._pages[path] = cached
        return cached

    def page_by_id(self, page_id: str) -> Page | None:
        path = page_id + ".md"
        if path not in self._path_set:
            return None
        page = self.page(path)
        return page if isinstance(page, Page) else None

    @property
    def _path_set(self) -> set[str]:
        if not hasattr(self, "_paths_cache"):
            self._paths_cache = set(self.page_paths)
        return self._paths_cache

    def has_page(self, path: str) -> bool:
        return path in self._path_set

    @property
    def ledger(self) -> list[LedgerEntry]:
        if self._ledger is None:
            try:
                self._ledger = load_ledger(self.root)
            except FormatError as exc:
                self._ledger_error = exc
                self._ledger = []
        return self._ledger

    @property
    def ledger_error(self) -> FormatError | None:
        _ = self.ledger
        return self._ledger_error

    @property
    def evidence_by_id(self) -> dict[str, LedgerEntry]:
        if not hasattr(self, "_by_id"):
            self._by_id = {e.id: e for e in self.ledger}
        return self._by_id

    def evidence_lines(self, evidence_id: str) -> list[str] | None:
        if evidence_id not in self._evidence:
            entry = self.evidence_by_id.get(evidence_id)
            lines = None
            if entry is not None:
                try:
                    lines = (self.root / entry.path).read_text(encoding="utf-8").splitlines()
                except (OSError, UnicodeDecodeError):
                    lines = None
            self._evidence[evidence_id] = lines
        return self._evidence[evidence_id]
