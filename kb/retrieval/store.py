"""Where index versions live: ``.kb/index/versions/<name>/``, the ``CURRENT`` pointer, and the
point-in-time stores under ``.kb/index/at/<commit id>/`` (each a store of the same shape).

A new version is written into a temporary folder, renamed into place, then ``CURRENT`` is
replaced atomically; only after that are older versions removed. A process killed at any point
leaves ``CURRENT`` and the version it names untouched. A temporary folder's name carries the id
of the process that writes it (``.tmp-<pid>-<name>``), so that a later build can tell the
leftovers of a killed build (its process is gone) from a build still running.
"""

from __future__ import annotations

import json
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
GONE_FILE = "gone.npy"  # in a layered version: the base's documents it leaves out (sorted)
DELETED_FILE = "deleted.npy"  # in a layered version: the base's rows it leaves out (sorted)
LAYERS_FILE = "layers.json"  # in a layered version: {"base": <name of the full version it overlays>}


def base_of(folder: Path) -> str | None:
    """The base version a layered version overlays (None for a full version)."""
    try:
        return str(json.loads((folder / LAYERS_FILE).read_text(encoding="utf-8"))["base"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        raise IndexMissingError(f"{folder / LAYERS_FILE}: the index layers file is corrupted") from None


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
        path = self.versions / f"{TMP_PREFIX}{os.getpid()}-{name}"
        path.mkdir(parents=True)
        return name, path

    def switch(self, name: str, tmp: Path) -> str | None:
        """Rename the finished version into place and point CURRENT at it; return the old one."""
        previous = self.current()
        os.replace(tmp, self.versions / name)
        atomic_write(self.root / CURRENT_FILE, (name + "\n").encode())
        return previous

    def collect_garbage(self, keep: Iterable[str | None]) -> None:
        """Remove every version but ``keep`` and the temporary folders of builds that are gone."""
        kept = {k for k in keep if k}
        if not self.versions.is_dir():
            return
        for name in list(kept):  # a layered version needs its base
            try:
                base = base_of(self.versions / name)
            except IndexMissingError:
                base = None
            if base:
                kept.add(base)
        for child in self.versions.iterdir():
            live_tmp = child.name.startswith(TMP_PREFIX) and _process_alive(_tmp_owner(child.name))
            if child.name not in kept and not live_tmp:
                shutil.rmtree(child, ignore_errors=True)

    def collect_stale_tmp(self) -> list[str]:
        """Remove the temporary folders of builds whose process is gone; return their names.

        A folder whose process still runs (this one included) is left alone; one whose name has
        no process id (written by an older kb) counts as stale.
        """
        if not self.versions.is_dir():
            return []
        removed = []
        for child in sorted(self.versions.iterdir()):
            if child.name.startswith(TMP_PREFIX) and not _process_alive(_tmp_owner(child.name)):
                shutil.rmtree(child, ignore_errors=True)
                removed.append(child.name)
        return removed


def _tmp_owner(name: str) -> int | None:
    head = name[len(TMP_PREFIX) :].split("-", 1)[0]
    return int(head) if head.isdigit() and len(head) < 12 else None


def _process_alive(pid: int | None) -> bool:
    if pid is None or pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def collect_stale_builds(store: IndexStore) -> list[str]:
    """``collect_stale_tmp`` on the serving store and on every point-in-time store."""
    removed = store.collect_stale_tmp()
    folder = store.root / AT_DIR
    if folder.is_dir():
        for child in sorted(folder.iterdir()):
            if child.is_dir():
                removed += IndexStore(child).collect_stale_tmp()
    return removed


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
