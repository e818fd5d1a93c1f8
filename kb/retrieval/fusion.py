"""Score normalisation for fusing retrievers' lists (``Searcher.fusion`` "norm" and "norm-chunk")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping


class Scored(Protocol):
    """One retriever's list (``kb.retrieval.search.Candidates``): rows in rank order, scores."""

    rows: list[int]
    scores: list[float]


def normalised(lists: Mapping[str, Scored], bm25_share: float) -> dict[str, dict[int, float]]:
    """Per list, per chunk row: its min-max normalised score (the list's top chunk 1.0, its last
    0.0) times the list's weight (``bm25_share`` for BM25, the rest for dense)."""
    out: dict[str, dict[int, float]] = {}
    for name, cand in lists.items():
        weight = bm25_share if name == "bm25" else 1.0 - bm25_share
        hi, lo = (max(cand.scores), min(cand.scores)) if cand.scores else (0.0, 0.0)
        out[name] = {
            row: weight * ((score - lo) / (hi - lo) if hi > lo else 1.0) for row, score in zip(cand.rows, cand.scores, strict=True)
        }
    return out
