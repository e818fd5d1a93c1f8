"""BM25F over the Whoosh index, scored with numpy, with statistics from what the reader may see.

Whoosh is the text index: it is built, patched incrementally and analysed with our analyzer.
Its own query path, though, walks postings one by one in Python: 110-220 ms per query on
SciFact's 10,000 chunks, 0.37 s median on the 50,000-chunk scale benchmark (this 2-core box).
So a build writes the postings of every field (term frequencies, from our analyzer through the
Whoosh field's own ``index``) and the byte-quantised field lengths into numpy arrays
(``bm25.npz``), and a query is a few vectorised operations per (term, field). An incremental
build renumbers the previous version's arrays and analyses only the added chunks
(``update_bm25``): its cost follows the change, not the corpus. Whoosh itself is the reference
engine (``Searcher(..., bm25_engine="whoosh")``, an in-memory index built on demand).

The collection statistics of BM25 (the document count, each term's document frequency, the
average field lengths) are computed at query time over exactly the rows the query may return:
the principal's scopes, the namespace, status and validity filters. Whoosh's own statistics
count every scope (and deleted documents), so one user's words would move another user's
scores; here a score is the score the same text would get in an index that held only what its
reader may see. The formula is otherwise Whoosh's BM25F (its idf, its quantised lengths);
a test compares rankings and scores with Whoosh's own searcher given the same statistics.
Rows are index rows (``kb.retrieval.build``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

BM25_FILE = "bm25.npz"


class Bm25Table:
    """The exported postings of one index version, scored like Whoosh's BM25F.

    A layered version (``kb.retrieval.build``) has two: its base's and its own. ``of_parts``
    joins them into one table whose rows follow each other; the statistics are taken over the
    allowed rows of all parts together, so the scores are those of one table holding all rows.
    """

    def __init__(self, path: Path | None, fields: Sequence[str]) -> None:
        import numpy as np

        self.parts: list[tuple[int, dict[str, dict[str, Any]]]] = []  # (first row, field -> arrays)
        self.n_rows = 0
        if path is None:
            return
        with np.load(path) as data:
            table = {f: {key: data[f"{f}.{key}"] for key in ("terms", "indptr", "rows", "tf", "lengths")} for f in fields}
        for arrays in table.values():
            arrays["lengths"] = np.nan_to_num(arrays["lengths"])  # versions written before empty fields were 0
        self.n_rows = len(next(iter(table.values()))["lengths"]) if table else 0
        self.parts = [(0, table)]

    @classmethod
    def of_parts(cls, tables: Sequence[Bm25Table]) -> Bm25Table:
        if len(tables) == 1:
            return tables[0]
        joined = cls(None, ())
        for table in tables:
            joined.parts += [(joined.n_rows + start, fields) for start, fields in table.parts]
            joined.n_rows += table.n_rows
        return joined

    @staticmethod
    def _slot(arrays: dict[str, Any], term: str) -> int | None:
        import numpy as np

        terms = arrays["terms"]
        i = int(np.searchsorted(terms, term))
        return i if i < len(terms) and terms[i] == term else None

    def scores(
        self, terms: Iterable[str], allowed: NDArray[np.bool_], boosts: dict[str, float], b: float, k1: float
    ) -> NDArray[np.float32]:
        """BM25F score of every allowed row for an OR of ``terms`` over the boosted fields (0
        elsewhere), with the document count, document frequencies and average field lengths
        taken over the allowed rows only."""
        import numpy as np

        out = np.zeros(self.n_rows, dtype=np.float32)
        dc = int(np.count_nonzero(allowed))
        if dc == 0:
            return out
        spans = [
            (start, allowed[start : start + len(next(iter(fields.values()))["lengths"])], fields) for start, fields in self.parts if fields
        ]
        avgfl = {
            f: sum(float(fields[f]["lengths"][mask].sum(dtype=np.float64)) for _, mask, fields in spans if f in fields) / dc or 1.0
            for f in boosts
        }
        for term in terms:
            for field, boost in boosts.items():
                if boost <= 0:
                    continue
                found = []  # (first row, local rows, tf, lengths) of the allowed postings in each part
                for start, mask, fields in spans:
                    if field not in fields or (slot := self._slot(fields[field], term)) is None:
                        continue
                    f = fields[field]
                    lo, hi = int(f["indptr"][slot]), int(f["indptr"][slot + 1])
                    rows = f["rows"][lo:hi]
                    seen = mask[rows]
                    if seen.any():
                        found.append((start, rows[seen], f["tf"][lo:hi][seen], f["lengths"]))
                df = sum(len(rows) for _, rows, _, _ in found)
                if df == 0:
                    continue
                idf = math.log(dc / (df + 1)) + 1
                for start, rows, tf, lengths in found:
                    norm = k1 * ((1 - b) + b * lengths[rows] / avgfl[field])
                    out[rows + start] += boost * idf * (tf * (k1 + 1)) / (tf + norm)
        return out

    def top(
        self,
        terms: Sequence[str],
        allowed: NDArray[np.bool_],
        limit: int,
        boosts: dict[str, float],
        b: float,
        k1: float,
        ids: Sequence[str] | None = None,
    ) -> tuple[list[int], list[float]]:
        """The ``limit`` best allowed rows (score > 0), best first, ties by chunk id (``ids``,
        one per row; by row without them)."""
        import numpy as np

        scores = self.scores(terms, allowed, boosts, b, k1)
        candidates = np.flatnonzero(scores > 0)  # only allowed rows have a score: the filter applies before ranking
        if len(candidates) > limit:
            kth = np.partition(scores[candidates], len(candidates) - limit)[len(candidates) - limit]
            candidates = candidates[scores[candidates] >= kth]  # ties at the cut stay, then by id
        if ids is None:
            order = sorted(candidates.tolist(), key=lambda row: (-float(scores[row]), row))
        else:
            order = sorted(candidates.tolist(), key=lambda row: (-float(scores[row]), ids[row]))
        order = order[:limit]
        return order, [float(scores[row]) for row in order]


class _Empty:
    """The postings of an empty index, shaped like ``np.load`` of a ``bm25.npz``."""

    def __init__(self, fields: Sequence[str], arrays: dict[str, Any]) -> None:
        self.arrays = {f"{f}.{k}": v for f in fields for k, v in arrays.items()}

    def __getitem__(self, key: str) -> Any:
        return self.arrays[key]

    def __enter__(self) -> _Empty:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None


def field_postings(schema: Any, field: str, value: str) -> tuple[dict[str, float], float]:
    """The (term -> weight) postings and the (byte-quantised) length of one field value, as
    Whoosh's writer records them for a document: the same analysis, the same length rounding."""
    from whoosh.util.numeric import byte_to_length, length_to_byte

    postings: dict[str, float] = {}
    length = 0
    if value:
        for tbytes, freq, weight, _ in schema[field].index(value):
            postings[tbytes.decode("utf-8") if isinstance(tbytes, bytes) else tbytes] = float(weight)
            length += freq
    return postings, float(byte_to_length(length_to_byte(length)))


