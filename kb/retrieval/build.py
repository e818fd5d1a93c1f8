"""Building the serving indexes (BM25F postings + FAISS vectors) from one commit, and their status.

Everything lives under ``.kb/index/`` (git-ignored): one folder per version under ``versions/``
and a ``CURRENT`` file naming the version that serves. A build reads pages (``knowledge/``,
``users/``) and evidence (the ledger and its blobs) from git objects of one commit, never the
working tree; plans with ``kb.retrieval.manifest.plan_build``; writes the new version into a temporary
folder (patching the previous version's arrays, reusing stored vectors for unchanged content
hashes); renames the folder into place, replaces ``CURRENT`` atomically and only then
removes versions older than the previous one. A build killed at any point leaves ``CURRENT``
and the version it names untouched; every later build (under the lock, before it starts) removes
the temporary folders of builds whose process is gone, in the serving store and the point-in-time
ones (``kb.retrieval.store.collect_stale_builds``). Builds run under the repository's ``index`` lock.

Files of a version: ``manifest.json`` (written last), ``docs.json`` (one record per page or
evidence item: scope, status, validity), ``rows.npz`` (per chunk row: doc, lines),
``chunks.jsonl`` + ``offsets.npy`` (chunk text, read lazily), ``vectors.npy`` (rows x dim),
``bm25.npz`` (the BM25F postings and field lengths, ``kb.retrieval.bm25``).

An incremental build costs what the change costs: the previous version's rows map onto the new
ones by sorted searches (``_Delta``); vectors, postings, row arrays and the unchanged chunks'
bytes are copied with array operations, and only the added chunks are analysed and serialised.

Point-in-time indexes (``kb search --commit``) live under ``at/<commit id>/``, each a store of
the same shape, built on first use from the serving version plus the chunks that differ.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.clock import iso_utc
from kb.config import Config, config_hash
from kb.errors import IndexMissingError, NotFoundError
from kb.repo import Repo, describe_holder
from kb.retrieval.chunking import CHUNKER_VERSION, EVIDENCE, PAGE, Chunk
from kb.retrieval.corpus import (
    Corpus,
    Doc,
    SourceCache,
    _ChunkReader,
    collect_corpus,
    collect_evidence,
    is_page_path,
    load_source_cache,
    page_source,
    read_docs,
)
from kb.retrieval.embed_cache import CachedEmbedder, with_cache
from kb.retrieval.embedder import Embedder, embed_all, make_embedder
from kb.retrieval.manifest import MANIFEST_FILE, BuildPlan, Manifest, load_manifest, plan_build
from kb.retrieval.store import (
    AT_DIR,
    AT_KEEP,
    DELETED_FILE,
    GONE_FILE,
    LAYERS_FILE,
    IndexStore,
    base_of,
    collect_stale_builds,
    index_store,
    point_in_time_commits,
    prune_point_in_time,
)
from kb.scopes import PAGE_FOLDERS

if TYPE_CHECKING:
    import numpy as np
    import pygit2
    from numpy.typing import NDArray

    from kb.retrieval.embedder import Vectors

TEXT_FIELDS = ("title", "headings", "summary", "body")
INDEX_FORMAT = 2  # the files of a version; 2 added bm25.npz. A change forces a full rebuild.

Progress = Callable[[str, int, int], None]  # (stage, done, total)
PENDING_FILE = "pending.npy"  # rows whose vector is not computed yet (their row of vectors.npy is zeros)
PUBLISH_BATCH = 256  # texts a progressive build embeds between two published versions
INLINE_MAX = 16  # at most this many texts to embed: embed them before publishing (a few seconds)


@dataclass(frozen=True)
class BuildResult:
    commit: str
    version: str
    full: bool
    reason: str
    unchanged: bool
    pages: int
    evidence: int
    chunks: int
    embedded: int  # texts this build needed vectors for (unchanged content reuses stored vectors)
    reused: int
    removed: int  # chunk ids removed from the text index
    added: int  # chunk ids added to the text index
    seconds: float
    embed_seconds: float
    skipped: tuple[tuple[str, str], ...] = ()
    from_cache: int = 0  # of ``embedded``, how many the embedding cache supplied (no model call)
    servable_seconds: float = 0.0  # when the new commit became searchable (BM25 for chunks still without a vector)
    published: int = 0  # versions switched to: 1, or 1 + one per batch of a progressive build

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["skipped"] = [list(s) for s in self.skipped]
        return data

    def summary(self) -> str:
        """One line for people: what was built and how (``kb index build``, ``merge``, ``run``)."""
        if self.unchanged:
            return f"index already serves {self.commit[:12]} ({self.version}); nothing to do"
        how = f"full rebuild ({self.reason})" if self.full else "incremental"
        cached = f" ({self.from_cache} from the embedding cache)" if self.from_cache else ""
        if self.published > 1:
            cached += f"; searchable after {self.servable_seconds:.1f}s, vectors published in {self.published - 1} batches"
        return (
            f"built {self.version} from {self.commit[:12]}: {self.pages} pages, {self.evidence} evidence items, "
            f"{self.chunks} chunks; {how}: embedded {self.embedded}{cached}, reused {self.reused}, "
            f"removed {self.removed}, added {self.added} in {self.seconds:.1f}s"
        )


# ---- reading a commit ---------------------------------------------------------------------


def build_key(config: Config, embedder_identity: str) -> dict[str, Any]:
    from kb.retrieval.analyzer import ANALYZER_VERSION

    r = config.retrieval
    return {
        "format": INDEX_FORMAT,
        "embedder": embedder_identity,
        "chunker": CHUNKER_VERSION,
        "analyzer": ANALYZER_VERSION,
        "chunk_tokens": r.chunk_tokens,
        "chunk_overlap": r.chunk_overlap,
    }


# ---- writing a version --------------------------------------------------------------------


def _schema() -> Any:
    from whoosh.fields import ID, TEXT, Schema

    from kb.retrieval.analyzer import make_analyzer

    analyzer = make_analyzer()
    text = {name: TEXT(analyzer=analyzer, phrase=False) for name in TEXT_FIELDS}
    return Schema(cid=ID(stored=True, unique=True), **text)


def _whoosh_fields(chunk: Chunk) -> dict[str, str]:
    return {"cid": chunk.id, "title": chunk.title, "headings": " ".join(chunk.headings), "summary": chunk.summary, "body": chunk.body}


def _write_vectors(
    folder: Path,
    old_folder: Path | None,
    ids: Sequence[str],
    hashes: dict[str, str],
    plan: BuildPlan,
    got: dict[str, Vectors],
    stale: set[str],
    dim: int,
    delta: _Delta | None,
) -> NDArray[np.int64]:
    """Write ``vectors.npy`` and return the rows left without a vector (pending).

    A row's vector comes from ``got`` (embedded or from the cache), else from the previous
    version's row of the same content (``plan.reuse``) unless that row had no vector either
    (``stale``); else it is zeros and the row is pending. With ``delta`` (an incremental build)
    the unchanged rows are copied as one array operation and only the added ones are looked up.
    """
    import numpy as np

    vectors = np.zeros((len(ids), dim), dtype=np.float32)
    old = np.load(old_folder / "vectors.npy", mmap_mode="r") if old_folder is not None and (plan.reuse or delta) else None
    if delta is not None and old is not None:
        kept = np.flatnonzero(delta.old_to_new >= 0)
        vectors[delta.old_to_new[kept]] = old[kept]
        todo: list[tuple[int, str]] = [(row, cid) for cid, row in delta.row_of.items()]
        if stale:  # unchanged rows copied without a vector: look them up too
            todo += [(row, cid) for row, cid in enumerate(ids) if hashes[cid] in stale]
    else:
        todo = list(enumerate(ids))
    new_rows, new_src, old_rows, old_src, pending = [], [], [], [], []
    for row, cid in todo:
        h = hashes[cid]
        if h in got:
            new_rows.append(row)
            new_src.append(got[h])
        elif h in plan.reuse and h not in stale and old is not None:
            old_rows.append(row)
            old_src.append(plan.reuse[h])
        else:
            pending.append(row)
    if new_rows:
        vectors[new_rows] = np.stack(new_src)
    if old_rows and old is not None:
        vectors[old_rows] = old[old_src]
    np.save(folder / "vectors.npy", vectors)
    rows = np.unique(np.array(pending, dtype=np.int64))
    if len(rows):
        np.save(folder / PENDING_FILE, rows)
    return rows


def pending_rows(folder: Path) -> NDArray[np.int64]:
    """The rows of a version that have no vector yet (empty for a complete version)."""
    import numpy as np

    path = folder / PENDING_FILE
    return np.load(path) if path.is_file() else np.zeros(0, dtype=np.int64)


def _stale_hashes(old: Manifest | None, old_folder: Path | None) -> set[str]:
    """Content hashes of the previous version's pending rows: it has no vector for them."""
    if old is None or old_folder is None:
        return set()
    rows = pending_rows(old_folder)
    if not len(rows):
        return set()
    ids = sorted(old.chunks)
    return {old.chunks[ids[r]] for r in rows.tolist() if r < len(ids)}


