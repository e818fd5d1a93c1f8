"""Hybrid search over the serving index: BM25F (Whoosh) and dense (FAISS), fused by RRF.

Filters are applied inside each retriever, before ranking: a row mask built from the documents'
scope, status and validity becomes a Whoosh ``filter=`` set of document numbers and a FAISS
``IDSelectorBitmap``; nothing outside the principal's scopes is ever scored. Pages and evidence
are separate namespaces. Page results are pages (each retriever's chunk list is collapsed to
its best chunk per page, then ranks are fused); evidence results are chunks (an item and a line
span). Ties are broken by id. A page hit's passage is its best chunk widened by the chunks next
to it in the same section, while they fit ``passage_tokens`` (a section split into 200-token
chunks often has the sentence that matches in one chunk and the code it introduces in the next).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import pickle
import zipfile
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.errors import IndexMissingError, UsageError
from kb.forgotten import Denied, load_denied
from kb.repo import Repo
from kb.retrieval.chunking import EVIDENCE, PAGE
from kb.retrieval.embedder import Embedder, make_embedder
from kb.retrieval.fusion import normalised
from kb.retrieval.manifest import MANIFEST_FILE, Manifest, load_manifest
from kb.scopes import SYSTEM, parse_principal
from kb.tokens import count_tokens

if TYPE_CHECKING:
    from collections.abc import Callable

    import faiss
    import numpy as np
    from numpy.typing import NDArray

    from kb.retrieval.embedder import Vectors
    from kb.retrieval.publish import Progress


MODES = ("hybrid", "bm25", "dense")
MAX_QUERY_CHARS = 4000  # a question, not a document: longer queries cost seconds and find nothing better
# Query-time weights of the BM25F fields: tuned on SciFact and CMRC 2018 (docs/retrieval.md).
FIELD_BOOSTS = {"title": 0.5, "headings": 0.5, "summary": 0.5, "body": 1.0}
BM25_K1 = 1.2
BM25_B = 0.75
RRF_WEIGHTS = {"bm25": 1.0, "dense": 1.0}
# How two retrievers' lists become one: "rrf" (reciprocal ranks) or "norm" (each list's scores
# min-max normalised, a key scored by its best chunk, BM25_SHARE·bm25 + (1-BM25_SHARE)·dense).
FUSION = "rrf"
BM25_SHARE = 0.5
PASSAGE_TOKENS = 400  # retrieval.passage_tokens: about two chunks of the default 200 tokens
_FAR_FUTURE = dt.date.max.toordinal()


@dataclass(frozen=True)
class Hit:
    kind: str  # "page" | "evidence"
    id: str  # page id or evidence id
    path: str
    title: str
    summary: str  # the page's L0
    anchor: str  # section of the best chunk
    line_start: int
    line_end: int
    score: float  # fused RRF score (hybrid) or the retriever's own score
    scores: dict[str, float]  # retriever -> score of its best chunk for this hit
    ranks: dict[str, int]  # retriever -> 1-based rank of this hit in its list
    chunk: str
    text: str
    scope: str
    status: str = "active"
    valid_from: str = ""
    valid_to: str = ""
    headings: tuple[str, ...] = ()  # the section path of the best chunk
    chunks: tuple[str, ...] = ()  # the chunks ``text`` is made of, in order (``chunk`` among them)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Query:
    text: str
    scopes: tuple[str, ...]
    k: int = 10
    at: int | None = None  # date ordinal
    mode: str = "hybrid"
    include_evidence: bool = False
    include_deprecated: bool = False


INDEX_PAGE_ALLOWANCE = 16  # extra fused hits fetched so that dropped index pages leave k hits


def _is_folder_index(path: str) -> bool:
    return path == "index.md" or path.endswith("/index.md")


def parse_date(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    try:
        return dt.date.fromisoformat(str(text).strip()).toordinal()
    except ValueError:
        raise UsageError(f"invalid date {text!r}", hint="use YYYY-MM-DD, e.g. --at 2025-03-01") from None


def make_query(
    text: str,
    principal: str = SYSTEM,
    k: int = 10,
    at: str | None = None,
    mode: str = "hybrid",
    include_evidence: bool = False,
    include_deprecated: bool = False,
) -> Query:
    """Validate search arguments into a Query (UsageError on bad input)."""
    if not text or not text.strip():
        raise UsageError("empty query", hint='give the words to search for, e.g. kb search "travel preferences"')
    if len(text) > MAX_QUERY_CHARS:
        raise UsageError(
            f"query of {len(text):,} characters is over the limit of {MAX_QUERY_CHARS:,}",
            hint="search for the words that matter, not a whole document",
        )
    if mode not in MODES:
        raise UsageError(f"unknown search mode {mode!r}", hint="use hybrid, bm25 or dense")
    if k < 1:
        raise UsageError(f"--k must be at least 1 (got {k})", hint="pass --k N with N >= 1, e.g. --k 10")
    return Query(text.strip(), parse_principal(principal), k, parse_date(at), mode, include_evidence, include_deprecated)


def _ordinal(value: str, default: int) -> int:
    try:
        return dt.date.fromisoformat(value[:10]).toordinal() if value else default
    except ValueError:
        return default


def rrf(lists: dict[str, list[str]], k: int, weights: dict[str, float] | None = None) -> dict[str, float]:
    """Reciprocal-rank fusion of ranked id lists."""
    fused: dict[str, float] = {}
    for name, ids in lists.items():
        w = (weights or {}).get(name, 1.0)
        for rank, item in enumerate(ids, 1):
            fused[item] = fused.get(item, 0.0) + w / (k + rank)
    return fused


@dataclass
class Candidates:
    """One retriever's output: rows in rank order with their scores."""

    rows: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)


