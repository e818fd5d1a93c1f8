"""The embedding cache: no text is embedded twice by the same embedder.

A vector is stored under sha256(embedder identity, NUL, exact text), so every index built in a
repository shares it: the serving index, point-in-time indexes (``kb search --commit``), every
scope, full rebuilds after a settings change, and evaluations run inside the repository. A
build looks its texts up first and embeds only the ones never seen.

The cache is derived state: ``.kb/cache/embeddings.sqlite3`` (git-ignored, safe to delete at any
time). SQLite makes each write atomic and lets concurrent builds share the file. It holds at most
``MAX_VECTORS`` vectors (about 1.6 KB each at 384 dimensions, so about 330 MB); past that the
least recently used are dropped. A vector is written the moment the embedder hands it over
(``kb.retrieval.embedder.Streaming``), one small transaction each, from whichever thread made it:
Ctrl-C during a long call keeps every vector already computed. A file that SQLite cannot read is deleted and started afresh; if
that fails too, the build goes on without a cache. Nothing here ever stops a build.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kb.retrieval.embedder import Each, Embedder, Vectors

CACHE_FILE = Path("cache") / "embeddings.sqlite3"
MAX_VECTORS = 200_000
SCHEMA = 1
_STEP = 500  # keys per SQL statement (SQLite's variable limit is higher; this keeps them short)


def text_key(identity: str, text: str) -> bytes:
    return hashlib.sha256(identity.encode("utf-8") + b"\0" + text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    """Vectors by key in one SQLite file; every failure is a miss, never an error."""

    def __init__(self, path: Path, max_vectors: int = MAX_VECTORS) -> None:
        self.path = path
        self.max_vectors = max_vectors
        self._db: sqlite3.Connection | None = None
        self._failures = 0
        self._lock = threading.RLock()  # one connection, shared by the embedder's threads
        self._rows = 0  # an upper bound of the rows stored (counted at connect, then added to)

    def _connect(self) -> sqlite3.Connection | None:
        if self._db is None and self._failures < 2:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
                self._db = db
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: safe when the process dies, not on power loss
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version not in (0, SCHEMA):
                    raise sqlite3.DatabaseError(f"cache schema {version}")
                db.execute(
                    "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, dim INTEGER, vector BLOB, used INTEGER) WITHOUT ROWID"
                )
                db.execute("CREATE INDEX IF NOT EXISTS by_use ON vectors (used)")
                db.execute(f"PRAGMA user_version={SCHEMA}")
                self._rows = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
            except (sqlite3.Error, OSError):
                self._fail()
        return self._db

    def _fail(self) -> None:
        """The first failure deletes the file (the next call starts afresh); a second one turns
        the cache off for this process."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self._failures += 1
        if self._failures == 1:
            try:
                for suffix in ("", "-wal", "-shm"):
                    self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
            except OSError:
                self._failures = 2

    def get(self, keys: Sequence[bytes], dim: int | None) -> dict[bytes, Vectors]:
        """The stored vectors among ``keys`` (of ``dim`` floats when given); marks them used."""
        with self._lock:
            return self._get(keys, dim)

    def _get(self, keys: Sequence[bytes], dim: int | None) -> dict[bytes, Vectors]:
        import numpy as np

        db = self._connect()
        found: dict[bytes, Vectors] = {}
        if db is None:
            return found
        try:
            for i in range(0, len(keys), _STEP):
                part = list(keys[i : i + _STEP])
                marks = ",".join("?" * len(part))
                for key, size, blob in db.execute(f"SELECT key, dim, vector FROM vectors WHERE key IN ({marks})", part):
                    if len(blob) == 4 * size and (dim is None or size == dim):
                        found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
                if found:
                    db.execute(f"UPDATE vectors SET used = ? WHERE key IN ({marks})", [time.time_ns(), *part])
        except sqlite3.Error:
            self._fail()
        return found

    def put(self, items: dict[bytes, Vectors]) -> None:
        import numpy as np

        if not items:
            return
        now = time.time_ns()
        rows = [(key, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes(), now) for key, v in items.items()]
        with self._lock:
            db = self._connect()
            if db is None:
                return
            try:
                with db:
                    db.execute("BEGIN IMMEDIATE")
                    db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)
                    self._rows += len(rows)
                    if self._rows > self.max_vectors:  # count only when the bound says it may be full
                        self._rows = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
                        excess = self._rows - self.max_vectors
                        if excess > 0:  # least recently used first
                            db.execute("DELETE FROM vectors WHERE key IN (SELECT key FROM vectors ORDER BY used LIMIT ?)", (excess,))
                            self._rows -= excess
            except sqlite3.Error:
                self._fail()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class CachedEmbedder:
    """An embedder that asks the cache first; ``embedded`` counts the texts that reached the model."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.embedded = 0
        self.reused = 0

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dim(self) -> int:
        return self.inner.dim

    def lookup(self, texts: Sequence[str]) -> dict[int, Vectors]:
        """The vectors the cache already holds for ``texts``, by position; the model is not
        asked (a progressive build publishes these before it embeds anything)."""
        if not texts:
            return {}
        identity = self.identity
        keys = [text_key(identity, t) for t in texts]
        found = self.cache.get(list(dict.fromkeys(keys)), None)
        return {i: found[k] for i, k in enumerate(keys) if k in found}

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self.embed_passages_each(texts, None)

    def embed_passages_each(self, texts: Sequence[str], each: Each | None) -> Vectors:
        """The vectors of ``texts``: the cache's, and the model's for the rest, each stored the
        moment the model hands it over (then passed to ``each`` with every position it fills)."""
        import numpy as np

        from kb.retrieval.embedder import embed_each

        identity = self.identity
        keys = [text_key(identity, t) for t in texts]
        found = self.cache.get(list(dict.fromkeys(keys)), None)
        positions: dict[bytes, list[int]] = {}
        for n, key in enumerate(keys):
            positions.setdefault(key, []).append(n)
        if each is not None:
            for key, vector in found.items():
                for n in positions[key]:
                    each(n, vector)
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        order = list(missing)

        def store(n: int, vector: Vectors) -> None:
            key = order[n]
            vector = np.asarray(vector, dtype=np.float32)
            self.cache.put({key: vector})
            found[key] = vector
            if each is not None:
                for position in positions[key]:
                    each(position, vector)

        if missing:
            embed_each(self.inner, list(missing.values()), store)
        self.embedded += len(missing)
        self.reused += len(texts) - len(missing)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([found[k] for k in keys])

    def embed_query(self, text: str) -> Vectors:
        return self.inner.embed_query(text)


def with_cache(embedder: Embedder, state_dir: Path) -> Embedder:
    """``embedder`` behind the cache of the repository whose state folder is ``state_dir``."""
    if isinstance(embedder, CachedEmbedder):
        return embedder
    return CachedEmbedder(embedder, EmbeddingCache(state_dir / CACHE_FILE))