_CHUNK_FIELDS = tuple(f.name for f in fields(Chunk))


def _record(chunk: Chunk) -> dict[str, Any]:
    """A chunk's line in ``chunks.jsonl`` (also for a ``StoredChunk``, whose fields load lazily)."""
    return {name: getattr(chunk, name) for name in _CHUNK_FIELDS}


def _write_tables(folder: Path, docs: Sequence[Doc], ids: Sequence[str], by_id: dict[str, Chunk]) -> dict[str, int]:
    import numpy as np

    doc_index = {(d.namespace, d.id): i for i, d in enumerate(docs)}
    (folder / "docs.json").write_text(json.dumps([vars(d) for d in docs], ensure_ascii=False, sort_keys=True), encoding="utf-8")
    offsets = np.zeros(len(ids), dtype=np.int64)
    row_doc = np.zeros(len(ids), dtype=np.int32)
    lines = np.zeros((len(ids), 2), dtype=np.int32)
    with open(folder / "chunks.jsonl", "wb") as out:
        for row, chunk_id in enumerate(ids):
            chunk = by_id[chunk_id]
            offsets[row] = out.tell()
            row_doc[row] = doc_index[(chunk.namespace, chunk.doc)]
            lines[row] = (chunk.line_start, chunk.line_end)
            out.write(json.dumps(_record(chunk), ensure_ascii=False).encode("utf-8") + b"\n")
    np.save(folder / "offsets.npy", offsets)
    np.savez(folder / "rows.npz", doc=row_doc, lines=lines)
    return {"pages": sum(d.namespace == PAGE for d in docs), "evidence": sum(d.namespace == EVIDENCE for d in docs), "chunks": len(ids)}


