"""Progressive publishing: a new version is searchable before the model has embedded it.

A progressive build publishes the version first with its text index whole and the vectors
known so far (reused, or in the embedding cache); the rest are embedded ``batch`` texts at a
time, each batch published as a version of its own (``publish_batch``: the previous version's
files hard-linked, the vectors and the pending rows written anew). Until its vector arrives a
chunk is found by BM25 alone. A build interrupted meanwhile leaves the last published version
serving, and the next build embeds the rows it left pending.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kb.retrieval.embed_cache import CachedEmbedder
from kb.retrieval.embedder import Embedder, embed_all
from kb.retrieval.manifest import MANIFEST_FILE
from kb.retrieval.store import IndexStore
from kb.retrieval.tables import INTERIM_FILE, PENDING_FILE, interim_rows, link, pending_rows

if TYPE_CHECKING:
    from kb.retrieval.embedder import Vectors

Progress = Callable[[str, int, int], None]  # (stage, done, total)
PUBLISH_BATCH = 256  # texts a progressive build embeds between two published versions
INLINE_MAX = 16  # at most this many texts to embed: embed them before publishing (a few seconds)


@dataclass(frozen=True)
class Publishing:
    """How a build publishes its version: at once with every vector (the default), or
    progressively (``progressive``): searchable first, then ``batch`` texts embedded at a time,
    unless no more than ``inline`` texts need the model. ``progress`` hears of each stage."""

    progressive: bool = False
    batch: int = PUBLISH_BATCH
    inline: int = INLINE_MAX
    progress: Progress | None = None


@dataclass(frozen=True)
class Waiting:
    """The rows of a published version still without a vector, by the content hash of their
    chunk, and those texts; ``source`` is the commit the version serves."""

    source: str
    rows_of: dict[str, list[int]]
    text_of: dict[str, str]


@dataclass
class Timer:
    embed: float = 0.0
    start: float = field(default_factory=time.perf_counter)
    from_cache: int = 0  # texts to embed that the embedding cache supplied
    servable: float = 0.0
    published: int = 0


def vectors_at_hand(
    embedder: Embedder, need: list[str], text_of: dict[str, str], got: dict[str, Vectors], publishing: Publishing, timer: Timer
) -> None:
    """Add to ``got`` the vectors of ``need`` that the embedding cache holds, and embed the rest
    too unless the build is progressive and more than ``publishing.inline`` are left."""
    progress = publishing.progress
    inline = publishing.inline if publishing.progressive else -1
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


def embed_pending(store: IndexStore, name: str, waiting: Waiting, embedder: Embedder, publishing: Publishing, timer: Timer) -> str:
    """Embed the texts of the pending rows of version ``name`` ``publishing.batch`` at a time,
    publishing a version after each batch; return the last version's name."""
    rows_of, text_of, progress, batch = waiting.rows_of, waiting.text_of, publishing.progress, publishing.batch
    todo = sorted(rows_of)
    t0 = time.perf_counter()
    if progress:
        progress("embed", 0, len(todo))
    for i in range(0, len(todo), max(1, batch)):
        part = todo[i : i + max(1, batch)]
        vectors = embedder.embed_passages([text_of[h] for h in part])
        name = publish_batch(store, name, waiting.source, [(rows_of[h], vectors[j]) for j, h in enumerate(part)])
        timer.published += 1
        if progress:
            progress("embed", min(i + len(part), len(todo)), len(todo))
    timer.embed += time.perf_counter() - t0
    return name


def publish_batch(store: IndexStore, name: str, source: str, filled: list[tuple[list[int], Vectors]]) -> str:
    """A new version: version ``name`` with the vectors of ``filled`` (rows, vector) written in
    and those rows no longer pending (nor served by a stand-in). Every other file is the previous version's (hard links:
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
        interim = np.intersect1d(interim_rows(previous), left)  # stand-ins not replaced yet
        if len(interim):
            np.save(tmp / INTERIM_FILE, interim)
        for path in sorted(previous.iterdir()):
            if path.name not in ("vectors.npy", PENDING_FILE, INTERIM_FILE, MANIFEST_FILE):
                link(path, tmp / path.name)
        link(previous / MANIFEST_FILE, tmp / MANIFEST_FILE)  # last: it marks the version complete
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    before = store.switch(new_name, tmp)
    store.collect_garbage([new_name, before])
    return new_name
