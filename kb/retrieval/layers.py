"""Layered incremental builds: a version whose cost follows the change, laid over a full one.

A layered version holds the chunks of every source its base (the serving full version) lacks,
and the list of the base's rows it leaves out (``deleted.npy``, ``gone.npy``, ``layers.json``:
``kb.retrieval.store``). What changed comes from a tree diff between the served commit and the
target; the base's sources are looked up in its sorted ``sources.npz``, and its postings,
vectors, chunk file and manifest are not read. Past ``LAYER_MIN`` chunks (or ``LAYER_SHARE`` of
the base) the next build writes a full version again.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.repo import Repo
from kb.retrieval.chunking import EVIDENCE, PAGE, Chunk
from kb.retrieval.corpus import ChunkReader, Corpus, Doc, SourceCache, collect_evidence, is_page_path, load_source_cache, page_source
from kb.retrieval.embedder import Embedder
from kb.retrieval.manifest import MANIFEST_FILE, load_manifest
from kb.retrieval.publish import Publishing
from kb.retrieval.store import DELETED_FILE, GONE_FILE, IndexStore, base_of
from kb.retrieval.tables import SOURCES_FILE, pending_rows, read_summary
from kb.retrieval.version import BuildResult, BuildSpec, CorpusSource, LayerPlan, build_corpus
from kb.scopes import PAGE_FOLDERS

if TYPE_CHECKING:
    import numpy as np
    import pygit2
    from numpy.typing import NDArray

    from kb.retrieval.embedder import Vectors

LAYER_MIN = 2000  # a layered version's own chunks (or its base's deleted rows) past which the next build
LAYER_SHARE = 0.05  # ... or past this share of the base's rows writes a full version again


def _base_vectors(folder: Path, rows: NDArray[np.int64]) -> tuple[dict[str, Vectors], dict[str, str]]:
    """The vectors of some rows of a full version by the content hash of their chunks, and the
    chunks' ids and hashes (read from ``chunks.jsonl``: the version's manifest is not parsed)."""
    import numpy as np

    if not len(rows):
        return {}, {}
    reader = ChunkReader(folder)
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    out: dict[str, Vectors] = {}
    ids: dict[str, str] = {}
    for row in rows.tolist():
        record = reader.record(row)
        chunk = Chunk(**{**record, "headings": tuple(record["headings"])})
        out[chunk.content_hash] = np.array(vectors[row])
        ids[chunk.id] = chunk.content_hash
    return out, ids


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


def build_layered(
    repo: Repo,
    store: IndexStore,
    target: pygit2.Commit,
    embedder: Embedder,
    spec: BuildSpec,
    publishing: Publishing,
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
    served, base_summary = read_summary(current), read_summary(base_folder)
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
    layer = LayerPlan(base_name or current.name, deleted, gone_docs, base_counts, previous, previous_folder, known, removed_chunks)
    return build_corpus(store, CorpusSource(corpus, str(target.id), layer=layer), embedder, spec, publishing)