@dataclass(frozen=True)
class _Delta:
    """How the rows of the previous version map onto the new one, for an incremental build.

    Rows are chunk ids in sorted order in both versions; ``old_to_new`` gives every old row its
    new row (-1 when the chunk was deleted or its content changed). Computed from the positions
    of the changed ids alone (binary searches) and one integer array pass, so it costs little
    even at 50,000 chunks.
    """

    old_to_new: NDArray[np.int64]
    row_of: dict[str, int]  # new row of each added chunk id

    @classmethod
    def of(cls, old: Manifest | None, old_folder: Path | None, ids: Sequence[str], plan: BuildPlan) -> _Delta | None:
        import numpy as np

        from kb.retrieval.bm25 import BM25_FILE

        if plan.full or old is None or old_folder is None or not (old_folder / BM25_FILE).is_file():
            return None
        from bisect import bisect_left

        old_ids = sorted(old.chunks)  # the manifest keeps them sorted: a linear pass
        if not old_ids or not ids:
            return None
        # an old row's new row: itself, less the deleted rows before it, plus the added ids before it
        dead = np.array(sorted(bisect_left(old_ids, cid) for cid in plan.delete), dtype=np.int64)
        births = np.array(sorted(bisect_left(old_ids, cid) for cid in plan.add), dtype=np.int64)
        rows = np.arange(len(old_ids), dtype=np.int64)
        old_to_new = rows - np.searchsorted(dead, rows, side="left") + np.searchsorted(births, rows, side="right")
        old_to_new[dead] = -1
        row_of = {cid: bisect_left(ids, cid) for cid in plan.add}
        return cls(old_to_new, row_of)


def _splice_tables(
    folder: Path, old_folder: Path, docs: Sequence[Doc], ids: Sequence[str], by_id: dict[str, Chunk], delta: _Delta
) -> dict[str, int]:
    """``_write_tables`` for an incremental build: the unchanged chunks' lines are copied from
    the previous ``chunks.jsonl`` as byte ranges (one per run of unchanged rows) and their row
    arrays renumbered; only the added chunks are serialised."""
    import numpy as np

    doc_index = {(d.namespace, d.id): i for i, d in enumerate(docs)}
    (folder / "docs.json").write_text(json.dumps([vars(d) for d in docs], ensure_ascii=False, sort_keys=True), encoding="utf-8")
    old_docs = read_docs(old_folder)
    old_doc_to_new = np.array([doc_index.get((d["namespace"], d["id"]), -1) for d in old_docs] + [-1], dtype=np.int32)
    old_offsets = np.load(old_folder / "offsets.npy")
    with np.load(old_folder / "rows.npz") as rows:
        old_row_doc, old_lines = rows["doc"], rows["lines"]
    n = len(ids)
    new_to_old = np.full(n, -1, dtype=np.int64)
    kept = np.flatnonzero(delta.old_to_new >= 0)
    new_to_old[delta.old_to_new[kept]] = kept
    row_doc = np.zeros(n, dtype=np.int32)
    lines = np.zeros((n, 2), dtype=np.int32)
    row_doc[delta.old_to_new[kept]] = old_doc_to_new[old_row_doc[kept]]
    if (row_doc[delta.old_to_new[kept]] < 0).any():  # a kept chunk whose document record moved: write it all
        return _write_tables(folder, docs, ids, by_id)
    lines[delta.old_to_new[kept]] = old_lines[kept]
    offsets = np.zeros(n, dtype=np.int64)
    old_end = np.append(old_offsets[1:], (old_folder / "chunks.jsonl").stat().st_size)
    # runs of consecutive new rows that are consecutive old rows: one copy each
    previous = np.concatenate([[-1], new_to_old[:-1]])
    starts = np.flatnonzero((new_to_old < 0) | (previous < 0) | (new_to_old - previous != 1))
    with open(old_folder / "chunks.jsonl", "rb") as source, open(folder / "chunks.jsonl", "wb") as out:
        for i, start in enumerate(starts.tolist()):
            stop = int(starts[i + 1]) if i + 1 < len(starts) else n
            first = int(new_to_old[start])
            if first < 0:  # an added chunk (a run of one)
                chunk = by_id[ids[start]]
                offsets[start] = out.tell()
                row_doc[start] = doc_index[(chunk.namespace, chunk.doc)]
                lines[start] = (chunk.line_start, chunk.line_end)
                out.write(json.dumps(_record(chunk), ensure_ascii=False).encode("utf-8") + b"\n")
                continue
            last = first + (stop - start) - 1
            offsets[start:stop] = old_offsets[first : last + 1] - old_offsets[first] + out.tell()
            source.seek(int(old_offsets[first]))
            out.write(source.read(int(old_end[last] - old_offsets[first])))
    np.save(folder / "offsets.npy", offsets)
    np.savez(folder / "rows.npz", doc=row_doc, lines=lines)
    return {"pages": sum(d.namespace == PAGE for d in docs), "evidence": sum(d.namespace == EVIDENCE for d in docs), "chunks": n}


def _write_text_index(
    folder: Path,
    old_folder: Path | None,
    docs: Sequence[Doc],
    ids: Sequence[str],
    by_id: dict[str, Chunk],
    plan: BuildPlan,
    delta: _Delta | None,
) -> dict[str, int]:
    """The BM25 postings and the row tables: patched from the previous version when ``delta``
    says how its rows map, else written from the chunks."""
    import numpy as np

    from kb.retrieval.bm25 import BM25_FILE, update_bm25

    if delta is not None and old_folder is not None:
        added = {delta.row_of[cid]: _whoosh_fields(by_id[cid]) for cid in plan.add}
        update_bm25(old_folder / BM25_FILE, delta.old_to_new, len(ids), added, _schema(), TEXT_FIELDS, folder / BM25_FILE)
        return _splice_tables(folder, old_folder, docs, ids, by_id, delta)
    everything = {row: _whoosh_fields(by_id[cid]) for row, cid in enumerate(ids)}
    update_bm25(None, np.zeros(0, dtype=np.int64), len(ids), everything, _schema(), TEXT_FIELDS, folder / BM25_FILE)
    return _write_tables(folder, docs, ids, by_id)


