"""Retrieval evaluation on BEIR-format files (corpus.jsonl, queries.jsonl, qrels .tsv).

Each corpus document becomes one page (its title as the page title, its text as the body) and
goes through the product's own chunker, analyzer, embedder and fusion into an index in a work
folder (kept between runs when given, so a second run re-embeds nothing). A query is run once;
BM25, dense and hybrid rankings are all derived from the same candidate lists, collapsed to
documents (a document split into chunks counts once, at its best chunk). Metrics: recall@k,
MRR@k and nDCG@k (linear gain), averaged over queries that have judgments.

For a metric at cut-off k the retrievers' chunk lists are cut at max(candidates, 3k) before
fusing, so @10 figures use exactly the product's depth (``retrieval.candidates``) and @100
figures see deep enough lists.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb.config import Config, config_hash
from kb.errors import FormatError, UsageError
from kb.retrieval.build import build_key
from kb.retrieval.chunking import PAGE, chunk_markdown
from kb.retrieval.corpus import Corpus, Doc
from kb.retrieval.embedder import Embedder, make_embedder
from kb.retrieval.publish import Publishing
from kb.retrieval.search import MODES, Candidates, Query, Searcher
from kb.retrieval.store import IndexStore
from kb.retrieval.version import BuildSpec, CorpusSource, build_corpus

EVAL_MODES = MODES


@dataclass(frozen=True)
class BeirData:
    docs: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    skipped: int = 0  # judged queries with no text, or with only unknown documents


@dataclass(frozen=True)
class ModeReport:
    mode: str
    queries: int
    metrics: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "queries": self.queries, **self.metrics}


def _jsonl(path: Path) -> Iterable[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            for n, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise FormatError(f"{path}:{n}: not valid JSON ({exc.msg})", hint="BEIR files are JSON lines") from None
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file", hint="check the path") from None


def load_beir(corpus: Path, queries: Path, qrels: Path) -> BeirData:
    docs = {str(d["_id"]): (str(d.get("title") or ""), str(d.get("text") or "")) for d in _jsonl(corpus) if "_id" in d}
    texts = {str(q["_id"]): str(q.get("text") or "") for q in _jsonl(queries) if "_id" in q}
    judged: dict[str, dict[str, int]] = {}
    try:
        with open(qrels, encoding="utf-8") as handle:
            rows = list(csv.reader(handle, delimiter="\t"))
    except FileNotFoundError:
        raise UsageError(f"{qrels}: no such file", hint="check the path") from None
    for n, row in enumerate(rows, 1):
        if not row or (n == 1 and row[0] == "query-id"):
            continue
        if len(row) < 3:
            raise FormatError(
                f"{qrels}:{n}: expected `query-id<TAB>corpus-id<TAB>score`",
                hint="qrels are BEIR's TSV: a header line, then query-id, corpus-id and score separated by tabs",
            )
        try:
            score = int(float(row[2]))
        except ValueError:
            raise FormatError(
                f"{qrels}:{n}: score {row[2]!r} is not a number",
                hint="qrels are BEIR's TSV: a header line, then query-id, corpus-id and score separated by tabs",
            ) from None
        if score > 0:
            judged.setdefault(row[0], {})[row[1]] = score
    usable = {q: {d: s for d, s in rel.items() if d in docs} for q, rel in judged.items() if texts.get(q, "").strip()}
    usable = {q: rel for q, rel in usable.items() if rel}
    return BeirData(docs, {q: texts[q] for q in usable}, usable, len(judged) - len(usable))


def beir_corpus(data: BeirData, bound: int, overlap: int) -> Corpus:
    docs, chunks = [], []
    for doc_id in sorted(data.docs):
        title, text = data.docs[doc_id]
        docs.append(Doc(doc_id, PAGE, doc_id, title))
        chunks.extend(chunk_markdown(doc_id, PAGE, title, "", text, 0, bound, overlap))
    return Corpus(tuple(docs), tuple(chunks))


# ---- metrics ------------------------------------------------------------------------------


def recall_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant)


def mrr_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    for rank, doc in enumerate(ranked[:k], 1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 1) for rank, doc in enumerate(ranked[:k], 1))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal, 1))
    return dcg / idcg if idcg else 0.0


def _cut(lists: dict[str, Candidates], depth: int) -> dict[str, Candidates]:
    return {name: Candidates(c.rows[:depth], c.scores[:depth]) for name, c in lists.items()}


def rankings(searcher: Searcher, lists: dict[str, Candidates], modes: Sequence[str], depth: int) -> dict[str, list[str]]:
    """Document rankings per mode from one query's candidate lists cut at ``depth``."""
    cut = _cut(lists, depth)
    out = {}
    for mode in modes:
        chosen = cut if mode == "hybrid" else {mode: cut[mode]}
        out[mode] = searcher.fuse_keys(chosen, searcher.page_of)[0]
    return out


