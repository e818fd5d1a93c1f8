"""Fusion choices of ``Searcher.fuse_keys``: reciprocal ranks, or normalised scores combined."""

from __future__ import annotations

import pytest

from kb.retrieval.search import FUSION, Candidates, Searcher

PAGE_OF = {0: "a", 1: "b", 2: "c", 3: "c"}


def searcher(fusion: str, share: float = 0.5) -> Searcher:
    """A searcher with no index loaded: fuse_keys reads only its fusion settings and chunk ids."""
    s = object.__new__(Searcher)
    s.rrf_k, s.rrf_weights = 60, {"bm25": 1.0, "dense": 1.0}
    s.fusion, s.bm25_share = fusion, share
    s.ids = ["a~0", "b~0", "c~0", "c~1"]
    return s


LISTS = {
    # "a" is BM25's clear first and absent from dense; "b" is second in both lists
    "bm25": Candidates(rows=[0, 1, 2], scores=[12.0, 6.0, 0.0]),
    "dense": Candidates(rows=[3, 1, 2], scores=[1.0, 0.2, 0.0]),
}


def test_rrf_favours_the_page_both_lists_hold_and_norm_the_one_a_list_is_sure_of() -> None:
    assert FUSION == "rrf"
    order, _, _, _ = searcher("rrf").fuse_keys(LISTS, PAGE_OF.__getitem__)
    assert order[-1] == "a"  # rank 1 in one list alone is worth less than being in both
    order, _, scores, best = searcher("norm").fuse_keys(LISTS, PAGE_OF.__getitem__)
    # a = 0.5·1.0; b = 0.5·0.5 + 0.5·0.2; c = 0.5·0 + 0.5·1.0 (its best dense chunk, row 3)
    assert [round(scores[k]["rrf"], 6) for k in "abc"] == [0.5, 0.35, 0.5]
    assert order == ["a", "c", "b"]  # a and c equal: by key
    assert best["c"] == 3


def test_norm_adds_each_lists_best_chunk_and_norm_chunk_takes_the_best_chunk_alone() -> None:
    lists = {
        "bm25": Candidates(rows=[2, 0], scores=[10.0, 0.0]),  # c's chunk 0 is BM25's best
        "dense": Candidates(rows=[3, 1], scores=[0.9, 0.1]),  # c's chunk 1 is dense's best
    }
    order, _, scores, _ = searcher("norm").fuse_keys(lists, PAGE_OF.__getitem__)
    assert order[0] == "c" and scores["c"]["rrf"] == pytest.approx(1.0)
    _, _, chunked, _ = searcher("norm-chunk").fuse_keys(lists, PAGE_OF.__getitem__)
    assert chunked["c"]["rrf"] == pytest.approx(0.5)  # no single chunk of c is first in both lists


def test_the_bm25_share_moves_the_order() -> None:
    bm25_heavy, _, _, _ = searcher("norm", 0.8).fuse_keys(LISTS, PAGE_OF.__getitem__)
    dense_heavy, _, _, _ = searcher("norm", 0.2).fuse_keys(LISTS, PAGE_OF.__getitem__)
    assert bm25_heavy[0] == "a" and dense_heavy[0] == "c"


def test_one_list_alone_is_not_fused() -> None:
    order, _, _, _ = searcher("norm").fuse_keys({"dense": LISTS["dense"]}, PAGE_OF.__getitem__)
    assert order == ["c", "b"]
