"""Index manifests and the pure build plan.

A manifest works like a lock file for one index version: schema, source commit, the retrieval
config hash, the parameters that shape chunks and vectors (embedder identity, chunker and
analyzer versions, chunk size and overlap) and every chunk's content hash. ``plan_build`` decides
from the previous manifest and the new chunks what to embed again, what to reuse and what to
drop; it has no effects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.errors import IndexMissingError

SCHEMA_VERSION = 1
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class Manifest:
    source_commit: str
    config_hash: str
    build_key: dict[str, Any]  # everything that, when it changes, invalidates vectors and chunks
    chunks: dict[str, str]  # chunk id -> content hash; row order of the vectors is sorted(ids)
    built_at: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    @property
    def embedder(self) -> str:
        return str(self.build_key.get("embedder", ""))

    def to_json(self) -> str:
        data = {
            "schema": self.schema,
            "source_commit": self.source_commit,
            "built_at": self.built_at,
            "config_hash": self.config_hash,
            "build_key": self.build_key,
            "counts": self.counts,
            "chunks": self.chunks,
        }
        # one line: with indent= json uses its pure-Python encoder, 5x slower on 50,000 chunk ids
        return json.dumps(data, sort_keys=True, ensure_ascii=False)


def parse_manifest(text: str, source: str = MANIFEST_FILE) -> Manifest:
    try:
        data = json.loads(text)
        if data.get("schema") != SCHEMA_VERSION:
            raise IndexMissingError(f"{source}: index schema {data.get('schema')!r} is not {SCHEMA_VERSION} (built by another kb version)")
        return Manifest(
            source_commit=str(data["source_commit"]),
            config_hash=str(data["config_hash"]),
            build_key=dict(data["build_key"]),
            chunks={str(k): str(v) for k, v in data["chunks"].items()},
            built_at=str(data.get("built_at", "")),
            counts={str(k): int(v) for k, v in data.get("counts", {}).items()},
        )
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError):
        raise IndexMissingError(f"{source}: the index manifest is corrupted") from None


_LAST: dict[tuple[str, int, int, int], Manifest] = {}  # the last manifest read, by file identity


def load_manifest(path: Path) -> Manifest:
    """The manifest at ``path``; the last one read is kept, so a build that consults the serving
    manifest several times parses its 50,000 chunk ids once (a version's manifest is written
    once, before the version is renamed into place, and never changed)."""
    try:
        stat = path.stat()
        key = (str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = None
    if key is not None and key in _LAST:
        return _LAST[key]
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise IndexMissingError(f"{path}: the index manifest is missing") from None
    except (OSError, UnicodeDecodeError):
        raise IndexMissingError(f"{path}: the index manifest is unreadable") from None
    manifest = parse_manifest(text, str(path))
    if key is not None:
        _LAST.clear()
        _LAST[key] = manifest
    return manifest


@dataclass(frozen=True)
class BuildPlan:
    full: bool
    reason: str
    reuse: dict[str, int]  # content hash -> row of the previous version's vectors
    embed: tuple[str, ...]  # content hashes to embed (unique, sorted)
    delete: tuple[str, ...]  # chunk ids to remove from the previous text index
    add: tuple[str, ...]  # chunk ids to add to it (all ids when ``full``)

    @property
    def changed(self) -> bool:
        return self.full or bool(self.embed or self.delete or self.add)


def _rebuild_reason(old: Manifest | None, build_key: Mapping[str, Any], full: bool) -> str:
    if full:
        return "full rebuild requested"
    if old is None:
        return "no previous index"
    for key in sorted(set(old.build_key) | set(build_key)):
        if old.build_key.get(key) != build_key.get(key):
            return f"{key} changed ({old.build_key.get(key)!r} -> {build_key.get(key)!r})"
    return ""


def plan_build(old: Manifest | None, chunks: Mapping[str, str], build_key: Mapping[str, Any], full: bool = False) -> BuildPlan:
    """What to embed, reuse, delete and add to go from ``old`` to ``chunks`` (id -> hash)."""
    reason = _rebuild_reason(old, build_key, full)
    if reason or old is None:
        return BuildPlan(True, reason, {}, tuple(sorted(set(chunks.values()))), (), tuple(sorted(chunks)))
    rows: dict[str, int] = {}  # content hash -> first row that holds it
    for row, chunk_id in enumerate(sorted(old.chunks)):
        rows.setdefault(old.chunks[chunk_id], row)
    reuse = {h: rows[h] for h in set(chunks.values()) if h in rows}
    embed = tuple(sorted({h for h in chunks.values() if h not in rows}))
    delete = tuple(sorted(cid for cid, h in old.chunks.items() if chunks.get(cid) != h))
    add = tuple(sorted(cid for cid, h in chunks.items() if old.chunks.get(cid) != h))
    return BuildPlan(False, "", reuse, embed, delete, add)