@dataclass
class _Filter:
    """One principal/namespace/date/status combination, resolved to rows."""

    mask: NDArray[np.bool_]  # per row
    count: int
    dense_count: int  # allowed rows that have a vector (the FAISS selector's)
    faiss_params: faiss.SearchParameters
    bits: NDArray[np.uint8]  # the bitmap behind the FAISS selector: must live as long as it
    whoosh: set[int] | None = None  # Whoosh document numbers, built on first use
    whoosh_ready: bool = False


class Searcher:
    """A loaded index version: BM25F postings, FAISS flat index, row tables, Whoosh searcher.

    ``field_boosts``, ``bm25_b``/``bm25_k1``, ``rrf_k`` and ``rrf_weights`` start from the
    module's tuned defaults; evaluation helpers may change them on an instance.
    """

    def __init__(self, folder: Path, embedder: Embedder | None, candidates: int = 100, rrf_k: int = 60, bm25_engine: str = "numpy") -> None:
        import numpy as np

        from kb.retrieval.bm25 import Bm25Table
        from kb.retrieval.store import DELETED_FILE, base_of
        from kb.retrieval.tables import VersionPart

        self.folder = folder
        self.bm25_engine = bm25_engine  # "numpy" (exported postings) or "whoosh" (its own searcher)
        self.candidates = candidates
        self.rrf_k = rrf_k
        self.rrf_weights = dict(RRF_WEIGHTS)
        self.fusion, self.bm25_share = FUSION, BM25_SHARE
        self.field_boosts = dict(FIELD_BOOSTS)
        self.bm25_b, self.bm25_k1 = BM25_B, BM25_K1
        self.embedder = embedder
        self.passage_tokens = PASSAGE_TOKENS  # a view's own (``view``)
        self._rows_by_id: dict[str, int] | None = None
        self.denied = Denied()  # what a pending `kb forget` hides: a view's own (``view``)
        self.manifest: Manifest = load_manifest(folder / MANIFEST_FILE)
        try:
            base = base_of(folder)
            # a layered version: its base version's rows (less the deleted ones), then its own
            parts = [VersionPart(folder, self.manifest)]
            if base is not None:
                parts.insert(0, VersionPart(folder.parent / base, load_manifest(folder.parent / base / MANIFEST_FILE)))
                parts[0].live[np.load(folder / DELETED_FILE)] = False
            self._parts = parts
            self.docs: list[dict[str, Any]] = [d for part in parts for d in part.docs]
            doc_offsets = np.cumsum([0] + [len(part.docs) for part in parts])
            self.row_doc = np.concatenate([part.row_doc + doc_offsets[i] for i, part in enumerate(parts)]).astype(np.int32)
            self.row_lines = np.concatenate([part.row_lines for part in parts])
            self._row_start = np.cumsum([0] + [part.rows for part in parts])
            self.live = np.concatenate([part.live for part in parts])  # rows of this version (a base's deleted rows are not)
            self.pending = np.concatenate([part.pending for part in parts])  # rows without a vector yet: BM25 alone finds them
            self.ids = [cid for part in parts for cid in part.ids]  # chunk id per row: ties are broken by it
            vectors = parts[0].vectors if len(parts) == 1 else np.concatenate([part.vectors for part in parts])
            self._bm25_table = Bm25Table.of_parts([part.bm25 for part in parts])
        except (
            OSError,
            ValueError,
            EOFError,
            KeyError,
            IndexError,
            json.JSONDecodeError,
            zipfile.BadZipFile,
            pickle.UnpicklingError,
        ) as exc:
            raise IndexMissingError(f"the search index in {folder} is corrupted ({type(exc).__name__})") from None
        self.dense_pending = int(self.pending.sum())  # chunks a progressive build has not embedded yet
        self._faiss = self._make_faiss(vectors)
        self._doc_arrays()
        self._filter_cache: dict[tuple[str, tuple[str, ...], int | None, bool], _Filter] = {}
        self._ix: Any = None  # the reference engine's in-memory Whoosh index, built on first use
        self._searcher: Any = None
        self._owner = True  # False for a ``view``: the files belong to the searcher it was made from

    # ---- loading -------------------------------------------------------------------------

    def _open_whoosh(self) -> Any:
        """Whoosh's own searcher over an in-memory index of this version's chunks (document
        number = row), for ``bm25_engine="whoosh"``: the reference the numpy path is tested against."""
        if self._searcher is None:
            from whoosh.filedb.filestore import RamStorage

            from kb.retrieval.tables import text_schema

            self._ix = RamStorage().create_index(text_schema())
            writer = self._ix.writer()
            for row in range(len(self.row_doc)):
                record = self.chunk_record(row)
                writer.add_document(
                    cid=record["id"],
                    title=record["title"],
                    headings=" ".join(record["headings"]),
                    summary=record["summary"],
                    body=record["body"],
                )
            writer.commit()
            self._searcher = self._ix.searcher()
        return self._searcher

    def _make_faiss(self, vectors: Vectors) -> faiss.IndexFlatIP:
        import faiss

        faiss.omp_set_num_threads(1)  # measured: flat search is slower on 2 threads here (NOTES.md)
        index = faiss.IndexFlatIP(int(vectors.shape[1]) if vectors.ndim == 2 and vectors.shape[1] else 1)
        if len(vectors):
            index.add(vectors)
        return index

    def _doc_arrays(self) -> None:
        import numpy as np

        self.scope_names = sorted({d["scope"] for d in self.docs})
        code = {s: i for i, s in enumerate(self.scope_names)}
        self.doc_ns = np.array([d["namespace"] == EVIDENCE for d in self.docs], dtype=bool)
        self.doc_scope = np.array([code[d["scope"]] for d in self.docs], dtype=np.int32)
        self.doc_deprecated = np.array([d["status"] == "deprecated" for d in self.docs], dtype=bool)
        self.doc_from = np.array([_ordinal(d["valid_from"], 0) for d in self.docs], dtype=np.int64)
        self.doc_to = np.array([_ordinal(d["valid_to"], _FAR_FUTURE) for d in self.docs], dtype=np.int64)

    def view(self, denied: Denied, passage_tokens: int) -> Searcher:
        """A searcher over the same loaded version with its own settings: ``denied`` (what a
        pending ``kb forget`` hides) and ``passage_tokens``, and copies of the tunable weights.
        The loaded arrays and files are shared (a version never changes once written); closing
        a view leaves them open for the searcher it was made from."""
        clone = copy.copy(self)
        clone.denied, clone.passage_tokens = denied, passage_tokens
        clone.rrf_weights, clone.field_boosts = dict(self.rrf_weights), dict(self.field_boosts)
        clone.fusion, clone.bm25_share = self.fusion, self.bm25_share
        clone._owner = False
        clone._ix = clone._searcher = None  # a view opens its own reference engine, if asked to
        return clone

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._ix.close()
        if not self._owner:
            return
        for part in self._parts:
            part.close()

    # ---- filters -------------------------------------------------------------------------

    def _filter(self, namespace: str, query: Query) -> _Filter:
        """The rows ``query`` may see in ``namespace`` (cached per combination)."""
        import faiss
        import numpy as np

        key = (namespace, query.scopes, query.at, query.include_deprecated)
        if key in self._filter_cache:
            return self._filter_cache[key]
        allowed = [i for i, s in enumerate(self.scope_names) if s in query.scopes]
        doc_ok = np.isin(self.doc_scope, allowed) & (self.doc_ns == (namespace == EVIDENCE))
        if not query.include_deprecated:
            doc_ok &= ~self.doc_deprecated
        if query.at is not None:
            doc_ok &= (self.doc_from <= query.at) & (self.doc_to >= query.at)
        mask = doc_ok[self.row_doc] & self.live if len(self.row_doc) else np.zeros(0, dtype=bool)
        dense = mask & ~self.pending  # a row without its vector yet is left to BM25
        bits = np.packbits(dense, bitorder="little")
        params = faiss.SearchParameters()
        params.sel = faiss.IDSelectorBitmap(len(dense), faiss.swig_ptr(bits))  # faiss keeps a reference to the selector
        if len(self._filter_cache) > 32:
            self._filter_cache.clear()
        entry = self._filter_cache[key] = _Filter(mask, int(mask.sum()), int(dense.sum()), params, bits)
        return entry

    def _whoosh_filter(self, rows: _Filter) -> set[int] | None:
        """Whoosh document numbers of the allowed rows; None when nothing is excluded."""
        import numpy as np

        if not rows.whoosh_ready:
            docnums = np.flatnonzero(rows.mask)  # document number = row
            rows.whoosh = None if len(docnums) == len(rows.mask) else set(docnums.tolist())
            rows.whoosh_ready = True
        return rows.whoosh

    # ---- retrievers ----------------------------------------------------------------------

    def _bm25(self, text: str, rows: _Filter, limit: int) -> Candidates:
        from kb.retrieval.analyzer import tokenize

        terms = list(dict.fromkeys(tokenize(text)))
        out = Candidates()
        if not terms or rows.count == 0:
            return out
        if self.bm25_engine == "whoosh":
            return self._bm25_whoosh(terms, rows, limit)
        out.rows, out.scores = self._bm25_table.top(terms, rows.mask, limit, self.field_boosts, self.bm25_b, self.bm25_k1, self.ids)
        return out

    def _bm25_whoosh(self, terms: list[str], rows: _Filter, limit: int) -> Candidates:
        """The same BM25F through Whoosh's own searcher (the reference the numpy path is tested
        against): the filter given as ``filter=``, and the statistics recounted from Whoosh's
        postings and stored lengths over the allowed documents only, as the numpy path does."""
        from whoosh import scoring
        from whoosh.query import Or, Term

        searcher = self._open_whoosh()
        allowed = self._whoosh_filter(rows)
        reader = searcher.reader()
        docnums = allowed if allowed is not None else set(range(len(self.row_doc)))
        dc = len(docnums)

        def df(field: str, term: str) -> int:
            if (field, term) not in reader:
                return 0
            return len(docnums.intersection(reader.postings(field, term).all_ids()))

        def length(docnum: int, field: str) -> float:
            value = reader.doc_field_length(docnum, field, 0)
            return 0.0 if value is None or math.isnan(value) else float(value)  # None (NaN in numpy) for an empty field

        avgfl = {f: (sum(length(d, f) for d in docnums) / dc if dc else 0) or 1 for f in self.field_boosts}

        class Scoped(scoring.BM25F):
            def scorer(self, searcher: Any, fieldname: str, text: str, qf: int = 1) -> Any:
                scorer = super().scorer(searcher, fieldname, text, qf)
                scorer.idf = math.log(dc / (df(fieldname, text) + 1)) + 1
                scorer.avgfl = avgfl[fieldname]
                return scorer

        out = Candidates()
        searcher.weighting = Scoped(B=self.bm25_b, K1=self.bm25_k1)
        query = Or([Term(f, t, boost=b) for t in terms for f, b in self.field_boosts.items() if b > 0])
        results = searcher.search(query, limit=limit, filter=allowed)
        for score, docnum in results.top_n:
            out.rows.append(int(docnum))
            out.scores.append(float(score))
        return out

    def _dense(self, vector: Vectors | None, rows: _Filter, limit: int) -> Candidates:
        out = Candidates()
        if rows.dense_count == 0 or vector is None:
            return out
        scores, found = self._faiss.search(vector.reshape(1, -1), min(limit, rows.dense_count), params=rows.faiss_params)
        ranked = sorted(
            ((float(score), int(row)) for score, row in zip(scores[0], found[0], strict=True) if row >= 0),
            key=lambda x: (-x[0], self.ids[x[1]]),
        )
        out.rows = [row for _, row in ranked]  # equal scores (the same text twice) by chunk id
        out.scores = [score for score, _ in ranked]
        return out

    def embed_query(self, text: str) -> Vectors:
        import numpy as np

        if self.embedder is None:
            raise IndexMissingError("no embedder is configured for dense search")
        return np.asarray(self.embedder.embed_query(text), dtype=np.float32)

    # ---- search --------------------------------------------------------------------------

    def search(self, query: Query) -> list[Hit]:
        # no vector served yet (every row pending): the model is not loaded for a query vector
        dense = query.mode in ("hybrid", "dense") and bool((self.live & ~self.pending).any())
        vector = self.embed_query(query.text) if dense else None
        hits = self._search_namespace(PAGE, query, vector)
        if query.include_evidence:
            hits += self._search_namespace(EVIDENCE, query, vector)
        return hits

    def rank(self, query: Query, namespace: str = PAGE, vector: Vectors | None = None) -> dict[str, Candidates]:
        """Each retriever's filtered chunk candidates (used by search and by evaluation)."""
        rows = self._filter(namespace, query)
        out: dict[str, Candidates] = {}
        if query.mode in ("hybrid", "bm25"):
            out["bm25"] = self._bm25(query.text, rows, self.candidates)
        if query.mode in ("hybrid", "dense"):
            out["dense"] = self._dense(vector, rows, self.candidates)
        return out

    def _search_namespace(self, namespace: str, query: Query, vector: Vectors | None) -> list[Hit]:
        lists = self.rank(query, namespace, vector)
        group = self.page_of if namespace == PAGE else self.chunk_key
        if query.mode != "hybrid" or namespace != PAGE:
            hits = self._fuse(lists, group, query.k, namespace)
        else:
            # A folder's index page (a list of titles and L0s) is close to almost any query in the
            # embedding space; in hybrid search it ranks only when its words match too.
            hits = self._fuse(lists, group, query.k + INDEX_PAGE_ALLOWANCE, namespace)
            hits = [h for h in hits if "bm25" in h.ranks or not _is_folder_index(h.path)][: query.k]
        if namespace != PAGE:
            return hits  # evidence hits are chunks: several spans of one item may rank
        allowed = self._filter(namespace, query).mask
        return [self.widen(hit, allowed) for hit in hits]

    def widen(self, hit: Hit, allowed: NDArray[np.bool_]) -> Hit:
        """``hit`` with its passage widened: the chunks after and before its best chunk in the
        same section of the same page (alternately, the next one first), while the joined text
        stays within ``passage_tokens``. A neighbour must be a row ``allowed`` (the query's
        filter: scope, status, validity, this version) and not hidden by a pending ``kb forget``;
        the passage stops at the first one that is not. ``line_start``/``line_end`` then span
        the passage and ``chunks`` lists its chunks."""
        prefix, _, number = hit.chunk.rpartition("~")
        rows = self._row_index()
        row = rows.get(hit.chunk)
        if not prefix or not number.isdigit() or row is None or self.passage_tokens <= 0:
            return hit
        doc = int(self.row_doc[row])
        text = str(self.chunk_record(row)["body"])  # the best chunk's own text (``hit`` may be widened already)
        pieces = {int(number): (row, text)}  # chunk number -> (row, body)
        growing = [1, -1]  # the directions still open: the next chunk first, then the one before
        while growing:
            for step in list(growing):
                n = max(pieces) + 1 if step > 0 else min(pieces) - 1
                other = rows.get(f"{prefix}~{n}", -1) if n >= 0 else -1
                body = self._neighbour_body(other, doc, allowed)
                if body is None:
                    growing.remove(step)
                    continue
                trial = pieces | {n: (other, body)}
                wider = _join_passage([trial[i] for i in sorted(trial)], self)
                if count_tokens(wider) > self.passage_tokens:  # a chunk is never cut: the passage stops
                    growing.remove(step)
                    continue
                pieces, text = trial, wider
        ordered = [pieces[i][0] for i in sorted(pieces)]
        return replace(
            hit,
            text=text,
            line_start=min(int(self.row_lines[r][0]) for r in ordered),
            line_end=max(int(self.row_lines[r][1]) for r in ordered),
            chunks=tuple(self.ids[r] for r in ordered),
        )

    def _neighbour_body(self, row: int, doc: int, allowed: NDArray[np.bool_]) -> str | None:
        """The body of chunk ``row`` (-1: none) when it may join a passage of page ``doc``, else None."""
        if row < 0 or not allowed[row] or int(self.row_doc[row]) != doc:
            return None
        body = str(self.chunk_record(row)["body"])
        return None if self.denied and self.denied.hides_text(body) else body

    def _row_index(self) -> dict[str, int]:
        """Row of each chunk id in this version (built on first use)."""
        if self._rows_by_id is None:
            self._rows_by_id = {cid: row for row, cid in enumerate(self.ids) if self.live[row]}
        return self._rows_by_id

    def page_of(self, row: int) -> str:
        return str(self.docs[int(self.row_doc[row])]["id"])

    def chunk_key(self, row: int) -> str:
        return self.ids[row]

    def fuse_keys(
        self, lists: dict[str, Candidates], group: Callable[[int], str]
    ) -> tuple[list[str], dict[str, dict[str, int]], dict[str, dict[str, float]], dict[str, int]]:
        """Fused order of group keys, their per-retriever ranks and scores, and best rows."""
        ranked: dict[str, list[str]] = {}
        ranks: dict[str, dict[str, int]] = {}
        scores: dict[str, dict[str, float]] = {}
        chunk_rrf: dict[int, float] = {}
        for name, cand in lists.items():
            order: list[str] = []
            for chunk_rank, (row, score) in enumerate(zip(cand.rows, cand.scores, strict=True), 1):
                chunk_rrf[row] = chunk_rrf.get(row, 0.0) + self.rrf_weights.get(name, 1.0) / (self.rrf_k + chunk_rank)
                key = group(row)
                if key not in ranks.setdefault(name, {}):
                    ranks[name][key] = len(order) + 1
                    scores.setdefault(key, {})[name] = score
                    order.append(key)
            ranked[name] = order
        if self.fusion in ("norm", "norm-chunk") and len(lists) > 1:
            per_list = normalised(lists, self.bm25_share)
            chunk_rrf = {}
            for values in per_list.values():
                for row, value in values.items():
                    chunk_rrf[row] = chunk_rrf.get(row, 0.0) + value
            fused: dict[str, float] = {}
            # "norm": a key's score per list is its best chunk in that list, summed over lists;
            # "norm-chunk": a key's score is its best chunk's summed score
            for values in per_list.values() if self.fusion == "norm" else (chunk_rrf,):
                best_in: dict[str, float] = {}
                for row, value in values.items():
                    key = group(row)
                    best_in[key] = max(best_in.get(key, 0.0), value)
                for key, value in best_in.items():
                    fused[key] = fused.get(key, 0.0) + value
        else:
            fused = rrf(ranked, self.rrf_k, self.rrf_weights)
        best: dict[str, int] = {}
        for row, value in chunk_rrf.items():
            key = group(row)
            if key not in best or value > chunk_rrf[best[key]] or (value == chunk_rrf[best[key]] and self.ids[row] < self.ids[best[key]]):
                best[key] = row
        order = sorted(fused, key=lambda key: (-fused[key], key))
        for key in order:
            scores[key]["rrf"] = fused[key]  # the fused score, whichever fusion made it
        return order, ranks, scores, best

    def fuse_chunks(self, lists: dict[str, Candidates], namespace: str, k: int) -> list[Hit]:
        """Fused hits one per chunk (not one per page): several sections of a page may rank."""
        return self._fuse(lists, self.chunk_key, k, namespace)

    def _fuse(self, lists: dict[str, Candidates], group: Callable[[int], str], k: int, namespace: str) -> list[Hit]:
        order, ranks, scores, best = self.fuse_keys(lists, group)
        single = next(iter(lists)) if len(lists) == 1 else None
        hits: list[Hit] = []
        for key in order:
            if len(hits) == k:
                break
            row = best[key]
            doc = self.docs[int(self.row_doc[row])]
            record = self.chunk_record(row)
            if self.denied and self._denied(doc, record):
                continue
            per_ranks = {name: r[key] for name, r in ranks.items() if key in r}
            score = scores[key][single] if single else scores[key]["rrf"]
            hits.append(
                Hit(
                    kind=namespace,
                    id=doc["id"],
                    path=doc["path"],
                    title=doc["title"],
                    summary=doc["summary"],
                    anchor=record["anchor"],
                    line_start=int(self.row_lines[row][0]),
                    line_end=int(self.row_lines[row][1]),
                    score=round(float(score), 6),
                    scores={name: round(float(v), 6) for name, v in sorted(scores[key].items())},
                    ranks=per_ranks,
                    chunk=record["id"],
                    text=record["body"],
                    scope=doc["scope"],
                    status=doc["status"],
                    valid_from=doc["valid_from"],
                    valid_to=doc["valid_to"],
                    headings=tuple(record.get("headings") or ()),
                    chunks=(record["id"],),
                )
            )
        return hits

    def _denied(self, doc: dict[str, Any], record: dict[str, Any]) -> bool:
        """Whether a pending ``kb forget`` hides this hit (checked on every result, before any
        rebuild has removed it from the index)."""
        d = self.denied
        if doc["scope"] in d.scopes or doc["id"] in d.evidence or doc["path"] in d.paths:
            return True
        return d.hides_text(" ".join((doc["title"], doc["summary"], record["body"])))

    def chunk_record(self, row: int) -> dict[str, Any]:
        part = len(self._parts) - 1 if row >= self._row_start[-2] else 0
        return self._parts[part].record(row - int(self._row_start[part]))


