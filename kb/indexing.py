"""Building the serving indexes (Whoosh BM25F + FAISS vectors) from one commit.

Everything lives under ``.kb/index/`` (git-ignored): one folder per version under ``versions/``
and a ``CURRENT`` file naming the version that serves. A build reads pages (``knowledge/``,
``users/``) and evidence (the ledger and its blobs) from git objects of one commit, never the
working tree; plans with ``kb.manifest.plan_build``; writes the new version into a temporary
folder (copying the previous text index and patching it, reusing stored vectors for unchanged
content hashes); renames the folder into place, replaces ``CURRENT`` atomically and only then
removes versions older than the previous one. A build killed at any point leaves ``CURRENT``
and the version it names untouched. Builds run under the repository's ``index`` lock.

Files of a version: ``manifest.json`` (written last), ``docs.json`` (one record per page or
evidence item: scope, status, validity), ``rows.npz`` (per chunk row: doc, lines),
``chunks.jsonl`` + ``offsets.npy`` (chunk text, read lazily), ``vectors.npy`` (rows x dim),
``whoosh/`` and ``whoosh_rows.npy`` (Whoosh document number -> row), ``bm25.npz`` (the
Whoosh postings exported for numpy scoring, ``kb.bm25``).

Point-in-time indexes (``kb search --commit``) live under ``at/<commit id>/``, each a store of
the same shape, built on first use from the serving version plus the chunks that differ.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kb.chunking import CHUNKER_VERSION, EVIDENCE, PAGE, Chunk, chunk_evidence, chunk_page
from kb.config import Config, config_hash
from kb.embedder import Embedder, embed_all, make_embedder
from kb.errors import FormatError, IndexMissingError, NotFoundError
from kb.manifest import MANIFEST_FILE, BuildPlan, Manifest, load_manifest, plan_build
from kb.page import page_id_for_path, parse_page, scope_for_path
from kb.repo import Repo, atomic_write

INDEX_DIR = "index"
CURRENT_FILE = "CURRENT"
VERSIONS_DIR = "versions"
AT_DIR = "at"  # point-in-time indexes: at/<commit id>/ (a store of its own each)
AT_KEEP = 3  # point-in-time indexes kept, most recently used first
TMP_PREFIX = ".tmp-"
PAGE_PREFIXES = ("knowledge/", "users/")
LEDGER_PATH = "evidence/ledger.jsonl"
TEXT_FIELDS = ("title", "headings", "summary", "body")
INDEX_FORMAT = 2  # the files of a version; 2 added bm25.npz. A change forces a full rebuild.

Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass(frozen=True)
class Doc:
    """A retrievable document: a page, or an evidence item (its own namespace)."""

    id: str
    namespace: str
    path: str
    title: str
    summary: str = ""
    scope: str = "system"
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
    embedded: int  # texts embedded by this build (unchanged content reuses stored vectors)
    reused: int
    removed: int  # chunk ids removed from the text index
    added: int  # chunk ids added to the text index
    seconds: float
    embed_seconds: float
    skipped: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["skipped"] = [list(s) for s in self.skipped]
        return data


# ---- reading a commit ---------------------------------------------------------------------


def _date(value: Any) -> str:
    return str(value)[:10] if value not in (None, "") else ""


def page_doc(page: Any, path: str, source: str = "") -> Doc:
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


def collect_corpus(repo: Repo, commit: Any, bound: int, overlap: int, cache: SourceCache | None = None) -> Corpus:
    """Pages and evidence of ``commit``, chunked. Reads git objects only, never the working tree.

    ``cache`` maps a source (path and blob id) to the document and chunks an earlier build made
    from exactly that blob with the same chunking settings; only new blobs are parsed.
    """
    cache = cache or {}
    docs: list[Doc] = []
    chunks: list[Chunk] = []
    skipped: list[tuple[str, str]] = []
    for path, oid in sorted(repo.tree_files(commit, PAGE_PREFIXES).items()):
        if not path.endswith(".md") or scope_for_path(path) is None:
            continue
        source = f"{path}@{oid}"
        if source in cache:
            doc, cached = cache[source]
            docs.append(doc)
            chunks.extend(cached)
            continue
        try:
            page = parse_page(repo.read_blob(oid), path)
        except FormatError as exc:
            skipped.append((path, exc.message))
            continue
        docs.append(page_doc(page, path, source))
        chunks.extend(chunk_page(page, bound, overlap))
    docs_ev, chunks_ev, skipped_ev = _collect_evidence(repo, commit, bound, overlap, cache)
    return Corpus(tuple(docs + docs_ev), tuple(chunks + chunks_ev), tuple(skipped + skipped_ev))


def _collect_evidence(repo: Repo, commit: Any, bound: int, overlap: int, cache: SourceCache) -> tuple[list[Doc], list[Chunk], list[tuple[str, str]]]:
    from kb.evidence import parse_ledger

    raw = repo.read_at(commit, LEDGER_PATH)
    if not raw:
        return [], [], []
    try:
        entries = parse_ledger(raw.decode("utf-8"))
    except (FormatError, UnicodeDecodeError) as exc:
        return [], [], [(LEDGER_PATH, getattr(exc, "message", str(exc)))]
    docs: list[Doc] = []
    chunks: list[Chunk] = []
    skipped: list[tuple[str, str]] = []
    for entry in entries:
        try:
            oid = commit.tree[entry.path].id
        except KeyError:
            skipped.append((entry.path, f"evidence {entry.id} is in the ledger but not in the commit"))
            continue
        title = str(entry.meta.get("title") or entry.source or entry.id)
        source = f"{entry.path}@{oid}:{entry.id}:{entry.kind}:{entry.scope}:{title}"
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


def load_source_cache(folder: Path) -> SourceCache:
    """Documents and chunks of a built version, by source; empty if it cannot be read."""
    try:
        docs = [Doc(**d) for d in json.loads((folder / "docs.json").read_text(encoding="utf-8"))]
        by_doc: dict[tuple[str, str], list[Chunk]] = {}
        with open(folder / "chunks.jsonl", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                record["headings"] = tuple(record["headings"])
                chunk = Chunk(**record)
                by_doc.setdefault((chunk.namespace, chunk.doc), []).append(chunk)
    except (OSError, ValueError, TypeError, KeyError):
        return {}
    return {d.source: (d, tuple(by_doc.get((d.namespace, d.id), ()))) for d in docs if d.source}


# ---- the version store --------------------------------------------------------------------


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
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        label = re.sub(r"[^A-Za-z0-9_-]", "-", commit[:12])
        name = f"{stamp}-{label}-{secrets.token_hex(3)}"
        path = self.versions / f"{TMP_PREFIX}{name}"
        path.mkdir(parents=True)
        return name, path

    def switch(self, name: str, tmp: Path) -> str | None:
        """Rename the finished version into place and point CURRENT at it; return the old one."""
        previous = self.current()
        os.replace(tmp, self.versions / name)
        atomic_write(self.root / CURRENT_FILE, (name + "\n").encode())
        return previous

    def collect_garbage(self, keep: Iterable[str | None]) -> None:
        """Remove every version but ``keep`` and any leftover temporary folder."""
        kept = {k for k in keep if k}
        if not self.versions.is_dir():
            return
        for child in self.versions.iterdir():
            if child.name not in kept:
                shutil.rmtree(child, ignore_errors=True)


def index_store(repo: Repo) -> IndexStore:
    return IndexStore(repo.state_dir / INDEX_DIR)


def build_key(config: Config, embedder_identity: str) -> dict[str, Any]:
    from kb.analysis import ANALYZER_VERSION

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

    from kb.analysis import make_analyzer

    analyzer = make_analyzer()
    text = {name: TEXT(analyzer=analyzer, phrase=False) for name in TEXT_FIELDS}
    return Schema(cid=ID(stored=True, unique=True), **text)


def _whoosh_fields(chunk: Chunk) -> dict[str, str]:
    return {"cid": chunk.id, "title": chunk.title, "headings": " ".join(chunk.headings), "summary": chunk.summary, "body": chunk.body}


def _write_whoosh(folder: Path, old_folder: Path | None, plan: BuildPlan, by_id: dict[str, Chunk]) -> None:
    from whoosh import index as windex

    if old_folder is not None and not plan.full:
        shutil.copytree(old_folder, folder)
        ix = windex.open_dir(str(folder))
    else:
        folder.mkdir()
        ix = windex.create_in(str(folder), _schema())
    writer = ix.writer(procs=1, limitmb=256, multisegment=False)
    try:
        for chunk_id in plan.delete:
            writer.delete_by_term("cid", chunk_id)
        for chunk_id in plan.add:
            writer.add_document(**_whoosh_fields(by_id[chunk_id]))
    except BaseException:
        writer.cancel()
        raise
    # Deleted documents stay in old segments (and in Whoosh's document counts) until a merge:
    # rewrite everything once they are a fifth of the index.
    stale = ix.doc_count_all() - ix.doc_count() + len(plan.delete)
    writer.commit(optimize=stale > 0.2 * max(ix.doc_count_all(), 1))
    ix.close()


def _whoosh_rows(folder: Path, row_of: dict[str, int]) -> Any:
    """Whoosh document number -> row (-1 for deleted documents)."""
    import numpy as np
    from whoosh import index as windex

    ix = windex.open_dir(str(folder))
    with ix.reader() as reader:
        out = np.full(reader.doc_count_all(), -1, dtype=np.int32)
        for docnum, stored in reader.iter_docs():
            out[docnum] = row_of[stored["cid"]]
    ix.close()
    return out


def _write_vectors(folder: Path, old_folder: Path | None, ids: Sequence[str], hashes: dict[str, str], plan: BuildPlan, fresh: Any, dim: int) -> None:
    import numpy as np

    vectors = np.zeros((len(ids), dim), dtype=np.float32)
    fresh_row = {h: i for i, h in enumerate(plan.embed)}
    old = np.load(old_folder / "vectors.npy", mmap_mode="r") if plan.reuse and old_folder is not None else None
    take_new = [(row, fresh_row[hashes[cid]]) for row, cid in enumerate(ids) if hashes[cid] in fresh_row]
    take_old = [(row, plan.reuse[hashes[cid]]) for row, cid in enumerate(ids) if hashes[cid] not in fresh_row]
    if take_new:
        rows, src = zip(*take_new)
        vectors[list(rows)] = fresh[list(src)]
    if take_old and old is not None:
        rows, src = zip(*take_old)
        vectors[list(rows)] = old[list(src)]
    np.save(folder / "vectors.npy", vectors)


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
            # vars(), not asdict(): the fields are flat, and asdict deep-copies each of them
            out.write(json.dumps(vars(chunk), ensure_ascii=False).encode("utf-8") + b"\n")
    np.save(folder / "offsets.npy", offsets)
    np.savez(folder / "rows.npz", doc=row_doc, lines=lines)
    return {"pages": sum(d.namespace == PAGE for d in docs), "evidence": sum(d.namespace == EVIDENCE for d in docs), "chunks": len(ids)}


@dataclass
class _Timer:
    embed: float = 0.0
    start: float = field(default_factory=time.perf_counter)


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
) -> BuildResult:
    """Write a new version for ``corpus`` next to the serving one and switch to it.

    Unchanged chunks are taken from ``base``'s serving version (default: ``store``'s own), so a
    point-in-time store can reuse the embeddings of the main one.
    """
    timer = _Timer()
    by_id = {c.id: c for c in corpus.chunks}
    hashes = {cid: c.content_hash for cid, c in by_id.items()}
    base = base or store
    old = base.current_manifest()
    old_folder = base.versions / base.current() if old is not None and base.current() else None
    plan = plan_build(old, hashes, key, full)
    if base is store and old is not None and not plan.full and old.source_commit == source and not plan.changed:
        return _result(source, store.current() or "", plan, corpus, timer, unchanged=True)
    text_of = {c.content_hash: c.text for c in corpus.chunks}
    name, tmp = store.new_tmp(source)
    t0 = time.perf_counter()
    stage = (lambda done, total: progress("embed", done, total)) if progress else None
    fresh = embed_all(embedder, [text_of[h] for h in plan.embed], stage)
    timer.embed = time.perf_counter() - t0
    ids = sorted(by_id)
    dim = int(fresh.shape[1]) if len(plan.embed) else embedder.dim
    _write_vectors(tmp, old_folder, ids, hashes, plan, fresh, dim)
    if progress:
        progress("text index", 0, len(plan.add))
    _write_whoosh(tmp / "whoosh", old_folder / "whoosh" if old_folder else None, plan, by_id)
    import numpy as np

    from kb.bm25 import BM25_FILE, export_bm25

    whoosh_rows = _whoosh_rows(tmp / "whoosh", {cid: row for row, cid in enumerate(ids)})
    np.save(tmp / "whoosh_rows.npy", whoosh_rows)
    export_bm25(tmp / "whoosh", whoosh_rows, len(ids), TEXT_FIELDS, tmp / BM25_FILE)
    counts = _write_tables(tmp, corpus.docs, ids, by_id)
    manifest = Manifest(source, cfg_hash, dict(key), hashes, _utc_now(), counts)
    (tmp / MANIFEST_FILE).write_text(manifest.to_json(), encoding="utf-8")
    previous = store.switch(name, tmp)
    store.collect_garbage([name, previous])
    return _result(source, name, plan, corpus, timer, unchanged=False)


def _result(source: str, version: str, plan: BuildPlan, corpus: Corpus, timer: _Timer, unchanged: bool) -> BuildResult:
    return BuildResult(
        commit=source,
        version=version,
        full=plan.full and not unchanged,
        reason=plan.reason if not unchanged else "the served version already matches",
        unchanged=unchanged,
        pages=sum(d.namespace == PAGE for d in corpus.docs),
        evidence=sum(d.namespace == EVIDENCE for d in corpus.docs),
        chunks=len(corpus.chunks),
        embedded=0 if unchanged else len(plan.embed),
        reused=0 if unchanged else len(plan.reuse),
        removed=0 if unchanged else len(plan.delete),
        added=0 if unchanged else len(plan.add),
        seconds=round(time.perf_counter() - timer.start, 3),
        embed_seconds=round(timer.embed, 3),
        skipped=corpus.skipped,
    )


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def build_index(
    repo: Repo,
    commit: str | None = None,
    full: bool = False,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
) -> BuildResult:
    """Build (or update) the serving index from ``commit`` (default HEAD), under the lock."""
    config = repo.config
    target = repo.resolve(commit) if commit else repo.head()
    if target is None:
        raise NotFoundError("the repository has no commits yet", hint="commit something first")
    embedder = embedder or make_embedder(config.retrieval.embedder)
    with repo.lock("index"):
        r = config.retrieval
        store = index_store(repo)
        key = build_key(config, embedder.identity)
        old = store.current_manifest()
        reusable = old is not None and old.build_key == key and not full
        cache = load_source_cache(store.current_path()) if reusable else None
        corpus = collect_corpus(repo, target, r.chunk_tokens, r.chunk_overlap, cache)
        return build_corpus(store, corpus, embedder, key, config_hash(config, "retrieval"), str(target.id), full, progress)


# ---- point-in-time indexes ------------------------------------------------------------------


def index_at(repo: Repo, commit: str, progress: Progress | None = None, embedder: Embedder | None = None) -> tuple[Path, BuildResult | None]:
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
    embedder = embedder or make_embedder(config.retrieval.embedder)
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
        found = at.current_manifest()  # another process may have built it meanwhile
        if found is not None and found.build_key == key:
            return at.current_path(), None
        reusable = manifest is not None and manifest.build_key == key
        cache = load_source_cache(serving.current_path()) if reusable else None
        corpus = collect_corpus(repo, commit_obj, r.chunk_tokens, r.chunk_overlap, cache)
        result = build_corpus(at, corpus, embedder, key, config_hash(config, "retrieval"), target, progress=progress, base=serving)
        os.utime(at.root)
        prune_point_in_time(serving, AT_KEEP)
    return at.current_path(), result


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
    return IndexStatus(manifest.source_commit, store.current(), manifest.built_at, head_id, behind, ahead, manifest.counts, manifest.embedder, matches, point_in_time=tuple(point_in_time_commits(store)))
