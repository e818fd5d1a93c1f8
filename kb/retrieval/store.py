"""Where index versions live: ``.kb/index/versions/<name>/``, the ``CURRENT`` pointer, and the
point-in-time stores under ``.kb/index/at/<commit id>/`` (each a store of the same shape).

A new version is written into a temporary folder, renamed into place, then ``CURRENT`` is
replaced atomically; only after that are older versions removed. A process killed at any point
leaves ``CURRENT`` and the version it names untouched.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kb.clock import compact_utc
from kb.errors import IndexMissingError
from kb.repo import Repo, atomic_write
from kb.retrieval.manifest import MANIFEST_FILE, Manifest, load_manifest

INDEX_DIR = "index"
CURRENT_FILE = "CURRENT"
VERSIONS_DIR = "versions"
AT_DIR = "at"  # point-in-time indexes: at/<commit id>/ (a store of its own each)
AT_KEEP = 3  # point-in-time indexes kept, most recently used first
TMP_PREFIX = ".tmp-"


@dataclass(frozen=True)
class IndexStore:
    """The folder that holds index versions and the CURRENT pointer."""

    root: Path

    @property
    def versions(self) -> Path:
        return self.root / VERSIONS_DIR

    def current(self) -> str | None:
        try:
            name = (self.root / CURRENT_FILE).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return name or None

    def current_path(self) -> Path:
        name = self.current()
        if name is None:
            raise IndexMissingError(f"no search index in {self.root}")
        path = self.versions / name
        if not (path / MANIFEST_FILE).is_file():
            raise IndexMissingError(f"the search index version {name} is missing or incomplete")
        return path

    def current_manifest(self) -> Manifest | None:
        """The serving manifest, or None when there is none or it cannot be read."""
        try:
            return load_manifest(self.current_path() / MANIFEST_FILE)
        except IndexMissingError:
            return None

    def new_tmp(self, commit: str) -> tuple[str, Path]:
        stamp = compact_utc()
        label = re.sub(r"[^A-Za-z0-9_-]", "-", commit[:12])
        name = f"{stamp}-{label}-{secrets.token_hex(3)}"
        path = self.versions / f"{TMP_PREFIX}{name}"
        path.mkdir(parents=True)
        return name, path

    def switch(self, name: str, tmp: Path) -> str | None:
        """Rename the finished version into place and point CURRENT at it; return the old one."""
        previous = self.current()
        os.replace(tmp, self.versions / name)
        atomic_write(self.root / CURRENT_FILE, (name + "\n").encode())
        return previous

    def collect_garbage(self, keep: Iterable[str | None]) -> None:
        """Remove every version but ``keep`` and any leftover temporary folder."""
        kept = {k for k in keep if k}
        if not self.versions.is_dir():
            return
        for child in self.versions.iterdir():
            if child.name not in kept:
                shutil.rmtree(child, ignore_errors=True)


def index_store(repo: Repo) -> IndexStore:
    return IndexStore(repo.state_dir / INDEX_DIR)


def point_in_time_commits(store: IndexStore) -> list[str]:
    """Commits with a point-in-time index, most recently used first."""
    folder = store.root / AT_DIR
    if not folder.is_dir():
        return []
    stores = [child for child in folder.iterdir() if child.is_dir()]
    stores.sort(key=lambda child: (-child.stat().st_mtime, child.name))
    return [child.name for child in stores]


def prune_point_in_time(store: IndexStore, keep: int) -> None:
    for name in point_in_time_commits(store)[keep:]:
        shutil.rmtree(store.root / AT_DIR / name, ignore_errors=True)