def _join_passage(pieces: list[tuple[int, str]], searcher: Searcher) -> str:
    """Consecutive chunks of one section as one text. Two pieces of one split block share up to
    ``chunk_overlap`` tokens (their line spans meet): the repeated start of the later one is
    dropped; otherwise chunks are blocks apart, joined by a blank line."""
    text = pieces[0][1]
    for (before, _), (row, body) in zip(pieces, pieces[1:], strict=False):
        if int(searcher.row_lines[row][0]) <= int(searcher.row_lines[before][1]):
            shared = _shared_length(text, body)
            text += body[shared:] if shared else "\n" + body
        else:
            text += "\n\n" + body
    return text


def _shared_length(text: str, body: str) -> int:
    """The length of the longest start of ``body`` that ``text`` ends with and that ends at a
    word boundary of ``body`` (0 when none does)."""
    for size in range(min(len(text), len(body)), 0, -1):
        if (size == len(body) or body[size].isspace()) and text.endswith(body[:size]):
            return size
    return 0


# ---- opening the serving index ------------------------------------------------------------


@lru_cache(maxsize=2)  # the serving version and the one before it (a rebuild just happened)
def _load(folder: str, embedder_name: str, candidates: int, rrf_k: int) -> Searcher:
    return Searcher(Path(folder), make_embedder(embedder_name), candidates, rrf_k)


