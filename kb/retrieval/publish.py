"""Progressive publishing: a new version is searchable before the model has embedded it.

A progressive build publishes the version first with its text index whole and the vectors
known so far (reused, or in the embedding cache); the rest are embedded in small groups, and
the vectors made are published as a version of their own (``publish_batch``: the previous
version's files hard-linked, the vectors and the pending rows written anew) every ``batch``
texts or every ``every_s`` seconds, whichever comes first, so that ``kb index status`` and
hybrid search improve steadily even on a machine that embeds a text a second. A group is sized
from the rate measured so far to take about ``every_s / 6``, so the time bound holds when the
machine slows down. Each vector goes into the embedding cache the moment it is computed
(``kb.retrieval.embed_cache``). Until its vector arrives a chunk is found by BM25 alone. A
build interrupted meanwhile leaves the last published version serving, and the next build
embeds the rows it left pending, taking from the cache every vector already computed.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kb.retrieval.embed_cache import CachedEmbedder
from kb.retrieval.embedder import Embedder, embed_all, embed_each
from kb.retrieval.manifest import MANIFEST_FILE
from kb.retrieval.store import IndexStore
from kb.retrieval.tables import INTERIM_FILE, PENDING_FILE, interim_rows, link, pending_rows

if TYPE_CHECKING:
    from kb.retrieval.embedder import Vectors


# Hears of long work: (stage, done, total) or (stage, done, total, unit), as ``kb.progress.report``
# takes them (three-argument callables stay valid: the unit is passed only by this package).
Progress = Callable[..., None]
PUBLISH_BATCH = 32  # at most this many texts embedded between two published versions ...
PUBLISH_EVERY_S = 30.0  # ... and at most this long between two (while vectors are being made)
FIRST_GROUP = 8  # texts in the first group, before any rate is known
INLINE_MAX = 16  # at most this many texts to embed: embed them before publishing (a few seconds)


@dataclass(frozen=True)
class Publishing:
    """How a build publishes its version: at once with every vector (the default), or
    progressively (``progressive``): searchable first, then the vectors published every
    ``batch`` texts or ``every_s`` seconds, unless no more than ``inline`` texts need the model.
    ``progress`` hears of each stage. ``embed=False``: no model call at all (an evaluation of
    BM25 alone): the version is published with the vectors the cache and the previous version
    hold, every other row pending."""

    progressive: bool = False
    batch: int = PUBLISH_BATCH
    every_s: float = PUBLISH_EVERY_S
    embed: bool = True
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
    if missing and publishing.embed and (inline < 0 or len(missing) <= inline):
        stage = (lambda done, total: progress("embed", done, total, "chunks")) if progress else None
        got.update(zip(missing, embed_all(embedder, [text_of[h] for h in missing], stage), strict=True))
    timer.embed = time.perf_counter() - t0


def embed_pending(store: IndexStore, name: str, waiting: Waiting, embedder: Embedder, publishing: Publishing, timer: Timer) -> str:
    """Embed the texts of the pending rows of version ``name``, publishing a version every
    ``publishing.batch`` vectors or ``publishing.every_s`` seconds; return the last version's name."""
    rows_of, text_of, progress = waiting.rows_of, waiting.text_of, publishing.progress
    todo = sorted(rows_of)
    batch, every = max(1, publishing.batch), max(0.001, publishing.every_s)
    t0 = last = time.perf_counter()
    fresh: list[tuple[list[int], Vectors]] = []  # made since the last publication
    lock = threading.Lock()
    done = [0]
    if progress:
        progress("embed", 0, len(todo), "chunks")
    at, group = 0, min(batch, FIRST_GROUP)
    part: list[str] = []

    def each(n: int, vector: Vectors) -> None:
        with lock:  # from the embedder's threads, as each vector is made
            fresh.append((rows_of[part[n]], vector))
            done[0] += 1
            if progress:
                progress("embed", done[0], len(todo), "chunks")

    while at < len(todo):
        part = todo[at : at + group]
        started = time.perf_counter()
        embed_each(embedder, [text_of[h] for h in part], each)
        at += len(part)
        now = time.perf_counter()
        rate = len(part) / max(now - started, 1e-6)  # texts a second, on this machine now
        step = max(1, min(batch, int(rate * every / 6)))  # about every_s / 6 at that rate
        if fresh and (at >= len(todo) or len(fresh) >= batch or now - last + step / rate > every):
            name = publish_batch(store, name, waiting.source, list(fresh))
            fresh.clear()
            last = time.perf_counter()
            timer.published += 1
        group = max(1, min(step, batch - len(fresh)))  # the next publication after ``batch`` vectors at most
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
