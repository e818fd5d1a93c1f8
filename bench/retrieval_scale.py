"""Scale benchmark of the serving layer on a generated repository.

    python bench/retrieval_scale.py all --pages 10000 --workdir /tmp/kb-scale --json-out scale.json

Steps (each also runs alone): ``generate`` writes a repository with N pages (~5 sections each,
80% shared, 20% spread over 50 users) in one commit; ``build`` runs a full build and reports the
share of time spent embedding; ``incremental`` edits one section of one page, commits, and
times the incremental build; ``query`` loads the index in a fresh process and runs Q hybrid
queries (query embedding included), reporting load time, p50/p95 and resident memory.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORDS = """account address agreement airline airport allergy analysis annual answer apartment appointment
approval archive arrival assistant audit balance bank battery benefit bicycle birthday board booking border
bridge budget building bus business cabin calendar camera campaign canal candidate capital card career carrier
cash catalogue ceremony certificate chair channel chapter charge checklist chemistry child citizen city claim
client climate clinic coffee colleague collection committee community company complaint conference contract
contractor copy council course court credit currency customer database deadline delivery department deposit
design device diet dinner director discount doctor document donation driver election electricity email
employee energy engine equipment estimate event evidence exam exchange expense experiment export factory family
farm fee festival file finance flight floor forecast form freight fuel fund garden gate gift guest guide harbour
health holiday hospital hotel household income inspection insurance interview invoice island journey kitchen
laboratory language lease lecture ledger library licence loan luggage machine manager manual market meal
medicine meeting member menu message meter migration mortgage museum network newsletter office order owner
package parcel parking partner passport patient payment pension permit pharmacy phone plan platform policy
portfolio price printer procedure product project property proposal purchase quota railway receipt recipe
refund region rent report request reservation restaurant review river road salary sample schedule school season
seat security seminar server service shipment shop station storage student subscription supplier survey system
tax teacher team ticket timetable tour trade training transfer travel treatment trip tuition university vaccine
vehicle vendor visa voucher warehouse warranty website workshop""".split()
VERBS = "approved booked cancelled changed checked closed confirmed delayed delivered extended moved opened paid postponed raised reduced renewed replaced requested signed".split()
ADJ = "annual basic careful central early extra final formal late local main monthly new old quick regular second small special weekly".split()
SYLLABLES = "ka lo mi ren tor vin sa del bra qui nor fe lix ta mon ger zu pal hen cor".split()


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def _sentence(rng: random.Random, entity: str) -> str:
    w = rng.choice
    return f"{entity} {w(VERBS)} the {w(ADJ)} {w(WORDS)} {w(['for', 'with', 'after', 'before', 'near'])} the {w(WORDS)} in {rng.randint(2015, 2026)}, costing {rng.randint(2, 900)} euros."


def _page(rng: random.Random, path: str, scope: str, n: int) -> tuple[str, list[str]]:
    entity = f"{_name(rng)} {rng.choice(WORDS).capitalize()}"
    topic = rng.choice(WORDS)
    title = f"{entity} {topic}"
    summary = _sentence(rng, entity)
    body = [f"# {title}\n"]
    queries = []
    for s in range(5):
        heading = f"{rng.choice(ADJ).capitalize()} {rng.choice(WORDS)} {s + 1}"
        sentences = [_sentence(rng, entity if i == 0 else rng.choice(["It", "The team", entity])) for i in range(rng.randint(2, 4))]
        body.append(f"## {heading}\n\n" + " ".join(sentences) + "\n")
        queries.append(f"{entity} {' '.join(sentences[0].split()[1:6])}")
    meta = f"---\nid: {path[:-3]}\ntype: fact\ntitle: {title}\nsummary: {summary}\nscope: {scope}\nstatus: active\n---\n"
    return meta + "\n".join(body), queries


def generate(root: Path, pages: int, seed: int = 7) -> dict:
    from kb.scaffold import init_repository

    rng = random.Random(seed)
    repo = init_repository(root)
    changes: dict[str, bytes | None] = {}
    queries: list[str] = []
    for n in range(pages):
        if n % 5 == 4:
            user = f"u{n % 50:03d}"
            path, scope = f"users/{user}/page-{n:05d}.md", f"user:{user}"
        else:
            path, scope = f"knowledge/topic-{n % 100:02d}/page-{n:05d}.md", "system"
        text, qs = _page(rng, path, scope, n)
        changes[path] = text.encode()
        if scope == "system":
            queries.append(rng.choice(qs))
    t0 = time.perf_counter()
    repo.commit_changes(changes, f"bench: {pages} generated pages\n")
    rng.shuffle(queries)
    (root.parent / "queries.json").write_text(json.dumps(queries[:1000]))
    return {"pages": pages, "commit_seconds": round(time.perf_counter() - t0, 2)}


def _progress(stage: str, done: int, total: int) -> None:
    if done == total or done % 2048 == 0:
        print(f"  {stage}: {done}/{total}  {time.strftime('%H:%M:%S')}", file=sys.stderr, flush=True)


def build(root: Path) -> dict:
    from kb.indexing import build_index
    from kb.repo import Repo

    result = build_index(Repo(root), full=True, progress=_progress)
    return {
        "chunks": result.chunks,
        "pages": result.pages,
        "seconds": result.seconds,
        "embed_seconds": result.embed_seconds,
        "embed_share": round(result.embed_seconds / result.seconds, 4),
        "chunks_per_second": round(result.chunks / result.embed_seconds, 1),
    }


def incremental(root: Path, full_seconds: float | None) -> dict:
    from kb.indexing import build_index
    from kb.repo import Repo

    repo = Repo(root)
    path = "knowledge/topic-03/page-00003.md"
    text = repo.read_at(repo.head(), path).decode()
    marker = "\n## "
    at = text.index(marker, text.index(marker) + 1)  # the second section
    repo.commit_changes({path: (text[:at] + "\nA late correction was added to this section." + text[at:]).encode()}, "bench: edit one page\n")
    t0 = time.perf_counter()
    result = build_index(repo)
    seconds = time.perf_counter() - t0
    out = {"seconds": round(seconds, 2), "embedded": result.embedded, "reused": result.reused, "removed": result.removed, "added": result.added}
    if full_seconds:
        out["share_of_full"] = round(seconds / full_seconds, 4)
    return out


def _rss_mb() -> tuple[float, float]:
    status = Path("/proc/self/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def query(root: Path, count: int) -> dict:
    from kb.repo import Repo
    from kb.search import make_query, open_searcher

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
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["generate", "build", "incremental", "query", "all"])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kb-scale"))
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    root = args.workdir / "repo"
    report: dict = json.loads(args.json_out.read_text()) if args.json_out and args.json_out.exists() else {}
    steps = ["generate", "build", "incremental", "query"] if args.step == "all" else [args.step]
    for step in steps:
        print(f"{step} ...", file=sys.stderr, flush=True)
        if step == "generate":
            report["generate"] = generate(root, args.pages)
        elif step == "build":
            report["build"] = build(root)
        elif step == "incremental":
            report["incremental"] = incremental(root, report.get("build", {}).get("seconds"))
        else:  # a fresh process, so that load time and memory are the serving ones
            cmd = [sys.executable, __file__, "_query", "--workdir", str(args.workdir), "--queries", str(args.queries)]
            report["query"] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        report["machine"] = {"cpus": __import__("os").cpu_count(), "python": sys.version.split()[0]}
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
