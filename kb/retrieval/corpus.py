"""The corpus of one commit: its pages and evidence items as retrievable documents and chunks.

Reads git objects only, never the working tree. A source cache (from the previous version) maps
each source blob to the documents and chunks already made from it, so that only new blobs are
parsed and chunked.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.errors import FormatError
from kb.evidence import LEDGER_PATH, ledger_at
from kb.page import Page, page_id_for_path, parse_page
from kb.repo import Repo
from kb.retrieval.chunking import EVIDENCE, PAGE, Chunk, chunk_evidence, chunk_page
from kb.scopes import PAGE_FOLDERS, SYSTEM, scope_for_path

if TYPE_CHECKING:
    import pygit2


@dataclass(frozen=True)
class Doc:
    """A retrievable document: a page, or an evidence item (its own namespace)."""

    id: str
    namespace: str
    path: str
    title: str
    summary: str = ""
    scope: str = SYSTEM
    status: str = "active"
    valid_from: str = ""
    valid_to: str = ""
    kind: str = ""
    source: str = ""  # "<path>@<blob id>": the exact input this document and its chunks came from


SourceCache = dict[str, tuple[Doc, tuple[Chunk, ...]]]


@dataclass(frozen=True)
class Corpus:
    docs: tuple[Doc, ...]
    chunks: tuple[Chunk, ...]
    skipped: tuple[tuple[str, str], ...] = ()  # (path, reason) of sources that could not be read


def _date(value: Any) -> str:
    return str(value)[:10] if value not in (None, "") else ""


def page_doc(page: Page, path: str, source: str = "") -> Doc:
    return Doc(
        id=page_id_for_path(path),
        namespace=PAGE,
        path=path,
        title=page.title,
        summary=page.summary,
        scope=scope_for_path(path) or "",
        status=page.status,
        valid_from=_date(page.meta.get("valid_from")),
        valid_to=_date(page.meta.get("valid_to")),
        kind=str(page.meta.get("type") or ""),
        source=source,
    )


def collect_corpus(
    repo: Repo,
    commit: pygit2.Commit,
    bound: int,
    overlap: int,
    cache: SourceCache | None = None,
) -> Corpus:
    """Pages and evidence of ``commit``, chunked. Reads git objects only, never the working tree.

    ``cache`` maps a source (path and blob id) to the document and chunks an earlier build made
    from exactly that blob with the same chunking settings; only new blobs are parsed.
    """
    cache = cache or {}
    docs: list[Doc] = []
    chunks: list[Chunk] = []
    skipped: list[tuple[str, str]] = []
    for path, oid in sorted(repo.tree_files(commit, PAGE_FOLDERS).items()):
        if not path.endswith(".md") or scope_for_path(path) is None:
            continue
        made = page_source(repo, path, oid, bound, overlap, cache)
        if isinstance(made[0], Doc):
            docs.append(made[0])
            chunks.extend(made[1])
        else:
            skipped.append((path, str(made[1])))
    docs_ev, chunks_ev, skipped_ev = collect_evidence(repo, commit, bound, overlap, cache)
    return Corpus(tuple(docs + docs_ev), tuple(chunks + chunks_ev), tuple(skipped + skipped_ev))


def is_page_path(path: str) -> bool:
    return path.endswith(".md") and path.startswith(PAGE_FOLDERS) and scope_for_path(path) is not None


def page_source(
    repo: Repo, path: str, oid: pygit2.Oid, bound: int, overlap: int, cache: SourceCache
) -> tuple[Doc, tuple[Chunk, ...]] | tuple[None, str]:
    """The document and chunks of the page blob ``oid`` at ``path`` (from ``cache`` when an
    earlier build made them), or (None, why it cannot be read)."""
    source = f"{path}@{oid}"
    if source in cache:
        return cache[source]
    try:
        page = parse_page(repo.read_blob(oid), path)
    except FormatError as exc:
        return None, exc.message
    return page_doc(page, path, source), tuple(chunk_page(page, bound, overlap))


def collect_evidence(
    repo: Repo,
    commit: pygit2.Commit,
    bound: int,
    overlap: int,
    cache: SourceCache,
    known: Collection[str] = frozenset(),
    kept: set[str] | None = None,
) -> tuple[list[Doc], list[Chunk], list[tuple[str, str]]]:
    """The evidence items of ``commit`` as documents and chunks. Sources in ``known`` are left
    out (a layered build's base holds them) and added to ``kept``."""
    try:
        entries = ledger_at(repo, commit)
    except (FormatError, UnicodeDecodeError) as exc:
        return [], [], [(LEDGER_PATH, getattr(exc, "message", str(exc)))]
    docs: list[Doc] = []
    chunks: list[Chunk] = []
    skipped: list[tuple[str, str]] = []
    for entry in entries:
        if not entry.path:
            continue  # a tombstone of forgotten evidence, or the record of a forgetting
        try:
            oid = commit.tree[entry.path].id
        except KeyError:
            skipped.append((entry.path, f"evidence {entry.id} is in the ledger but not in the commit"))
            continue
        title = str(entry.meta.get("title") or entry.source or entry.id)
        source = f"{entry.path}@{oid}:{entry.id}:{entry.kind}:{entry.scope}:{title}"
        if source in known:  # a layered build's base has it
            if kept is not None:
                kept.add(source)
            continue
        if source in cache:
            doc, cached = cache[source]
            docs.append(doc)
            chunks.extend(cached)
            continue
        try:
            content = repo.read_blob(oid).decode("utf-8")
        except UnicodeDecodeError:
            skipped.append((entry.path, "not UTF-8 text"))
            continue
        docs.append(Doc(entry.id, EVIDENCE, entry.path, title, "", entry.scope, "active", "", "", entry.kind, source))
        chunks.extend(chunk_evidence(entry.id, entry.kind, title, content, bound, overlap))
    return docs, chunks, skipped


class StoredChunk(Chunk):
    """A chunk of an unchanged source, as the previous version stored it: its id, document and
    content hash come from that version's manifest and row tables; the rest of its fields are
    read from ``chunks.jsonl`` only if something asks for them (an incremental build never does
    for unchanged chunks). So reusing 50,000 chunks costs no JSON parsing."""

    def __init__(self, chunk_id: str, doc: str, namespace: str, content_hash: str, reader: ChunkReader, row: int) -> None:
        self.__dict__.update(id=chunk_id, doc=doc, namespace=namespace, _hash=content_hash, _reader=reader, _row=row)

    def __getattr__(self, name: str) -> Any:  # only called for the fields not set above
        if name.startswith("_"):
            raise AttributeError(name)
        record = self._reader.record(self._row)
        for key in ("anchor", "line_start", "line_end", "title", "summary", "body"):
            object.__setattr__(self, key, record[key])
        object.__setattr__(self, "headings", tuple(record["headings"]))
        return object.__getattribute__(self, name)

    @property
    def content_hash(self) -> str:
        return str(self._hash)


class ChunkReader:
    """Reads one line of a version's ``chunks.jsonl`` by row."""

    def __init__(self, folder: Path) -> None:
        import numpy as np

        self.path = folder / "chunks.jsonl"
        self.offsets = np.load(folder / "offsets.npy")
        self.size = self.path.stat().st_size

    def record(self, row: int) -> dict[str, Any]:
        start = int(self.offsets[row])
        end = int(self.offsets[row + 1]) if row + 1 < len(self.offsets) else self.size
        with open(self.path, "rb") as handle:
            handle.seek(start)
            return dict(json.loads(handle.read(end - start)))


def load_source_cache(folder: Path) -> SourceCache:
    """Documents and chunks of a built version, by source; empty if it cannot be read.

    The chunks are ``StoredChunk`` records built from the manifest (ids in row order, content
    hashes) and the row tables, not parsed from ``chunks.jsonl``.
    """
    import gc

    import numpy as np

    from kb.errors import IndexMissingError
    from kb.retrieval.manifest import MANIFEST_FILE, load_manifest

    enabled = gc.isenabled()
    gc.disable()  # 50,000 small objects and nothing cyclic: collections here only cost time
    try:
        docs = [Doc(**d) for d in read_docs(folder)]
        manifest = load_manifest(folder / MANIFEST_FILE)
        with np.load(folder / "rows.npz") as rows:
            row_doc = rows["doc"]
        reader = ChunkReader(folder)
        ids = sorted(manifest.chunks)
        if len(ids) != len(row_doc) or len(reader.offsets) != len(ids):
            return {}
        by_doc: dict[int, list[Chunk]] = {}
        for row, (chunk_id, d) in enumerate(zip(ids, row_doc.tolist(), strict=True)):
            doc = docs[d]
            by_doc.setdefault(d, []).append(StoredChunk(chunk_id, doc.id, doc.namespace, manifest.chunks[chunk_id], reader, row))
    except (OSError, ValueError, TypeError, KeyError, IndexError, IndexMissingError):
        return {}
    finally:
        if enabled:
            gc.enable()
    return {d.source: (d, tuple(by_doc.get(i, ()))) for i, d in enumerate(docs) if d.source}


_DOCS: dict[tuple[str, int, int, int], list[dict[str, Any]]] = {}  # the last docs.json read, by file identity


def read_docs(folder: Path) -> list[dict[str, Any]]:
    """A version's ``docs.json`` records (the last one read is kept: a build reads it twice, and
    a version's files never change once it is in place)."""
    path = folder / "docs.json"
    stat = path.stat()
    key = (str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)
    if key not in _DOCS:
        _DOCS.clear()
        _DOCS[key] = json.loads(path.read_text(encoding="utf-8"))
    return _DOCS[key]