def open_searcher(repo: Repo, commit: str | None = None, progress: Progress | None = None) -> Searcher:
    """The searcher for the serving version (its loaded files cached per version folder in
    this process; each call returns a view of its own, so that what one caller sets on it, or
    what a later call reads for the repository, never changes another caller's searcher).

    With ``commit``, the searcher for that commit: the serving version when it serves it, else a
    point-in-time index built on first use (``kb.retrieval.build.index_at``; ``progress`` reports it).
    Version folders never change once written, so the cache only needs the folder's name.
    """
    from kb.retrieval.build import index_at
    from kb.retrieval.store import index_store

    r = repo.config.retrieval
    if commit is None:
        store = index_store(repo)
        for attempt in range(3):
            # a progressive build publishes a version per batch and removes the one before the
            # previous: a version named by CURRENT a moment ago may be gone; CURRENT names a newer one
            folder = store.current_path()
            try:
                searcher = _load(str(folder), r.embedder, r.candidates, r.rrf_k)
                break
            except IndexMissingError:
                if attempt == 2 or store.current() == folder.name:  # not a race with a newer version
                    raise
    else:
        folder = index_at(repo, commit, progress)[0]
        searcher = _load(str(folder), r.embedder, r.candidates, r.rrf_k)
    searcher = searcher.view(load_denied(repo), r.passage_tokens)
    expected = searcher.embedder.identity if searcher.embedder is not None else r.embedder
    if searcher.manifest.embedder != expected:
        raise IndexMissingError(
            f"the search index was built with embedder {searcher.manifest.embedder} but the config asks for {expected}",
            hint="rebuild it: run `kb index build`",
        )
    return searcher


def search(repo: Repo, query: Query, commit: str | None = None) -> list[Hit]:
    """Search the serving index with ``query`` (``make_query``): pages, and evidence hits when
    it asks for them, inside its principal's scopes.

    ``commit`` searches the repository as it was at that commit (see ``open_searcher``).
    """
    return open_searcher(repo, commit).search(query)
