"""Building the serving indexes (BM25F postings + FAISS vectors) from one commit, and their status.

Everything lives under ``.kb/index/`` (git-ignored): one folder per version under ``versions/``
and a ``CURRENT`` file naming the version that serves. A build reads pages (``knowledge/``,
``users/``) and evidence (the ledger and its blobs) from git objects of one commit, never the
working tree; plans with ``kb.retrieval.manifest.plan_build``; writes the new version
(``kb.retrieval.version``: its files, ``kb.retrieval.tables``; layered over a full version when
the change is small, ``kb.retrieval.layers``; searchable before its embedding ends,
``kb.retrieval.publish``). A build killed at any point leaves ``CURRENT`` and the version it
names untouched; every later build (under the lock, before it starts) removes the temporary
folders of builds whose process is gone, in the serving store and the point-in-time ones
(``kb.retrieval.store.collect_stale_builds``). Builds run under the repository's ``index`` lock.

Point-in-time indexes (``kb search --commit``) live under ``at/<commit id>/``, each a store of
the same shape, built on first use from the serving version plus the chunks that differ.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kb.config import Config, config_hash
from kb.errors import IndexMissingError, NotFoundError
from kb.repo import Repo, describe_holder
from kb.retrieval.chunking import CHUNKER_VERSION
from kb.retrieval.corpus import SourceCache, collect_corpus, load_source_cache
from kb.retrieval.embed_cache import with_cache
from kb.retrieval.embedder import Embedder, make_embedder
from kb.retrieval.layers import build_layered
from kb.retrieval.manifest import MANIFEST_FILE, load_manifest
from kb.retrieval.publish import INLINE_MAX, PUBLISH_BATCH, Progress, Publishing
from kb.retrieval.store import (
    AT_DIR,
    AT_KEEP,
    IndexStore,
    base_of,
    collect_stale_builds,
    index_store,
    point_in_time_commits,
    prune_point_in_time,
)
from kb.retrieval.tables import interim_rows, pending_rows
from kb.retrieval.version import BuildResult, BuildSpec, CorpusSource, build_corpus

__all__ = ["BuildResult", "IndexStatus", "build_index", "build_key", "index_at", "index_status"]

INDEX_FORMAT = 2  # the files of a version; 2 added bm25.npz. A change forces a full rebuild.


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


def _source_cache(store: IndexStore) -> SourceCache:
    """Documents and chunks of the serving version by source (a layered one: its base's and its own)."""
    try:
        folder = store.current_path()
        base = base_of(folder)
    except IndexMissingError:
        return {}
    cache = load_source_cache(store.versions / base) if base is not None else {}
    return cache | load_source_cache(folder)


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

    Incremental builds write a layered version (``kb.retrieval.layers``) while its own chunks stay
    within ``layer_limit`` (default: ``LAYER_MIN`` or ``LAYER_SHARE`` of the base, the larger),
    else a full version patched from the previous one.

    Progressive (``kb.retrieval.publish``): the new commit is searchable (BM25, plus every chunk whose
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
        spec = BuildSpec(key, config_hash(config, "retrieval"), full)
        publishing = Publishing(progressive=True, batch=batch, inline=inline, progress=progress)
        old = store.current_manifest()
        reusable = old is not None and old.build_key == key and not full
        if reusable:
            layered = build_layered(repo, store, target, embedder, spec, publishing, layer_limit)
            if layered is not None:
                return layered
        cache = _source_cache(store) if reusable else None
        corpus = collect_corpus(repo, target, r.chunk_tokens, r.chunk_overlap, cache)
        return build_corpus(store, CorpusSource(corpus, str(target.id)), embedder, spec, publishing)


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
        spec = BuildSpec(key, config_hash(config, "retrieval"))
        result = build_corpus(at, CorpusSource(corpus, target, base=serving), embedder, spec, Publishing(progress=progress))
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
    dense_pending: int = 0  # chunks of the served version without their vector yet (searched by BM25 alone ...)
    dense_interim: int = 0  # ... of them, chunks that dense search finds meanwhile by the previous version's vector
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
        pending, interim = len(pending_rows(store.current_path())), len(interim_rows(store.current_path()))
    except (IndexMissingError, OSError, ValueError):
        pending = interim = 0
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
        dense_interim=interim,
        building=holder if holder.startswith("pid ") else "",
    )