def evaluate(
    searcher: Searcher,
    data: BeirData,
    modes: Sequence[str] = EVAL_MODES,
    ks: Sequence[int] = (10,),
    progress: Callable[[str, int, int], None] | None = None,
) -> list[ModeReport]:
    """Run every judged query once; score each mode at each cut-off."""
    depths = sorted({max(searcher.candidates, 3 * k) for k in ks})
    saved = searcher.candidates
    searcher.candidates = depths[-1]
    sums: dict[str, dict[str, float]] = {m: {} for m in modes}
    try:
        for n, (qid, text) in enumerate(sorted(data.queries.items()), 1):
            query = Query(text, ("system",), max(ks), None, "hybrid" if len(modes) > 1 or modes[0] == "hybrid" else modes[0])
            vector = searcher.embed_query(text) if query.mode != "bm25" else None
            lists = searcher.rank(query, PAGE, vector)
            for depth in depths:
                ranked = rankings(searcher, lists, modes, depth)
                for k in ks:
                    if max(saved, 3 * k) != depth:
                        continue
                    for mode in modes:
                        metric = sums[mode]
                        for name, fn in (("ndcg", ndcg_at), ("recall", recall_at), ("mrr", mrr_at)):
                            key = f"{name}@{k}"
                            metric[key] = metric.get(key, 0.0) + fn(ranked[mode], data.qrels[qid], k)
            if progress and (n % 50 == 0 or n == len(data.queries)):
                progress("queries", n, len(data.queries))
    finally:
        searcher.candidates = saved
    count = len(data.queries)
    return [ModeReport(m, count, {key: round(v / count, 4) for key, v in sorted(sums[m].items())}) for m in modes]


def _fingerprint(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return "beir:" + digest.hexdigest()[:16]


def run_eval(
    corpus: Path,
    queries: Path,
    qrels: Path,
    config: Config,
    modes: Sequence[str] = EVAL_MODES,
    ks: Sequence[int] = (10,),
    workdir: Path | None = None,
    embedder: Embedder | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[list[ModeReport], dict[str, Any]]:
    """Index ``corpus`` (in ``workdir``, or a temporary folder) and evaluate ``modes``."""
    for mode in modes:
        if mode not in EVAL_MODES:
            raise UsageError(f"unknown mode {mode!r}", hint="use hybrid, bm25, dense or all")
    if not ks or min(ks) < 1:
        raise UsageError("--k needs positive cut-offs", hint="e.g. --k 10 or --k 10,100")
    data = load_beir(corpus, queries, qrels)
    if not data.queries:
        raise UsageError("no query has a judgment for a document of the corpus", hint="check that the three files belong together")
    r = config.retrieval
    embedder = embedder or make_embedder(r.embedder)
    with tempfile.TemporaryDirectory(prefix="kb-eval-") as tmp:
        store = IndexStore(workdir or Path(tmp))
        source = CorpusSource(beir_corpus(data, r.chunk_tokens, r.chunk_overlap), _fingerprint(corpus))
        spec = BuildSpec(build_key(config, embedder.identity), config_hash(config, "retrieval"))
        result = build_corpus(store, source, embedder, spec, Publishing(progress=progress, embed=any(m != "bm25" for m in modes)))
        searcher = Searcher(store.current_path(), embedder, r.candidates, r.rrf_k)
        try:
            reports = evaluate(searcher, data, modes, ks, progress)
        finally:
            searcher.close()
    info = {
        "documents": len(data.docs),
        "chunks": result.chunks,
        "embedded": result.embedded,
        "queries": len(data.queries),
        "skipped_queries": data.skipped,
        "embedder": embedder.identity,
        "chunk_tokens": r.chunk_tokens,
        "chunk_overlap": r.chunk_overlap,
        "rrf_k": r.rrf_k,
        "candidates": r.candidates,
        "build_seconds": result.seconds,
    }
    return reports, info
