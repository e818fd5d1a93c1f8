"""Incremental builds patch the previous version's arrays; they must serve what a full build serves."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kb.repo import Repo
from kb.retrieval.build import build_index
from kb.retrieval.search import MODES, Searcher, make_query
from kb.retrieval.store import base_of, index_store
from kb.retrieval.tables import TEXT_FIELDS
from tests.builders import add_conversation, commit, make_repo, page_for, sections


class HashEmbedder:
    """Deterministic vectors from the text's hash: the build's bookkeeping is under test, not the model."""

    identity = "test-hash/1"
    dim = 16

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            vector = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = vector / np.linalg.norm(vector)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]


def live_vectors(searcher: Searcher) -> dict[str, np.ndarray]:
    """Every chunk a version serves with its vector, by chunk id (rows still pending and a
    base's deleted rows left out): what the dense index holds."""
    index = searcher._faiss
    matrix = index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, 1), dtype=np.float32)
    return {searcher.ids[row]: matrix[row] for row in np.flatnonzero(searcher.live & ~searcher.pending).tolist()}


def _page(path: str, title: str, *parts: tuple[str, str], **extra: object) -> str:
    return page_for(path, title, f"{title} in short.", f"# {title}\n\n" + sections(*parts), **extra)


PAGES = {
    "knowledge/zeppelin.md": _page(
        "knowledge/zeppelin.md", "Zeppelin Works", ("Fleet", "Three airships fly over the lake."), ("Crew", "Forty crew members.")
    ),
    "knowledge/orchard.md": _page(
        "knowledge/orchard.md",
        "Quince orchard",
        ("Trees", "The quince orchard lies north of the river."),
        ("Harvest", "Quinces ripen late."),
    ),
    "knowledge/mill.md": _page(
        "knowledge/mill.md", "Water mill", ("Wheel", "The mill wheel turns on the river."), ("Flour", "Flour for the village bakery.")
    ),
    "users/alice/travel.md": _page(
        "users/alice/travel.md", "Alice travel", ("Seats", "Alice prefers window seats on airships."), type="preference"
    ),
    "users/bob/food.md": _page("users/bob/food.md", "Bob food", ("Taste", "Bob likes quince jam and river fish."), type="preference"),
}

EDITS: list[dict[str, str | None]] = [
    # one section of one page
    {
        "knowledge/zeppelin.md": _page(
            "knowledge/zeppelin.md",
            "Zeppelin Works",
            ("Fleet", "Five airships fly over the lake at dawn."),
            ("Crew", "Forty crew members."),
        )
    },
    # a page deleted, a page added with words new to the index, one that sorts before every other
    {
        "knowledge/aardvark.md": _page("knowledge/aardvark.md", "Aardvark burrow", ("Den", "The aardvark digs by the river.")),
        "knowledge/orchard.md": None,
        "knowledge/lighthouse.md": _page(
            "knowledge/lighthouse.md",
            "Lighthouse",
            ("Lamp", "A foghorn and a lamp warn ships off the reef."),
            ("Keeper", "The keeper lives by the river mouth."),
        ),
    },
    # a page moved, a user page changed, a status change
    {
        "knowledge/mill.md": None,
        "knowledge/old/mill.md": _page(
            "knowledge/old/mill.md",
            "Water mill",
            ("Wheel", "The mill wheel turns on the river."),
            ("Flour", "Flour for the village bakery."),
        ),
        "users/alice/travel.md": _page(
            "users/alice/travel.md",
            "Alice travel",
            ("Seats", "Alice prefers aisle seats now, and trains over airships."),
            type="preference",
        ),
        "knowledge/zeppelin.md": _page(
            "knowledge/zeppelin.md",
            "Zeppelin Works",
            ("Fleet", "Five airships fly over the lake at dawn."),
            ("Crew", "Forty crew members."),
            status="deprecated",
        ),
    },
]

QUERIES = ("airships over the lake", "quince river", "river mill flour", "window seats", "foghorn reef keeper", "crew")
PRINCIPALS = ("system", "user:alice", "user:bob")


def _answers(folder: Path) -> list[object]:
    searcher = Searcher(folder, HashEmbedder())
    out: list[object] = []
    try:
        for principal in PRINCIPALS:
            for text in QUERIES:
                for mode in MODES:
                    for deprecated in (False, True):
                        query = make_query(text, principal, k=20, mode=mode, include_evidence=True, include_deprecated=deprecated)
                        out.append([hit.to_dict() for hit in searcher.search(query)])
    finally:
        searcher.close()
    return out