def update_bm25(
    old: Path | None,
    old_to_new: NDArray[np.int64],
    n_rows: int,
    added: dict[int, dict[str, str]],
    schema: Any,
    fields: Sequence[str],
    out: Path,
) -> None:
    """Write ``out`` from the previous version's postings ``old`` (None: a full build) and the
    changed rows.

    ``old_to_new`` maps every old row to its row in the new version (-1: deleted); ``added``
    gives the field values of the new rows. Only the added rows are analysed; the old postings
    are renumbered and filtered with array operations. The result holds the postings, lengths
    and terms a full build writes for the same chunks (within a term the rows may come in
    another order, which scoring does not depend on; a test compares them).
    """
    import numpy as np

    arrays: dict[str, Any] = {}
    analysed = {row: {f: field_postings(schema, f, values[f]) for f in fields} for row, values in added.items()}
    empty = {"terms": np.zeros(0, dtype="<U1"), "indptr": np.zeros(1, dtype=np.int64), "rows": np.zeros(0, dtype=np.int32)}
    empty |= {"tf": np.zeros(0, dtype=np.float32), "lengths": np.zeros(0, dtype=np.float32)}
    with np.load(old) if old is not None else _Empty(fields, empty) as data:
        for field in fields:
            arrays |= _merge_field(data, field, old_to_new, n_rows, analysed)
    np.savez(out, **arrays)


