"""One index version written for a corpus and switched to: ``build_corpus``, and what it reports.

Where the chunks come from is a ``CorpusSource`` (the corpus, its commit, the store whose serving
version supplies unchanged chunks, and for a layered build the layer's plan); what the stored
files depend on is a ``BuildSpec``; how the version is published is a ``Publishing``
(``kb.retrieval.publish``). The version is written into a temporary folder (patching the
previous version's arrays, reusing stored vectors for unchanged content hashes,
``kb.retrieval.tables``), renamed into place, and ``CURRENT`` replaced atomically; only then are
versions older than the previous one removed.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.clock import iso_utc
from kb.errors import IndexMissingError
from kb.retrieval.chunking import EVIDENCE, PAGE
from kb.retrieval.corpus import Corpus
from kb.retrieval.embedder import Embedder
from kb.retrieval.manifest import MANIFEST_FILE, BuildPlan, Manifest, load_manifest, plan_build
from kb.retrieval.publish import Publishing, Timer, Waiting, embed_pending, vectors_at_hand
from kb.retrieval.store import DELETED_FILE, GONE_FILE, LAYERS_FILE, IndexStore, base_of
from kb.retrieval.tables import (
    Delta,
    Patch,
    Rows,
    pending_rows,
    stale_hashes,
    stand_ins,
    write_summary,
    write_text_index,
    write_vectors,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from kb.retrieval.embedder import Vectors


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


@dataclass(frozen=True)
class BuildSpec:
    """What a version's files depend on: the build key (``kb.retrieval.build.build_key``: a
    change forces a full rebuild), the hash of the retrieval settings, and whether every chunk
    is to be written again (``full``: nothing patched from the previous version)."""

    key: dict[str, Any]
    config_hash: str
    full: bool = False


@dataclass(frozen=True)
class CorpusSource:
    """Where a version's chunks come from: ``corpus``, read from ``commit`` (an evaluation's
    corpus: its fingerprint). Unchanged chunks are taken from ``base``'s serving version (None:
    the store written), so a point-in-time store can reuse the embeddings of the main one. With
    ``layer``, ``corpus`` holds only the sources that ``layer.base`` lacks."""

    corpus: Corpus
    commit: str
    base: IndexStore | None = None
    layer: LayerPlan | None = None


def build_corpus(
    store: IndexStore, source: CorpusSource, embedder: Embedder, spec: BuildSpec, publishing: Publishing | None = None
) -> BuildResult:
    """Write a new version for ``source.corpus`` next to the serving one and switch to it.

    With ``source.layer``, the new version is a layered one (``kb.retrieval.layers``): its
    chunks over the base, less the base's ``layer.deleted`` rows; the previous version is then
    the previous layer (or none).

    ``publishing.progressive``: when more than ``publishing.inline`` texts need the model, the version is published
    first with the text index whole and the vectors known so far (reused, or in the embedding
    cache); the rest are embedded ``publishing.batch`` texts at a time, each batch published as a
    version of its own (``kb.retrieval.publish``). Until its vector arrives a chunk is found by BM25
    alone, or also by the previous version's vector of the same text when the build key is the
    same (a full rebuild: ``kb.retrieval.tables.stand_ins``). A build interrupted meanwhile leaves the last published version serving, and the next build
    of any commit embeds the rows it left pending (the finished batches are in that version and
    in the cache: nothing is embedded twice).
    """
    publishing = publishing or Publishing()
    corpus, commit, layer, full, key = source.corpus, source.commit, source.layer, spec.full, spec.key
    timer = Timer()
    by_id = {c.id: c for c in corpus.chunks}
    hashes = {cid: c.content_hash for cid, c in by_id.items()}
    base = source.base or store
    served = base.current_manifest()
    if layer is not None:
        old, old_folder, known = layer.previous, layer.previous_folder, dict(layer.known)
    else:
        old, old_folder, known = _full_layer(base)
    plan = plan_build(old, hashes, key, full)
    stale = set() if plan.full else stale_hashes(old, old_folder)
    if (
        base is store
        and served is not None
        and served.source_commit == commit
        and served.build_key == key
        and not full
        and not _anything_pending(store)
    ):
        return _result(source, store.current() or "", plan, timer, unchanged=True, counts=served.counts)
    wanted = set(plan.embed) | (stale & set(hashes.values()))
    need = sorted(wanted - set(known))
    text_of = {hashes[c.id]: c.text for c in corpus.chunks if hashes[c.id] in wanted}
    got = {h: v for h, v in known.items() if h in wanted}
    vectors_at_hand(embedder, need, text_of, got, publishing, timer)
    name, tmp = store.new_tmp(commit)
    try:
        rows = Rows(sorted(by_id), by_id, hashes)
        same_key = old is not None and old.build_key == key
        standins = stand_ins(old, old_folder, wanted - set(got)) if same_key else {}
        patch = Patch(plan, old_folder, Delta.of(old, old_folder, rows.ids, plan), stale, standins)
        pending = write_vectors(tmp, rows, patch, got, _dimension(got, old_folder, embedder))
        if publishing.progress:
            publishing.progress("text index", 0, len(plan.add), "chunks")
        counts = write_text_index(tmp, corpus.docs, rows, patch)
        if publishing.progress:  # the stage ends (an open stage would go on ticking)
            publishing.progress("text index", len(plan.add), len(plan.add), "chunks")
        if layer is not None:
            counts = layer.write(tmp, counts)
        write_summary(tmp, commit, counts, corpus.docs if layer is None else None)
        manifest = Manifest(commit, spec.config_hash, dict(key), hashes, iso_utc(), counts)
        (tmp / MANIFEST_FILE).write_text(manifest.to_json(), encoding="utf-8")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a build that fails leaves nothing; a killed one, the next build collects
        raise
    previous = store.switch(name, tmp)
    store.collect_garbage([name, previous])
    timer.servable = time.perf_counter() - timer.start
    timer.published = 1
    if len(pending) and publishing.embed:
        rows_of: dict[str, list[int]] = {}
        for row in pending.tolist():
            rows_of.setdefault(hashes[rows.ids[row]], []).append(row)
        name = embed_pending(store, name, Waiting(commit, rows_of, text_of), embedder, publishing, timer)
    changes = layer.changes(plan, hashes) if layer is not None else None
    return _result(source, name, plan, timer, unchanged=False, embedded=len(need), counts=counts, changes=changes)


@dataclass(frozen=True)
class LayerPlan:
    """What a layered build (``kb.retrieval.layers``) adds to ``build_corpus``: the base it lays
    its chunks over, the base's rows it leaves out, and the previous layer (the version it patches)."""

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


def _result(
    source: CorpusSource,
    version: str,
    plan: BuildPlan,
    timer: Timer,
    *,
    unchanged: bool,
    embedded: int = 0,
    counts: dict[str, int] | None = None,
    changes: tuple[int, int] | None = None,
) -> BuildResult:
    """``changes``: (removed, added) of a layered build (whose plan compares with the previous
    layer only)."""
    corpus = source.corpus
    if counts is None:
        counts = {"pages": sum(d.namespace == PAGE for d in corpus.docs), "evidence": sum(d.namespace == EVIDENCE for d in corpus.docs)}
        counts["chunks"] = len(corpus.chunks)
    full = plan.full and not unchanged and changes is None
    return BuildResult(
        commit=source.commit,
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