@dataclass
class _Timer:
    embed: float = 0.0
    start: float = field(default_factory=time.perf_counter)
    from_cache: int = 0  # texts to embed that the embedding cache supplied
    servable: float = 0.0
    published: int = 0


def build_corpus(
    store: IndexStore,
    corpus: Corpus,
    embedder: Embedder,
    key: dict[str, Any],
    cfg_hash: str,
    source: str,
    full: bool = False,
    progress: Progress | None = None,
    base: IndexStore | None = None,
    progressive: bool = False,
    batch: int = PUBLISH_BATCH,
    inline: int = INLINE_MAX,
    layer: _Layer | None = None,
) -> BuildResult:
    """Write a new version for ``corpus`` next to the serving one and switch to it.

    With ``layer``, ``corpus`` holds only the sources that ``layer.base`` lacks, and the new
    version is a layered one (``_build_layered``): those chunks over the base, less its
    ``layer.deleted`` rows; the previous version is then the previous layer (or none).

    Unchanged chunks are taken from ``base``'s serving version (default: ``store``'s own), so a
    point-in-time store can reuse the embeddings of the main one.

    ``progressive``: when more than ``inline`` texts need the model, the version is published
    first with the text index whole and the vectors known so far (reused, or in the embedding
    cache); the rest are embedded ``batch`` texts at a time, each batch published as a version
    of its own (``_publish_batch``). Until its vector arrives a chunk is found by BM25 alone. A
    build interrupted meanwhile leaves the last published version serving, and the next build
    of any commit embeds the rows it left pending (the finished batches are in that version and
    in the cache: nothing is embedded twice).
    """
    timer = _Timer()
    by_id = {c.id: c for c in corpus.chunks}
    hashes = {cid: c.content_hash for cid, c in by_id.items()}
    base = base or store
    served = base.current_manifest()
    if layer is not None:
        old, old_folder, known = layer.previous, layer.previous_folder, dict(layer.known)
    else:
        old, old_folder, known = _full_layer(base)
    plan = plan_build(old, hashes, key, full)
    stale = set() if plan.full else _stale_hashes(old, old_folder)
    if (
        base is store
        and served is not None
        and served.source_commit == source
        and served.build_key == key
        and not full
        and not _anything_pending(store)
    ):
        return _result(source, store.current() or "", plan, corpus, timer, unchanged=True, counts=served.counts)
    wanted = set(plan.embed) | (stale & set(hashes.values()))
    need = sorted(wanted - set(known))
    text_of = {hashes[c.id]: c.text for c in corpus.chunks if hashes[c.id] in wanted}
    got = {h: v for h, v in known.items() if h in wanted}
    _vectors_at_hand(embedder, need, text_of, got, progress, inline if progressive else -1, timer)
    name, tmp = store.new_tmp(source)
    try:
        ids = sorted(by_id)
        dim = _dimension(got, old_folder, embedder)
        delta = _Delta.of(old, old_folder, ids, plan)
        pending = _write_vectors(tmp, old_folder, ids, hashes, plan, got, stale, dim, delta)
        if progress:
            progress("text index", 0, len(plan.add))
        counts = _write_text_index(tmp, old_folder, corpus.docs, ids, by_id, plan, delta)
        if layer is not None:
            counts = layer.write(tmp, counts)
        _write_summary(tmp, source, counts, corpus.docs if layer is None else None)
        manifest = Manifest(source, cfg_hash, dict(key), hashes, iso_utc(), counts)
        (tmp / MANIFEST_FILE).write_text(manifest.to_json(), encoding="utf-8")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a build that fails leaves nothing; a killed one, the next build collects
        raise
    previous = store.switch(name, tmp)
    store.collect_garbage([name, previous])
    timer.servable = time.perf_counter() - timer.start
    timer.published = 1
    if len(pending):
        name = _embed_pending(store, name, source, ids, hashes, pending, text_of, embedder, batch, progress, timer)
    changes = layer.changes(plan, hashes) if layer is not None else None
    return _result(source, name, plan, corpus, timer, unchanged=False, embedded=len(need), counts=counts, changes=changes)


LAYER_MIN = 2000  # a layered version's own chunks (or its base's deleted rows) past which the next build
LAYER_SHARE = 0.05  # ... or past this share of the base's rows writes a full version again


@dataclass(frozen=True)
class _Layer:
    """What a layered build adds to ``build_corpus``: the base it lays its chunks over, the
    base's rows it leaves out, and the previous layer (the version it patches)."""

    base: str  # the base version's name
    deleted: NDArray[np.int64]  # base rows this version leaves out (sorted)
    gone: NDArray[np.int64]  # base documents this version leaves out (sorted)
    base_counts: dict[str, int]  # pages, evidence and chunks of the base that remain
    previous: Manifest | None  # the previous layer over the same base (None: the base served)
    previous_folder: Path | None
    known: dict[str, Vectors]  # vectors of the rows this build removed from the base, by content hash
    removed_chunks: dict[str, str]  # chunk id -> content hash of those rows

    def changes(self, plan: BuildPlan, hashes: dict[str, str]) -> tuple[int, int]:
        """(removed, added) chunk ids against the version before, as a full version counts them:
        a chunk of a re-laid page that did not change is neither."""
        added = sum(self.removed_chunks.get(cid) != hashes[cid] for cid in plan.add)
        removed = len(plan.delete) + sum(hashes.get(cid) != h for cid, h in self.removed_chunks.items())
        return removed, added

    def write(self, folder: Path, counts: dict[str, int]) -> dict[str, int]:
        """Write the layer's own files into ``folder``; the version's counts (base + layer)."""
        import numpy as np

        (folder / LAYERS_FILE).write_text(json.dumps({"base": self.base}), encoding="utf-8")
        np.save(folder / DELETED_FILE, self.deleted)
        np.save(folder / GONE_FILE, self.gone)
        return {k: self.base_counts.get(k, 0) + counts.get(k, 0) for k in ("pages", "evidence", "chunks")}