def _contents(folder: Path) -> dict[str, object]:
    """What a version serves, whatever its layout: per live chunk id its record, document,
    lines and vector, and every (term, chunk id) -> tf of every field with each chunk's field
    lengths (order-free)."""
    searcher = Searcher(folder, None)
    try:
        live = np.flatnonzero(searcher.live).tolist()
        ids = searcher.ids
        chunks = {
            ids[row]: (searcher.chunk_record(row), searcher.docs[int(searcher.row_doc[row])], searcher.row_lines[row].tolist())
            for row in live
        }
        vectors = {cid: vector.tolist() for cid, vector in live_vectors(searcher).items()}
        postings: dict[str, dict[tuple[str, str], float]] = {field: {} for field in TEXT_FIELDS}
        alive = set(live)
        for start, fields in searcher._bm25_table.parts:
            for field in TEXT_FIELDS:
                terms, indptr, rows, tf, lengths = (fields[field][k] for k in ("terms", "indptr", "rows", "tf", "lengths"))
                for t in range(len(terms)):
                    for r, w in zip(rows[indptr[t] : indptr[t + 1]], tf[indptr[t] : indptr[t + 1]], strict=True):
                        if int(r) + start in alive:
                            postings[field][(str(terms[t]), ids[int(r) + start])] = float(w)
                postings[field].update({("<length>", ids[r + start]): float(x) for r, x in enumerate(lengths) if r + start in alive})
    finally:
        searcher.close()
    return {"chunks": chunks, "vectors": vectors, "postings": postings}


def test_incremental_builds_serve_exactly_what_a_full_build_serves(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb", PAGES)
    add_conversation(repo, [{"role": "user", "content": "Remember the quince jam recipe."}], user="bob")
    embedder = HashEmbedder()
    assert build_index(repo, embedder=embedder).full
    for n, change in enumerate(EDITS):
        commit(repo, change, f"edit {n}")
        result = build_index(repo, embedder=embedder)
        assert not result.full and result.added + result.removed > 0
        incremental = index_store(repo).current_path()
        assert base_of(incremental) is not None  # a layered version: the base less its deleted rows, and its own
        reference = tmp_path / f"full-{n}"
        # a full build of the same commit, in a copy of the repository (the served index untouched)
        shutil.copytree(repo.root, reference, ignore=shutil.ignore_patterns("index"))
        other = Repo(reference)
        assert build_index(other, full=True, embedder=embedder).full
        full = index_store(other).current_path()
        assert _answers(incremental) == _answers(full), f"after edit {n}"
        assert _contents(incremental) == _contents(full), f"after edit {n}"
    # evidence added: the layer lists the evidence again and takes the new item
    add_conversation(repo, [{"role": "user", "content": "The lighthouse keeper prefers quince tea."}], user="alice", name="tea.json")
    result = build_index(repo, embedder=embedder)
    assert not result.full and result.added == 1 and base_of(index_store(repo).current_path()) is not None
    reference = tmp_path / "full-evidence"
    shutil.copytree(repo.root, reference, ignore=shutil.ignore_patterns("index"))
    assert build_index(Repo(reference), full=True, embedder=embedder).full
    full = index_store(Repo(reference)).current_path()
    assert _answers(index_store(repo).current_path()) == _answers(full)
    assert _contents(index_store(repo).current_path()) == _contents(full)
    # past the layer's bound the next build writes a full version: the same bytes as a full build
    commit(repo, {"knowledge/zeppelin.md": EDITS[0]["knowledge/zeppelin.md"]}, "edit back")
    folded = build_index(repo, embedder=embedder, layer_limit=0)
    assert not folded.full
    incremental = index_store(repo).current_path()
    assert base_of(incremental) is None
    reference = tmp_path / "full-last"
    shutil.copytree(repo.root, reference, ignore=shutil.ignore_patterns("index"))
    assert build_index(Repo(reference), full=True, embedder=embedder).full
    full = index_store(Repo(reference)).current_path()
    assert _answers(incremental) == _answers(full) and _contents(incremental) == _contents(full)
    for name in ("offsets.npy", "chunks.jsonl", "docs.json", "vectors.npy"):
        assert (incremental / name).read_bytes() == (full / name).read_bytes(), name
    with np.load(incremental / "rows.npz") as a, np.load(full / "rows.npz") as b:
        assert np.array_equal(a["doc"], b["doc"]) and np.array_equal(a["lines"], b["lines"])
