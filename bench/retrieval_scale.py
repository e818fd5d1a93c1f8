"""Scale benchmark of the serving layer on a generated repository of real text.

    python bench/retrieval_scale.py all --pages 10000 --workdir /tmp/kb-scale --json-out scale.json
    python bench/retrieval_scale.py generate --pages 10000 --workdir /tmp/s && \
      python bench/retrieval_scale.py build --embedder hash --workdir /tmp/s && \
      python bench/retrieval_scale.py incremental --embedder hash --runs 5 --workdir /tmp/s

Steps (each also runs alone): ``generate`` writes a repository with N pages in one commit (80%
shared, 20% spread over 50 users), each page one SciFact abstract (``../shared/data``) cut into
five sections of its sentences, so chunks are real passages as the product chunks them (the
5,183 abstracts repeat past that many pages, with distinct titles); without the data, made-up
words from a Zipfian vocabulary. The queries are real questions: SciFact's claims
(``queries.jsonl``, shuffled), which ask about these abstracts; only without the data, words
sampled from the generated sections. ``build`` runs a full build and reports the share of time
spent embedding; ``throughput`` embeds a sample of the same chunk texts with the embedder alone
(its rate, and the embedding time it projects for all chunks); ``incremental`` edits one
section of one page, commits and times the incremental build, ``--runs`` times (``--profile``
writes cProfile stats of the last); ``query`` loads the index in a fresh process and runs Q
hybrid queries (query embedding included), reporting load time, p50/p95 and resident memory.
``--model minilm-en`` makes ``generate`` configure that embedder in the repository. ``--embedder hash`` replaces the model by a hash of the text in ``build`` and ``incremental``:
they then measure index maintenance alone (``query`` is skipped: the index does not match the
configured model).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

_DATA_PLACES = [Path(__file__).resolve().parents[2] / "shared", Path(__file__).resolve().parents[3] / "shared"]
SCIFACT = next(
    (p / "data" / "scifact" / "corpus.jsonl" for p in _DATA_PLACES if (p / "data" / "scifact" / "corpus.jsonl").exists()),
    _DATA_PLACES[0] / "data" / "scifact" / "corpus.jsonl",
)
SYLLABLES = "ka lo mi ren tor vin sa del bra qui nor fe lix ta mon ger zu pal hen cor bi da es".split()
WORD_RE = re.compile(r"[A-Za-z][a-z]+")
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    """Words and weights: SciFact's unigram distribution when the data is there (realistic
    document frequencies for BM25), else a Zipfian vocabulary of 20,000 made-up words."""
    if SCIFACT.exists():
        counts: dict[str, int] = {}
        with open(SCIFACT, encoding="utf-8") as handle:
            for line in handle:
                for word in WORD_RE.findall(json.loads(line)["text"]):
                    counts[word.lower()] = counts.get(word.lower(), 0) + 1
        words = sorted(counts, key=lambda w: (-counts[w], w))
        return words, [float(counts[w]) for w in words]
    words = sorted({"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(30_000)})[:20_000]
    rng.shuffle(words)
    return words, [1.0 / (rank + 1) ** 1.07 for rank in range(len(words))]


class _Text:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words, weights = _vocabulary(rng)
        self.cum = list(itertools.accumulate(weights))

    def words_(self, n: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cum, k=n)

    def sentence(self, lo: int = 10, hi: int = 20) -> str:
        words = self.words_(self.rng.randint(lo, hi))
        return " ".join(words).capitalize() + "."


def _page(text: _Text, rng: random.Random, path: str, scope: str) -> tuple[str, list[str]]:
    entity = " ".join(w.capitalize() for w in text.words_(2)) + f" {rng.randint(1, 999)}"
    title = f"{entity}: {' '.join(text.words_(2))}"
    body = [f"# {title}\n"]
    queries = []
    for _ in range(5):
        heading = " ".join(text.words_(rng.randint(2, 3))).capitalize()
        paragraph = " ".join(text.sentence() for _ in range(2))
        body.append(f"## {heading}\n\n{paragraph}\n")
        content = [w for w in paragraph.lower().rstrip(".").replace(".", "").split() if len(w) > 3]
        queries.append(" ".join(rng.sample(content, min(len(content), rng.randint(3, 6)))))
    summary = text.sentence(8, 14)
    meta = f"---\nid: {path[:-3]}\ntype: fact\ntitle: {json.dumps(title)}\nsummary: {json.dumps(summary)}\nscope: {scope}\nstatus: active\n---\n"
    return meta + "\n".join(body), queries


def _scifact_docs() -> list[tuple[str, list[str]]]:
    """SciFact abstracts as (title, sentences): the real text the scale benchmark indexes."""
    docs = []
    with open(SCIFACT, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            sentences = [s for s in SENTENCE_RE.split(record["text"].strip()) if s]
            if len(sentences) >= 5:
                docs.append((record["title"].rstrip("."), sentences))
    return docs


def _scifact_queries() -> list[str]:
    """SciFact's claims, the questions its abstracts are judged against."""
    with open(SCIFACT.with_name("queries.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle if line.strip()]


def _real_page(doc: tuple[str, list[str]], n: int, path: str, scope: str, rng: random.Random) -> tuple[str, list[str]]:
    """One page from one abstract: five sections of its sentences, headed by their first words."""
    title, sentences = doc
    title = f"{title} ({n})"  # the abstracts repeat past 5,183 pages; titles keep the pages distinct
    parts = [sentences[i::5] for i in range(5)]  # five sections, every sentence used once
    body = [f"# {title}\n"]
    queries = []
    for i, part in enumerate(parts):
        paragraph = " ".join(part)
        heading = " ".join(WORD_RE.findall(part[0])[:3]).capitalize() or f"Part {i + 1}"
        body.append(f"## {heading}\n\n{paragraph}\n")
        content = [w.lower() for w in WORD_RE.findall(paragraph) if len(w) > 3]
        if content:
            queries.append(" ".join(rng.sample(content, min(len(content), rng.randint(3, 6)))))
    summary = sentences[0][:160]
    meta = f"---\nid: {path[:-3]}\ntype: fact\ntitle: {json.dumps(title)}\nsummary: {json.dumps(summary)}\nscope: {scope}\nstatus: active\n---\n"
    return meta + "\n".join(body), queries


def generate(root: Path, pages: int, seed: int = 7, model: str = "") -> dict:
    from kb.config import CONFIG_FILE
    from kb.scaffold import init_repository

    rng = random.Random(seed)
    real = _scifact_docs() if SCIFACT.exists() else []
    text = None if real else _Text(rng)
    repo = init_repository(root)
    changes: dict[str, bytes | None] = {}
    if model:  # the repository's configured embedder (build, throughput and query use it)
        config = (root / CONFIG_FILE).read_text(encoding="utf-8")
        changes[CONFIG_FILE] = re.sub(r"(?m)^  embedder: \S+", f"  embedder: {model}", config).encode()
        (root / CONFIG_FILE).write_bytes(changes[CONFIG_FILE] or b"")
    queries: list[str] = []
    for n in range(pages):
        if n % 5 == 4:
            user = f"u{n % 50:03d}"
            path, scope = f"users/{user}/page-{n:05d}.md", f"user:{user}"
        else:
            path, scope = f"knowledge/topic-{n % 100:02d}/page-{n:05d}.md", "system"
        if text is None:
            page, qs = _real_page(real[n % len(real)], n, path, scope, rng)
        else:
            page, qs = _page(text, rng, path, scope)
        changes[path] = page.encode()
        if scope == "system" and qs:
            queries.append(rng.choice(qs))
    if real:
        queries = _scifact_queries()
    t0 = time.perf_counter()
    repo.commit_changes(changes, f"bench: {pages} generated pages\n")
    rng.shuffle(queries)
    (root.parent / "queries.json").write_text(json.dumps(queries[:1000]))
    return {
        "pages": pages,
        "commit_seconds": round(time.perf_counter() - t0, 2),
        "text": "scifact abstracts" if real else "zipf made-up words (no SciFact data found)",
        "queries": "scifact claims (queries.jsonl)" if real else "words sampled from the generated sections",
    }


class HashEmbedder:
    """A deterministic stand-in for the model (``--embedder hash``): a vector from the text's
    hash. The incremental step measures index maintenance, not embedding (which the
    ``throughput`` step and the embedding cache cover), and a full build of 50,000 real chunks
    with the model takes most of an hour on this machine."""

    identity = "bench-hash/1"
    dim = 384

    def embed_passages(self, texts):  # type: ignore[no-untyped-def]
        import hashlib

        import numpy as np

        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        return self.embed_passages([text])[0]


def _embedder(name: str):  # type: ignore[no-untyped-def]
    return HashEmbedder() if name == "hash" else None


def _progress(stage: str, done: int, total: int) -> None:
    if done == total or done % 2048 == 0:
        print(f"  {stage}: {done}/{total}  {time.strftime('%H:%M:%S')}", file=sys.stderr, flush=True)


def build(root: Path, embedder: str = "model") -> dict:
    from kb.repo import Repo
    from kb.retrieval.build import build_index

    result = build_index(Repo(root), full=True, progress=_progress, embedder=_embedder(embedder))
    return {
        "chunks": result.chunks,
        "pages": result.pages,
        "seconds": result.seconds,
        "embed_seconds": result.embed_seconds,
        "embed_share": round(result.embed_seconds / result.seconds, 4),
        "chunks_per_second": round(result.chunks / result.embed_seconds, 1),
    }


def throughput(root: Path, sample: int) -> dict:
    """The embedder alone, in a fresh embedder, on an even sample of the build's chunk texts:
    the rate that the build's embedding share is checked against."""
    from kb.repo import Repo
    from kb.retrieval.corpus import collect_corpus
    from kb.retrieval.embedder import embed_all, make_embedder

    repo = Repo(root)
    r = repo.config.retrieval
    chunks = collect_corpus(repo, repo.head(), r.chunk_tokens, r.chunk_overlap).chunks
    step = max(1, len(chunks) // sample)
    texts = [c.text for c in chunks[::step]][:sample]
    embedder = make_embedder(r.embedder)
    embedder.embed_passages(texts[:2])  # load the model outside the timing
    t0 = time.perf_counter()
    embed_all(embedder, texts)
    seconds = time.perf_counter() - t0
    rate = len(texts) / seconds
    return {
        "sample": len(texts),
        "seconds": round(seconds, 2),
        "chunks_per_second": round(rate, 1),
        "projected_embed_seconds_all_chunks": round(len(chunks) / rate, 1),
    }


def incremental(root: Path, full_seconds: float | None, embedder: str = "model", runs: int = 3, profile: Path | None = None) -> dict:
    """Edit one section of one page, commit, build incrementally; ``runs`` times (a different
    page each time), reporting every time and the median. ``profile`` writes cProfile stats of
    the last run."""
    from kb.repo import Repo
    from kb.retrieval.build import build_index

    repo = Repo(root)
    times, cpu, results = [], [], []
    for run in range(runs):
        path = f"knowledge/topic-03/page-{3 + 100 * run:05d}.md"
        text = repo.read_at(repo.head(), path).decode()
        marker = "\n## "
        at = text.index(marker, text.index(marker) + 1)  # the second section
        repo.commit_changes(
            {path: (text[:at] + f"\nA late correction ({run}) was added to this section." + text[at:]).encode()},
            "bench: edit one page\n",
        )
        prof = None
        if profile is not None and run == runs - 1:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        result = build_index(repo, embedder=_embedder(embedder))
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        if prof is not None:
            prof.disable()
            prof.dump_stats(str(profile))
        results.append(result)
    last = results[-1]
    out = {
        "seconds": [round(t, 3) for t in times],
        "median_seconds": round(statistics.median(times), 3),
        "cpu_seconds": [round(t, 3) for t in cpu],
        "median_cpu_seconds": round(statistics.median(cpu), 3),
        "embedded": last.embedded,
        "reused": last.reused,
        "removed": last.removed,
        "added": last.added,
        "chunks": last.chunks,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    if full_seconds:
        out["share_of_full"] = round(statistics.median(times) / full_seconds, 4)
    return out


def _rss_mb() -> tuple[float, float]:
    status = Path("/proc/self/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def query(root: Path, count: int) -> dict:
    from kb.repo import Repo
    from kb.retrieval.search import make_query, open_searcher

    queries = json.loads((root.parent / "queries.json").read_text())[:count]
    repo = Repo(root)
    t0 = time.perf_counter()
    searcher = open_searcher(repo)
    load = time.perf_counter() - t0
    searcher.search(make_query("warm up the query embedder", "system"))  # first call loads the model
    latencies = []
    for text in queries:
        t = time.perf_counter()
        searcher.search(make_query(text, "system", k=10))
        latencies.append((time.perf_counter() - t) * 1000)
    user = [make_query(text, "user:u004", k=10, include_evidence=True) for text in queries[:50]]
    user_lat = []
    for q in user:
        t = time.perf_counter()
        searcher.search(q)
        user_lat.append((time.perf_counter() - t) * 1000)
    latencies.sort()
    rss, peak = _rss_mb()
    return {
        "queries": len(latencies),
        "load_seconds": round(load, 3),
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
        "max_ms": round(latencies[-1], 1),
        "user_scope_p50_ms": round(statistics.median(user_lat), 1),
        "rss_mb": round(rss, 1),
        "peak_rss_mb": round(peak, 1),
        "index_mb": round(sum(f.stat().st_size for f in searcher.folder.rglob("*") if f.is_file()) / 2**20, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["generate", "build", "throughput", "incremental", "query", "all"])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sample", type=int, default=1500, help="chunks embedded alone by the throughput step")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kb-scale"))
    parser.add_argument("--json-out", type=Path)
    parser.add_argument(
        "--embedder", choices=["model", "hash"], default="model", help="hash: a deterministic stand-in, for build and incremental timing"
    )
    parser.add_argument("--model", default="", help="generate: the repository's retrieval.embedder (default: kb's default)")
    parser.add_argument("--runs", type=int, default=3, help="incremental builds, each after a one-section edit")
    parser.add_argument("--profile", type=Path, help="cProfile stats of the last incremental build")
    args = parser.parse_args()
    root = args.workdir / "repo"
    report: dict = json.loads(args.json_out.read_text()) if args.json_out and args.json_out.exists() else {}
    steps = ["generate", "build", "throughput", "incremental", "query"] if args.step == "all" else [args.step]
    for step in steps:
        print(f"{step} ...", file=sys.stderr, flush=True)
        if step == "generate":
            report["generate"] = generate(root, args.pages, model=args.model)
        elif step == "build":
            report["build"] = build(root, args.embedder)
        elif step == "throughput":
            report["throughput"] = throughput(root, args.sample)
        elif step == "incremental":
            report["incremental"] = incremental(root, report.get("build", {}).get("seconds"), args.embedder, args.runs, args.profile)
        elif args.embedder == "hash":
            report[step] = {"skipped": "--embedder hash: the index is not queryable with the configured model"}
        else:  # a fresh process, so that load time and memory are the serving ones
            cmd = [sys.executable, __file__, "_query", "--workdir", str(args.workdir), "--queries", str(args.queries)]
            report["query"] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        report["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
        print(json.dumps(report.get(step), indent=2), file=sys.stderr, flush=True)
        if args.json_out:
            args.json_out.write_text(json.dumps(report, indent=2, sort_keys=True))
    print(json.dumps(report, indent=2, sort_keys=True))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_query":
        p = argparse.ArgumentParser()
        p.add_argument("_query")
        p.add_argument("--workdir", type=Path)
        p.add_argument("--queries", type=int)
        a = p.parse_args()
        print(json.dumps(query(a.workdir / "repo", a.queries)))
    else:
        main()