def _full_layer(store: IndexStore) -> tuple[Manifest | None, Path | None, dict[str, Vectors]]:
    """The serving version as a full version to patch: itself, or for a layered one its base,
    with the layer's vectors by content hash (so that folding a layer into a new full version
    embeds nothing again)."""
    current = store.current()
    if current is None:
        return None, None, {}
    folder = store.versions / current
    try:
        manifest = load_manifest(folder / MANIFEST_FILE)
        base = base_of(folder)
        if base is None:
            return manifest, folder, {}
        return load_manifest(store.versions / base / MANIFEST_FILE), store.versions / base, _vectors_by_hash(manifest, folder)
    except (IndexMissingError, OSError, ValueError):
        return None, None, {}


def _vectors_by_hash(manifest: Manifest, folder: Path) -> dict[str, Vectors]:
    """The vectors a (small) version holds, by content hash; rows still pending are left out."""
    import numpy as np

    vectors = np.load(folder / "vectors.npy")
    pending = set(pending_rows(folder).tolist())
    return {manifest.chunks[cid]: vectors[row] for row, cid in enumerate(sorted(manifest.chunks)) if row not in pending}


def _anything_pending(store: IndexStore) -> bool:
    current = store.current()
    if current is None:
        return False
    folder = store.versions / current
    try:
        base = base_of(folder)
    except IndexMissingError:
        return False
    return bool(len(pending_rows(folder))) or (base is not None and bool(len(pending_rows(store.versions / base))))


def _source_cache(store: IndexStore) -> SourceCache:
    """Documents and chunks of the serving version by source (a layered one: its base's and its own)."""
    try:
        folder = store.current_path()
        base = base_of(folder)
    except IndexMissingError:
        return {}
    cache = load_source_cache(store.versions / base) if base is not None else {}
    return cache | load_source_cache(folder)


def _base_vectors(folder: Path, rows: NDArray[np.int64]) -> tuple[dict[str, Vectors], dict[str, str]]:
    """The vectors of some rows of a full version by the content hash of their chunks, and the
    chunks' ids and hashes (read from ``chunks.jsonl``: the version's manifest is not parsed)."""
    import numpy as np

    if not len(rows):
        return {}, {}
    reader = _ChunkReader(folder)
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    out: dict[str, Vectors] = {}
    ids: dict[str, str] = {}
    for row in rows.tolist():
        record = reader.record(row)
        chunk = Chunk(**{**record, "headings": tuple(record["headings"])})
        out[chunk.content_hash] = np.array(vectors[row])
        ids[chunk.id] = chunk.content_hash
    return out, ids


SUMMARY_FILE = "summary.json"  # every version: its commit and counts, read without the manifest
SOURCES_FILE = "sources.npz"  # a full version: its documents' sources, sorted, for layered builds to look up


def _write_summary(folder: Path, source: str, counts: dict[str, int], docs: Sequence[Doc] | None) -> None:
    """``summary.json``, and for a full version (``docs``) ``sources.npz``: each document's
    source (sorted), its index and whether it is evidence."""
    import numpy as np

    (folder / SUMMARY_FILE).write_text(json.dumps({"source_commit": source, "counts": counts}), encoding="utf-8")
    if docs is not None:
        keys = np.array([d.source for d in docs], dtype=str)
        order = np.argsort(keys, kind="stable")
        evidence = np.array([d.namespace == EVIDENCE for d in docs], dtype=bool)
        np.savez(folder / SOURCES_FILE, key=keys[order], doc=order.astype(np.int64), evidence=evidence)


