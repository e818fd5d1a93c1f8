"""The embedding cache: a text is embedded once per embedder, whatever index asks for it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kb.retrieval.build import build_index, index_at
from kb.retrieval.embed_cache import CACHE_FILE, CachedEmbedder, EmbeddingCache, text_key, with_cache
from kb.retrieval.search import Searcher
from kb.retrieval.store import index_store
from tests.builders import commit, make_repo, page_for
from tests.kb.retrieval.test_incremental import live_vectors


class CountingEmbedder:
    """A deterministic stand-in model that records every text it is asked to embed."""

    identity = "test/counting"
    dim = 8

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[: 4 * self.dim], dtype=np.uint32) for t in texts]
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim) + 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]


def asked(model: CountingEmbedder, words: str) -> int:
    """How many times the model embedded a text containing ``words``."""
    return sum(words in text for text in model.seen)


def note(path: str, title: str, body: str) -> str:
    return page_for(path, title, f"{title}.", body, type="preference" if path.startswith("users/") else "reference")


def test_the_same_text_in_two_scopes_is_embedded_once(tmp_path: Path) -> None:
    model = CountingEmbedder()
    repo = make_repo(tmp_path / "kb", {"users/alice/tea.md": note("users/alice/tea.md", "Tea", "Green tea, no sugar.")})
    build_index(repo, embedder=model)
    assert asked(model, "Green tea, no sugar.") == 1
    # Alice's page goes, and the served index forgets its vector
    commit(repo, {"users/alice/tea.md": None})
    build_index(repo, embedder=model)
    # the same text comes back in Bob's scope: the cache has it, the model is not asked again
    commit(repo, {"users/bob/tea.md": note("users/bob/tea.md", "Tea", "Green tea, no sugar.")})
    before = len(model.seen)
    result = build_index(repo, embedder=model)
    assert result.embedded == 1 and len(model.seen) == before and asked(model, "Green tea, no sugar.") == 1
    assert result.from_cache == 1 and "embedded 1 (1 from the embedding cache)" in result.summary()
    # every row of the served index got its vector (from the cache)
    searcher = Searcher(index_store(repo).current_path(), None)
    vectors = np.array(list(live_vectors(searcher).values()))
    searcher.close()
    assert len(vectors) == result.chunks and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)


def test_a_point_in_time_index_embeds_only_texts_never_seen(tmp_path: Path) -> None:
    model = CountingEmbedder()
    repo = make_repo(tmp_path / "kb", {"knowledge/fleet.md": note("knowledge/fleet.md", "Fleet", "Three airships fly.")})
    first = str(repo.head().id)
    build_index(repo, embedder=model)
    commit(repo, {"knowledge/fleet.md": note("knowledge/fleet.md", "Fleet", "Five airships fly.")})
    second = commit(repo, {"knowledge/crew.md": note("knowledge/crew.md", "Crew", "Forty crew members.")})
    commit(repo, {"knowledge/crew.md": None})
    build_index(repo, embedder=model, full=True)  # serves HEAD as one full version: five airships, no crew page
    before = len(model.seen)
    # the first commit's text left the served index but not the cache: the model is not asked
    _, built = index_at(repo, first, embedder=model)
    assert built is not None and built.embedded >= 1 and len(model.seen) == before
    assert asked(model, "Three airships fly.") == 1
    # the second commit's crew page was never embedded: it alone goes to the model
    index_at(repo, second, embedder=model)
    assert len(model.seen) == before + 1 and asked(model, "Forty crew members.") == 1


def test_a_corrupt_cache_is_started_afresh_and_the_build_goes_on(tmp_path: Path) -> None:
    model = CountingEmbedder()
    repo = make_repo(tmp_path / "kb", {"knowledge/a.md": note("knowledge/a.md", "A", "Alpha text.")})
    path = repo.state_dir / CACHE_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    result = build_index(repo, embedder=model)
    assert result.chunks == 2 and asked(model, "Alpha text.") == 1 and len(model.seen) == 2
    assert path.read_bytes().startswith(b"SQLite format 3")
    # the file was replaced by a working cache: a full rebuild asks the model for nothing
    assert build_index(repo, embedder=model, full=True).full and len(model.seen) == 2


def test_the_cache_keeps_the_most_recently_used_vectors_up_to_its_bound(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite3", max_vectors=3)
    vector = lambda n: np.full(4, n, dtype=np.float32)  # noqa: E731
    keys = [text_key("m", f"text {n}") for n in range(5)]
    cache.put({keys[0]: vector(0), keys[1]: vector(1), keys[2]: vector(2)})
    assert set(cache.get([keys[0]], 4)) == {keys[0]}  # text 0 used again: text 1 is now the oldest
    cache.put({keys[3]: vector(3)})
    cache.put({keys[4]: vector(4)})
    assert set(cache.get(keys, 4)) == {keys[0], keys[3], keys[4]}
    assert np.array_equal(cache.get([keys[4]], 4)[keys[4]], vector(4))
    assert cache.get([keys[4]], 5) == {}  # another dimension: not this model's vector


def test_vectors_are_kept_per_embedder_identity(tmp_path: Path) -> None:
    one, other = CountingEmbedder(), CountingEmbedder()
    other.identity = "test/other"  # type: ignore[misc]
    cached_one = with_cache(one, tmp_path)
    cached_other = with_cache(other, tmp_path)
    assert isinstance(cached_one, CachedEmbedder) and with_cache(cached_one, tmp_path) is cached_one
    cached_one.embed_passages(["same words", "same words"])
    cached_other.embed_passages(["same words"])
    assert one.seen == ["same words"] and other.seen == ["same words"]
    again = cached_one.embed_passages(["same words"])
    assert one.seen == ["same words"] and cached_one.reused == 2 and again.shape == (1, 8)


def test_a_locomo_memory_embeds_each_distinct_text_once(tmp_path: Path) -> None:
    """Both speakers of one conversation store the same sessions, each in their own scope, and the
    index is rebuilt after each ingest (as ``kb eval memory --locomo`` does): every distinct chunk
    text reaches the model once; a full rebuild and a point-in-time index reach it not at all."""
    import json

    from pipeline.eval.memory import eval_repository, slug
    from pipeline.memory import ingest
    from tests.pipeline.eval.test_locomo_eval import SAMPLE

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([SAMPLE]))
    repo = eval_repository(tmp_path / "kb", None)
    model = CountingEmbedder()
    chunks = []
    first = None
    for speaker in ("Rosa", "Tomas"):
        ingest(repo, slug(f"conv-t-{speaker}"), [data], sample="conv-t", speaker=speaker, build_index=False)
        result = build_index(repo, embedder=model)
        first = first or result.commit
        chunks.append(result.chunks)
    assert len(model.seen) == len(set(model.seen)) > 0  # each distinct text once
    assert chunks[1] > len(set(model.seen))  # the shared sessions' chunks are served in both scopes
    assert asked(model, "I adopted a beagle called Pepper") >= 1
    before = len(model.seen)
    full = build_index(repo, embedder=model, full=True)
    _, at = index_at(repo, first, embedder=model)
    assert len(model.seen) == before and full.chunks == chunks[1] and at is not None and at.chunks == chunks[0]