def _merge_field(data: Any, field: str, old_to_new: NDArray[np.int64], n_rows: int, analysed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """One field's arrays for ``update_bm25``."""
    import numpy as np

    out: dict[str, Any] = {}
    terms, indptr = data[f"{field}.terms"], data[f"{field}.indptr"]
    rows, tf = old_to_new[data[f"{field}.rows"]], data[f"{field}.tf"]
    term_of = np.repeat(np.arange(len(terms), dtype=np.int64), np.diff(indptr))
    keep = rows >= 0
    rows, tf, term_of = rows[keep].astype(np.int32), tf[keep], term_of[keep]
    lengths = np.zeros(n_rows, dtype=np.float32)
    survivors = old_to_new >= 0
    lengths[old_to_new[survivors]] = data[f"{field}.lengths"][survivors]
    new_terms, new_rows, new_tf = [], [], []
    for row in sorted(analysed):
        postings, length = analysed[row][field]
        lengths[row] = length
        for term, weight in postings.items():
            new_terms.append(term)
            new_rows.append(row)
            new_tf.append(weight)
    union = _with_terms(terms, new_terms)
    old_slot = np.searchsorted(union, terms)[term_of] if len(terms) else np.zeros(0, dtype=np.int64)
    new_slot = np.searchsorted(union, np.array(new_terms, dtype=str)) if new_terms else np.zeros(0, dtype=np.int64)
    old_count = np.bincount(old_slot, minlength=len(union))
    new_count = np.bincount(new_slot, minlength=len(union))
    out_indptr = np.zeros(len(union) + 1, dtype=np.int64)
    np.cumsum(old_count + new_count, out=out_indptr[1:])
    # old postings stay grouped by term (in their order), the new ones follow each group
    old_start = np.zeros(len(union) + 1, dtype=np.int64)
    np.cumsum(old_count, out=old_start[1:])
    old_dest = out_indptr[old_slot] + (np.arange(len(old_slot)) - old_start[old_slot])
    order = np.argsort(new_slot, kind="stable")
    new_sorted = new_slot[order]
    new_start = np.zeros(len(union) + 1, dtype=np.int64)
    np.cumsum(new_count, out=new_start[1:])
    new_dest = np.empty(len(new_slot), dtype=np.int64)
    new_dest[order] = out_indptr[new_sorted] + old_count[new_sorted] + (np.arange(len(new_sorted)) - new_start[new_sorted])
    out_rows = np.empty(int(out_indptr[-1]), dtype=np.int32)
    out_tf = np.empty(int(out_indptr[-1]), dtype=np.float32)
    out_rows[old_dest], out_tf[old_dest] = rows, tf
    out_rows[new_dest], out_tf[new_dest] = np.array(new_rows, dtype=np.int32), np.array(new_tf, dtype=np.float32)
    # terms whose postings all went away are dropped, as a fresh export would drop them
    live = (old_count + new_count) > 0
    if not live.all():
        union = union[live]
        out_indptr = np.concatenate([[0], np.cumsum((old_count + new_count)[live])]).astype(np.int64)
    out[f"{field}.terms"] = union if len(union) else np.zeros(0, dtype="<U1")
    out[f"{field}.indptr"] = out_indptr
    out[f"{field}.rows"] = out_rows
    out[f"{field}.tf"] = out_tf
    out[f"{field}.lengths"] = lengths
    return out


def _with_terms(terms: NDArray[Any], new_terms: list[str]) -> NDArray[Any]:
    """The sorted ``terms`` with ``new_terms`` added: the few missing ones inserted in place, no
    sort of the whole vocabulary (an edit rarely brings a new word)."""
    import numpy as np

    if not new_terms:
        return terms
    fresh = np.unique(np.array(new_terms, dtype=str))
    at = np.searchsorted(terms, fresh)
    known = (at < len(terms)) & (terms[np.minimum(at, max(len(terms) - 1, 0))] == fresh) if len(terms) else np.zeros(len(fresh), bool)
    missing = fresh[~known]
    if not len(missing):
        return terms
    width = max(terms.dtype.itemsize, missing.dtype.itemsize) // 4
    return np.insert(terms.astype(f"<U{width}"), np.searchsorted(terms, missing), missing)