def _summary(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
        return {"source_commit": str(data["source_commit"]), "counts": {str(k): int(v) for k, v in data["counts"].items()}}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _changed_sources(before: pygit2.Commit, after: pygit2.Commit) -> tuple[set[str], dict[str, pygit2.Oid], bool]:
    """What differs between two commits, from a tree diff (identical subtrees are skipped, so
    the cost follows the change): the page sources gone (``path@blob``), the page files new or
    changed (path -> blob), and whether anything outside the page folders changed (the ledger
    or an evidence blob: evidence is then listed again)."""
    gone: set[str] = set()
    new: dict[str, pygit2.Oid] = {}
    other = False
    for delta in before.tree.diff_to_tree(after.tree).deltas:
        old, fresh = delta.old_file, delta.new_file
        if delta.status_char() != "A":
            if is_page_path(old.path):
                gone.add(f"{old.path}@{old.id}")
            elif not old.path.startswith(PAGE_FOLDERS):
                other = True
        if delta.status_char() != "D":
            if is_page_path(fresh.path):
                new[fresh.path] = fresh.id
            elif not fresh.path.startswith(PAGE_FOLDERS):
                other = True
    return gone, new, other


def _layer_corpus(
    repo: Repo,
    before: pygit2.Commit,
    target: pygit2.Commit,
    cache: SourceCache,
    sources: tuple[NDArray[Any], NDArray[np.int64], NDArray[np.bool_]],
    was_gone: NDArray[np.int64],
) -> tuple[Corpus, set[int]]:
    """The layer's documents and chunks at ``target`` (the previous layer's, ``cache``, less
    what changed since ``before``, plus what is new), and the base documents gone from it."""
    import numpy as np

    keys, key_doc, is_evidence = sources
    r = repo.config.retrieval
    gone_pages, new_pages, evidence_changed = _changed_sources(before, target)
    docs: list[Doc] = []
    chunks: list[Chunk] = []
    skipped: list[tuple[str, str]] = []
    for source, (doc, made) in sorted(cache.items()):  # the previous layer's pages that stay
        if doc.namespace == PAGE and source not in gone_pages:
            docs.append(doc)
            chunks.extend(made)
    for path, oid in sorted(new_pages.items()):  # pages new or changed since the served commit
        doc_or_none, made_or_why = page_source(repo, path, oid, r.chunk_tokens, r.chunk_overlap, cache)
        if doc_or_none is None:
            skipped.append((path, str(made_or_why)))
        else:
            docs.append(doc_or_none)
            chunks.extend(made_or_why)  # type: ignore[arg-type]
    lookup = np.array(sorted(gone_pages), dtype=str)
    at = np.searchsorted(keys, lookup) if len(lookup) and len(keys) else np.zeros(0, dtype=np.int64)
    found = at < len(keys)
    found[found] = keys[at[found]] == lookup[found]
    gone = set(was_gone.tolist()) | set(key_doc[at[found]].tolist())
    if evidence_changed:  # the evidence is listed again: the base's live items are known, the rest is the layer's
        live = {str(keys[i]): int(key_doc[i]) for i in np.flatnonzero(is_evidence[key_doc]).tolist() if int(key_doc[i]) not in gone}
        kept: set[str] = set()
        docs_ev, chunks_ev, skipped_ev = collect_evidence(repo, target, r.chunk_tokens, r.chunk_overlap, cache, live, kept)
        gone |= {doc for source, doc in live.items() if source not in kept}
    else:
        docs_ev = [doc for _, (doc, _) in sorted(cache.items()) if doc.namespace == EVIDENCE]
        chunks_ev = [c for _, (doc, made) in sorted(cache.items()) if doc.namespace == EVIDENCE for c in made]
        skipped_ev = []
    return Corpus(tuple(docs + docs_ev), tuple(chunks + chunks_ev), tuple(skipped + skipped_ev)), gone


def _build_layered(
    repo: Repo,
    store: IndexStore,
    target: pygit2.Commit,
    key: dict[str, Any],
    embedder: Embedder,
    progress: Progress | None,
    batch: int,
    inline: int,
    layer_limit: int | None = None,
) -> BuildResult | None:
    """An incremental build whose cost follows the change: a layered version over the serving
    full version (its base), holding the chunks of every source the base lacks and the list of
    the base's rows it leaves out. What changed comes from a tree diff between the served commit
    and ``target``; the base's sources are looked up in its sorted ``sources.npz``, and its
    postings, vectors, chunk file and manifest are not read. None when a full version should be
    written instead: the layer (or the rows it deletes) would pass ``layer_limit`` (default
    ``LAYER_MIN`` chunks or ``LAYER_SHARE`` of the base), the base has rows without vectors, or
    a file a layered build needs is missing (versions written before them)."""
    import numpy as np
    import pygit2

    current = store.current_path()
    base_name = base_of(current)
    base_folder = store.versions / base_name if base_name is not None else current
    served, base_summary = _summary(current), _summary(base_folder)
    if served is None or base_summary is None or not (base_folder / SOURCES_FILE).is_file() or len(pending_rows(base_folder)):
        return None
    try:
        before = repo.git[served["source_commit"]].peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    with np.load(base_folder / SOURCES_FILE) as data:
        sources = (data["key"], data["doc"], data["evidence"])
    was_gone = np.load(current / GONE_FILE) if base_name is not None else np.zeros(0, dtype=np.int64)
    previous_folder = current if base_name is not None else None
    corpus, gone = _layer_corpus(repo, before, target, load_source_cache(previous_folder) if previous_folder else {}, sources, was_gone)
    is_evidence = sources[2]
    gone_docs = np.array(sorted(gone), dtype=np.int64)
    with np.load(base_folder / "rows.npz") as rows:
        row_doc = rows["doc"]
    deleted = np.flatnonzero(np.isin(row_doc, gone_docs)).astype(np.int64) if len(gone_docs) else np.zeros(0, dtype=np.int64)
    limit = max(LAYER_MIN, int(LAYER_SHARE * len(row_doc))) if layer_limit is None else layer_limit
    if len(corpus.chunks) > limit or len(deleted) > limit:
        return None
    was_deleted = np.load(current / DELETED_FILE) if base_name is not None else np.zeros(0, dtype=np.int64)
    fresh = np.setdiff1d(deleted, was_deleted)
    counts = base_summary["counts"]
    gone_evidence = int(is_evidence[gone_docs].sum()) if len(gone_docs) else 0
    base_counts = {
        "pages": counts.get("pages", 0) - (len(gone_docs) - gone_evidence),
        "evidence": counts.get("evidence", 0) - gone_evidence,
        "chunks": len(row_doc) - len(deleted),
    }
    known, removed_chunks = _base_vectors(base_folder, fresh)
    previous = load_manifest(current / MANIFEST_FILE) if base_name is not None else None
    layer = _Layer(base_name or current.name, deleted, gone_docs, base_counts, previous, previous_folder, known, removed_chunks)
    return build_corpus(
        store,
        corpus,
        embedder,
        key,
        config_hash(repo.config, "retrieval"),
        str(target.id),
        False,
        progress,
        None,
        True,
        batch,
        inline,
        layer,
    )


def _vectors_at_hand(
    embedder: Embedder,
    need: list[str],
    text_of: dict[str, str],
    got: dict[str, Vectors],
    progress: Progress | None,
    inline: int,
    timer: _Timer,
) -> None:
    """Add to ``got`` the vectors of ``need`` that the embedding cache holds, and, when no more
    than ``inline`` are left (``inline`` < 0: always), embed those too."""
    t0 = time.perf_counter()
    before = len(got)
    if need and isinstance(embedder, CachedEmbedder):
        found = embedder.lookup([text_of[h] for h in need])
        got.update({need[i]: vector for i, vector in found.items()})
    timer.from_cache = len(got) - before
    missing = [h for h in need if h not in got]
    if missing and (inline < 0 or len(missing) <= inline):
        stage = (lambda done, total: progress("embed", done, total)) if progress else None
        got.update(zip(missing, embed_all(embedder, [text_of[h] for h in missing], stage), strict=True))
    timer.embed = time.perf_counter() - t0


def _dimension(got: dict[str, Vectors], old_folder: Path | None, embedder: Embedder) -> int:
    """The vector width: from a vector at hand, else the previous version's, else the embedder's."""
    import numpy as np

    if got:
        return int(next(iter(got.values())).shape[0])
    if old_folder is not None and (old_folder / "vectors.npy").is_file():
        shape = np.load(old_folder / "vectors.npy", mmap_mode="r").shape
        if len(shape) == 2 and shape[0] and shape[1]:
            return int(shape[1])
    return embedder.dim


def _embed_pending(
    store: IndexStore,
    name: str,
    source: str,
    ids: Sequence[str],
    hashes: dict[str, str],
    pending: NDArray[np.int64],
    text_of: dict[str, str],
    embedder: Embedder,
    batch: int,
    progress: Progress | None,
    timer: _Timer,
) -> str:
    """Embed the texts of the pending rows of version ``name`` ``batch`` at a time, publishing a
    version after each batch; return the last version's name."""
    rows_of: dict[str, list[int]] = {}
    for row in pending.tolist():
        rows_of.setdefault(hashes[ids[row]], []).append(row)
    todo = sorted(rows_of)
    t0 = time.perf_counter()
    if progress:
        progress("embed", 0, len(todo))
    for i in range(0, len(todo), max(1, batch)):
        part = todo[i : i + max(1, batch)]
        vectors = embedder.embed_passages([text_of[h] for h in part])
        name = _publish_batch(store, name, source, [(rows_of[h], vectors[j]) for j, h in enumerate(part)])
        timer.published += 1
        if progress:
            progress("embed", min(i + len(part), len(todo)), len(todo))
    timer.embed += time.perf_counter() - t0
    return name


def _publish_batch(store: IndexStore, name: str, source: str, filled: list[tuple[list[int], Vectors]]) -> str:
    """A new version: version ``name`` with the vectors of ``filled`` (rows, vector) written in
    and those rows no longer pending. Every other file is the previous version's (hard links:
    versions never change once in place). Switched to atomically like any version."""
    import numpy as np

    previous = store.versions / name
    new_name, tmp = store.new_tmp(source)
    try:
        vectors = np.load(previous / "vectors.npy")
        done = [row for rows, _ in filled for row in rows]
        for rows, vector in filled:
            vectors[rows] = vector
        np.save(tmp / "vectors.npy", vectors)
        left = np.setdiff1d(pending_rows(previous), np.array(done, dtype=np.int64))
        if len(left):
            np.save(tmp / PENDING_FILE, left)
        for path in sorted(previous.iterdir()):
            if path.name not in ("vectors.npy", PENDING_FILE, MANIFEST_FILE):
                _link(path, tmp / path.name)
        _link(previous / MANIFEST_FILE, tmp / MANIFEST_FILE)  # last: it marks the version complete
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    before = store.switch(new_name, tmp)
    store.collect_garbage([new_name, before])
    return new_name


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copyfile(source, target)


def _result(
    source: str,
    version: str,
    plan: BuildPlan,
    corpus: Corpus,
    timer: _Timer,
    unchanged: bool,
    embedded: int = 0,
    counts: dict[str, int] | None = None,
    changes: tuple[int, int] | None = None,
) -> BuildResult:
    """``changes``: (removed, added) of a layered build (whose plan compares with the previous
    layer only)."""
    if counts is None:
        counts = {"pages": sum(d.namespace == PAGE for d in corpus.docs), "evidence": sum(d.namespace == EVIDENCE for d in corpus.docs)}
        counts["chunks"] = len(corpus.chunks)
    full = plan.full and not unchanged and changes is None
    return BuildResult(
        commit=source,
        version=version,
        full=full,
        reason="the served version already matches" if unchanged else plan.reason if full else "",
        unchanged=unchanged,
        pages=counts.get("pages", 0),
        evidence=counts.get("evidence", 0),
        chunks=counts.get("chunks", 0),
        embedded=0 if unchanged else embedded,
        reused=0 if unchanged else len(plan.reuse) if changes is None else counts.get("chunks", 0) - embedded,
        removed=0 if unchanged else len(plan.delete) if changes is None else changes[0],
        added=0 if unchanged else len(plan.add) if changes is None else changes[1],
        seconds=round(time.perf_counter() - timer.start, 3),
        embed_seconds=round(timer.embed, 3),
        skipped=corpus.skipped,
        from_cache=0 if unchanged else timer.from_cache,
        servable_seconds=round(timer.servable, 3),
        published=timer.published,
    )


def build_index(
    repo: Repo,
    commit: str | None = None,
    full: bool = False,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    batch: int = PUBLISH_BATCH,
    inline: int = INLINE_MAX,
    layer_limit: int | None = None,
) -> BuildResult:
    """Build (or update) the serving index from ``commit`` (default HEAD), under the lock.

    Incremental builds write a layered version (``_build_layered``) while its own chunks stay
    within ``layer_limit`` (default: ``LAYER_MIN`` or ``LAYER_SHARE`` of the base, the larger),
    else a full version patched from the previous one.

    Progressive (``build_corpus``): the new commit is searchable (BM25, plus every chunk whose
    vector is known) before the model has embedded anything; the vectors follow ``batch`` texts
    at a time, each batch published. Readers never wait for the lock."""
    config = repo.config
    target = repo.resolve(commit) if commit else repo.head()
    if target is None:
        raise NotFoundError("the repository has no commits yet", hint="commit something first")
    embedder = with_cache(embedder or make_embedder(config.retrieval.embedder), repo.state_dir)
    with repo.lock("index"):
        r = config.retrieval
        store = index_store(repo)
        collect_stale_builds(store)
        key = build_key(config, embedder.identity)
        old = store.current_manifest()
        reusable = old is not None and old.build_key == key and not full
        if reusable:
            layered = _build_layered(repo, store, target, key, embedder, progress, batch, inline, layer_limit)
            if layered is not None:
                return layered
        cache = _source_cache(store) if reusable else None
        corpus = collect_corpus(repo, target, r.chunk_tokens, r.chunk_overlap, cache)
        return build_corpus(
            store,
            corpus,
            embedder,
            key,
            config_hash(config, "retrieval"),
            str(target.id),
            full,
            progress,
            progressive=True,
            batch=batch,
            inline=inline,
        )


# ---- point-in-time indexes ------------------------------------------------------------------


def index_at(
    repo: Repo, commit: str, progress: Progress | None = None, embedder: Embedder | None = None
) -> tuple[Path, BuildResult | None]:
    """The folder of an index version built from ``commit``, and the build if one was needed.

    When the serving index serves that commit, its folder. Otherwise a point-in-time index under
    ``.kb/index/at/<commit id>/``, built on first use from the commit's git objects and reusing
    the serving version's chunks and embeddings by content hash (only chunks that differ are
    embedded). The serving version is never touched; the ``AT_KEEP`` most recently used
    point-in-time indexes are kept.
    """
    config = repo.config
    commit_obj = repo.resolve(commit)
    target = str(commit_obj.id)
    embedder = with_cache(embedder or make_embedder(config.retrieval.embedder), repo.state_dir)
    key = build_key(config, embedder.identity)
    serving = index_store(repo)
    manifest = serving.current_manifest()
    if manifest is not None and manifest.source_commit == target and manifest.build_key == key:
        return serving.current_path(), None
    at = IndexStore(serving.root / AT_DIR / target)
    found = at.current_manifest()
    if found is not None and found.build_key == key:
        os.utime(at.root)  # most recently used
        return at.current_path(), None
    r = config.retrieval
    with repo.lock("index"):
        collect_stale_builds(serving)
        found = at.current_manifest()  # another process may have built it meanwhile
        if found is not None and found.build_key == key:
            return at.current_path(), None
        reusable = manifest is not None and manifest.build_key == key
        cache = _source_cache(serving) if reusable else None
        corpus = collect_corpus(repo, commit_obj, r.chunk_tokens, r.chunk_overlap, cache)
        result = build_corpus(at, corpus, embedder, key, config_hash(config, "retrieval"), target, progress=progress, base=serving)
        os.utime(at.root)
        prune_point_in_time(serving, AT_KEEP)
    return at.current_path(), result


# ---- status -------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexStatus:
    served_commit: str | None
    version: str | None
    built_at: str
    head: str | None
    behind: int | None  # commits on HEAD that the served commit lacks
    ahead: int | None  # commits in the served commit that HEAD lacks (built from another branch)
    counts: dict[str, int]
    embedder: str
    config_matches: bool  # False: built with other retrieval settings; rebuild to apply them
    problem: str = ""
    point_in_time: tuple[str, ...] = ()  # commits with a point-in-time index (kb search --commit)
    dense_pending: int = 0  # chunks of the served version without a vector yet (searched by BM25 alone)
    building: str = ""  # the build holding the index lock ("pid N (command ...)"), if one runs

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def index_status(repo: Repo) -> IndexStatus:
    store = index_store(repo)
    head = repo.head()
    head_id = str(head.id) if head is not None else None
    try:
        manifest = load_manifest(store.current_path() / MANIFEST_FILE)
    except IndexMissingError as exc:
        return IndexStatus(None, store.current(), "", head_id, None, None, {}, "", False, exc.message)
    ahead = behind = None
    if head is not None:
        import pygit2

        try:
            ahead_n, behind_n = repo.git.ahead_behind(head.id, pygit2.Oid(hex=manifest.source_commit))
            behind, ahead = int(ahead_n), int(behind_n)
        except (KeyError, ValueError, pygit2.GitError):  # the served commit may be gone (gc'd)
            ahead = behind = None
    embedder = make_embedder(repo.config.retrieval.embedder)
    matches = manifest.build_key == build_key(repo.config, embedder.identity)
    lock = repo.state_dir / "index.lock"
    holder = describe_holder(lock) if lock.is_file() and lock.stat().st_size else ""
    try:
        pending = len(pending_rows(store.current_path()))
    except (IndexMissingError, OSError, ValueError):
        pending = 0
    return IndexStatus(
        manifest.source_commit,
        store.current(),
        manifest.built_at,
        head_id,
        behind,
        ahead,
        manifest.counts,
        manifest.embedder,
        matches,
        point_in_time=tuple(point_in_time_commits(store)),
        dense_pending=pending,
        building=holder if holder.startswith("pid ") else "",
    )
