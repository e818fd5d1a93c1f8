"""The files of one index version: written or patched by a build, read by a searcher (``VersionPart``).

A version holds ``docs.json`` (one record per page or evidence item: scope, status, validity),
``rows.npz`` (per chunk row: doc, lines), ``chunks.jsonl`` + ``offsets.npy`` (chunk text, read
lazily), ``vectors.npy`` (rows x dim), ``pending.npy`` (rows whose vector is not computed yet),
``interim.npy`` (of those, rows served meanwhile with the previous version's vector for the same
text), ``bm25.npz`` (the BM25F postings and field lengths, ``kb.retrieval.bm25``) and ``summary.json``
(plus ``sources.npz`` in a full version); ``manifest.json`` is written last by the build.

An incremental build costs what the change costs: the previous version's rows map onto the new
ones by sorted searches (``Delta``); vectors, postings, row arrays and the unchanged chunks'
bytes are copied with array operations, and only the added chunks are analysed and serialised.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.errors import IndexMissingError
from kb.retrieval.chunking import EVIDENCE, PAGE, Chunk
from kb.retrieval.corpus import Doc, read_docs
from kb.retrieval.manifest import BuildPlan, Manifest

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from kb.retrieval.embedder import Vectors

TEXT_FIELDS = ("title", "headings", "summary", "body")
PENDING_FILE = "pending.npy"  # rows whose vector is not computed yet (their row of vectors.npy is zeros, or a stand-in)
INTERIM_FILE = "interim.npy"  # pending rows whose row of vectors.npy is a stand-in: the previous version's vector of that text
SUMMARY_FILE = "summary.json"  # every version: its commit and counts, read without the manifest
SOURCES_FILE = "sources.npz"  # a full version: its documents' sources, sorted, for layered builds to look up


@dataclass(frozen=True)
class Rows:
    """The rows of the version being written: chunk ids in sorted order, with their chunks and
    content hashes."""

    ids: Sequence[str]
    by_id: dict[str, Chunk]
    hashes: dict[str, str]  # chunk id -> content hash


@dataclass(frozen=True)
class Patch:
    """What a version is written from: the plan against the previous version (``old_folder``,
    None when there is none), how that version's rows map onto the new ones (``delta``, None:
    everything is written whole), the content hashes it holds no vector for (``stale``), and
    stand-in vectors for rows left pending (``standins``, by content hash: ``stand_ins``)."""

    plan: BuildPlan
    old_folder: Path | None
    delta: Delta | None
    stale: set[str]
    standins: dict[str, Vectors] = field(default_factory=dict)


def text_schema() -> Any:
    from whoosh.fields import ID, TEXT, Schema

    from kb.retrieval.analyzer import make_analyzer

    analyzer = make_analyzer()
    text = {name: TEXT(analyzer=analyzer, phrase=False) for name in TEXT_FIELDS}
    return Schema(cid=ID(stored=True, unique=True), **text)


def _whoosh_fields(chunk: Chunk) -> dict[str, str]:
    return {"cid": chunk.id, "title": chunk.title, "headings": " ".join(chunk.headings), "summary": chunk.summary, "body": chunk.body}


def write_vectors(folder: Path, rows: Rows, patch: Patch, got: dict[str, Vectors], dim: int) -> NDArray[np.int64]:
    """Write ``vectors.npy`` and return the rows left without a vector (pending).

    A row's vector comes from ``got`` (embedded or from the cache), else from the previous
    version's row of the same content (``patch.plan.reuse``) unless that row had no vector either
    (``patch.stale``); else the row is pending, and its vector is its stand-in
    (``patch.standins``: listed in ``interim.npy``) or zeros. With ``patch.delta`` (an incremental build)
    the unchanged rows are copied as one array operation and only the added ones are looked up.
    """
    import numpy as np

    ids, hashes, plan, old_folder, delta, stale = rows.ids, rows.hashes, patch.plan, patch.old_folder, patch.delta, patch.stale
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
    new_rows, new_src, old_rows, old_src, pending, interim = [], [], [], [], [], []
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
            if h in patch.standins:
                interim.append(row)
    if interim:
        vectors[interim] = np.stack([patch.standins[hashes[ids[row]]] for row in interim])
        np.save(folder / INTERIM_FILE, np.unique(np.array(interim, dtype=np.int64)))
    if new_rows:
        vectors[new_rows] = np.stack(new_src)
    if old_rows and old is not None:
        vectors[old_rows] = old[old_src]
    np.save(folder / "vectors.npy", vectors)
    left = np.unique(np.array(pending, dtype=np.int64))
    if len(left):
        np.save(folder / PENDING_FILE, left)
    return left


def pending_rows(folder: Path) -> NDArray[np.int64]:
    """The rows of a version that have no vector yet (empty for a complete version)."""
    import numpy as np

    path = folder / PENDING_FILE
    return np.load(path) if path.is_file() else np.zeros(0, dtype=np.int64)


def interim_rows(folder: Path) -> NDArray[np.int64]:
    """The pending rows of a version served meanwhile with a stand-in vector (``stand_ins``)."""
    import numpy as np

    path = folder / INTERIM_FILE
    return np.load(path) if path.is_file() else np.zeros(0, dtype=np.int64)


def stand_ins(old: Manifest | None, old_folder: Path | None, wanted: set[str]) -> dict[str, Vectors]:
    """The vectors the previous version holds for the texts ``wanted`` (content hashes): its own,
    or stand-ins it served itself. A build of the same key writes them into the rows it has yet
    to embed, so that dense search keeps finding unchanged text while a full rebuild embeds it
    again; each is replaced when its own vector is published."""
    import numpy as np

    if old is None or old_folder is None or not wanted:
        return {}
    try:
        without = set(pending_rows(old_folder).tolist()) - set(interim_rows(old_folder).tolist())
        rows: dict[str, int] = {}
        for row, cid in enumerate(sorted(old.chunks)):
            h = old.chunks[cid]
            if h in wanted and h not in rows and row not in without:
                rows[h] = row
        if not rows:
            return {}
        block = np.load(old_folder / "vectors.npy", mmap_mode="r")[list(rows.values())]  # one read, one array
        return {h: block[i] for i, h in enumerate(rows)}
    except (OSError, ValueError, IndexError):  # a previous version unreadable: no stand-ins, the rows wait
        return {}


def stale_hashes(old: Manifest | None, old_folder: Path | None) -> set[str]:
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
class Delta:
    """How the rows of the previous version map onto the new one, for an incremental build.

    Rows are chunk ids in sorted order in both versions; ``old_to_new`` gives every old row its
    new row (-1 when the chunk was deleted or its content changed). Computed from the positions
    of the changed ids alone (binary searches) and one integer array pass, so it costs little
    even at 50,000 chunks.
    """

    old_to_new: NDArray[np.int64]
    row_of: dict[str, int]  # new row of each added chunk id

    @classmethod
    def of(cls, old: Manifest | None, old_folder: Path | None, ids: Sequence[str], plan: BuildPlan) -> Delta | None:
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
    folder: Path, old_folder: Path, docs: Sequence[Doc], ids: Sequence[str], by_id: dict[str, Chunk], delta: Delta
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


def write_text_index(folder: Path, docs: Sequence[Doc], rows: Rows, patch: Patch) -> dict[str, int]:
    """The BM25 postings and the row tables: patched from the previous version when ``patch.delta``
    says how its rows map, else written from the chunks."""
    import numpy as np

    from kb.retrieval.bm25 import BM25_FILE, update_bm25

    ids, by_id, old_folder, delta = rows.ids, rows.by_id, patch.old_folder, patch.delta
    if delta is not None and old_folder is not None:
        added = {delta.row_of[cid]: _whoosh_fields(by_id[cid]) for cid in patch.plan.add}
        update_bm25(old_folder / BM25_FILE, delta.old_to_new, len(ids), added, text_schema(), TEXT_FIELDS, folder / BM25_FILE)
        return _splice_tables(folder, old_folder, docs, ids, by_id, delta)
    everything = {row: _whoosh_fields(by_id[cid]) for row, cid in enumerate(ids)}
    update_bm25(None, np.zeros(0, dtype=np.int64), len(ids), everything, text_schema(), TEXT_FIELDS, folder / BM25_FILE)
    return _write_tables(folder, docs, ids, by_id)


def write_summary(folder: Path, source: str, counts: dict[str, int], docs: Sequence[Doc] | None) -> None:
    """``summary.json``, and for a full version (``docs``) ``sources.npz``: each document's
    source (sorted), its index and whether it is evidence."""
    import numpy as np

    (folder / SUMMARY_FILE).write_text(json.dumps({"source_commit": source, "counts": counts}), encoding="utf-8")
    if docs is not None:
        keys = np.array([d.source for d in docs], dtype=str)
        order = np.argsort(keys, kind="stable")
        evidence = np.array([d.namespace == EVIDENCE for d in docs], dtype=bool)
        np.savez(folder / SOURCES_FILE, key=keys[order], doc=order.astype(np.int64), evidence=evidence)


def read_summary(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
        return {"source_commit": str(data["source_commit"]), "counts": {str(k): int(v) for k, v in data["counts"].items()}}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copyfile(source, target)


class VersionPart:
    """The files of one full version, as a searcher reads them (a layered version has two:
    its base's and its own); chunk records are read lazily by row."""

    def __init__(self, folder: Path, manifest: Manifest) -> None:
        import numpy as np

        from kb.retrieval.bm25 import BM25_FILE, Bm25Table

        self.docs: list[dict[str, Any]] = json.loads((folder / "docs.json").read_text(encoding="utf-8"))
        with np.load(folder / "rows.npz") as rows:
            self.row_doc = rows["doc"]
            self.row_lines = rows["lines"]
        self.rows = len(self.row_doc)
        self.offsets = np.load(folder / "offsets.npy")
        self.vectors = np.load(folder / "vectors.npy")
        self.bm25 = Bm25Table(folder / BM25_FILE, TEXT_FIELDS)
        self.ids = sorted(manifest.chunks)  # rows are chunk ids in sorted order
        self.live = np.ones(self.rows, dtype=bool)
        self.pending = np.zeros(self.rows, dtype=bool)
        self.pending[pending_rows(folder)] = True
        self.pending[interim_rows(folder)] = False  # a stand-in vector serves until the row's own is published
        if (
            len(self.ids) != self.rows
            or self.vectors.shape[0] != self.rows
            or self.bm25.n_rows != self.rows
            or len(self.offsets) != self.rows
        ):
            raise IndexMissingError(f"the search index in {folder} is corrupted (row counts disagree)")
        self._fd = os.open(folder / "chunks.jsonl", os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size

    def record(self, row: int) -> dict[str, Any]:
        start = int(self.offsets[row])
        end = int(self.offsets[row + 1]) if row + 1 < len(self.offsets) else self._size
        return dict(json.loads(os.pread(self._fd, end - start, start)))

    def close(self) -> None:
        os.close(self._fd)
