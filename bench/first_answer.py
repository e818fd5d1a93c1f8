"""Time from ``kb evidence add`` of a documentation folder to the first search answer.

    python bench/first_answer.py DOCS_DIR --query "session middleware" [--allow 7412f57c903b4dc1] \
        [--kb-src DIR] [--workdir /tmp/kb-first] [--json-out out.json]

A fresh repository (``kb init``, its own empty embedding cache), then, each a ``kb`` process
as a user would run them: ``kb evidence add DOCS_DIR``, ``kb index build`` started in the
background, and ``kb search QUERY --include-evidence --json`` every half second until it
answers with an evidence hit; last the build is waited for. ``--kb-src`` runs another checkout
of kb (an older commit unpacked with ``git archive``) for a before/after comparison; the
``--allow`` values go into ``secrets.allow`` of ``kb.config.yaml`` (fingerprints of example
secrets in the documentation).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def _kb(src: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([sys.executable, "-m", "kb", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


def measure(docs: Path, query: str, src: Path, workdir: Path, allow: list[str]) -> dict[str, object]:
    shutil.rmtree(workdir, ignore_errors=True)
    repo = workdir / "repo"
    repo.mkdir(parents=True)
    assert _kb(src, repo, "init").returncode == 0
    if allow:
        config = repo / "kb.config.yaml"
        config.write_text(config.read_text() + f"\nsecrets:\n  allow: [{', '.join(allow)}]\n")
        subprocess.run(["git", "commit", "-qam", "bench: allow the documentation's example secrets"], cwd=repo, check=True)
    t0 = time.perf_counter()
    added = _kb(src, repo, "evidence", "add", str(docs), "--source", docs.name)
    if added.returncode != 0:
        raise SystemExit(f"kb evidence add failed: {added.stderr.strip()}")
    t_added = time.perf_counter() - t0
    env = {**os.environ, "PYTHONPATH": str(src)}
    build = subprocess.Popen(
        [sys.executable, "-m", "kb", "index", "build", "--json"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    first: dict[str, object] = {}
    polls = 0
    while not first:
        polls += 1
        found = _kb(src, repo, "search", query, "--include-evidence", "--json", "--k", "3")
        if found.returncode == 0:
            data = json.loads(found.stdout)
            hits = [h for h in data["hits"] if h["kind"] == "evidence"]
            if hits:
                first = {
                    "seconds": round(time.perf_counter() - t0, 2),
                    "dense_pending": data.get("dense_pending", 0),
                    "top": f"{hits[0]['title']} #{hits[0]['anchor']}",
                    "ranks": hits[0]["ranks"],
                }
                break
        if build.poll() is not None and found.returncode != 0:
            raise SystemExit(f"the build ended and search still fails: {found.stderr.strip()}")
        time.sleep(0.5)
    out, _ = build.communicate()
    t_built = time.perf_counter() - t0
    result = json.loads(out) if build.returncode == 0 else {}
    return {
        "kb_src": str(src),
        "added_seconds": round(t_added, 2),
        "first_answer_seconds": first["seconds"],
        "first_answer": first,
        "search_polls": polls,
        "build_done_seconds": round(t_built, 2),
        "chunks": result.get("chunks"),
        "embedded": result.get("embedded"),
        "servable_seconds": result.get("servable_seconds"),
        "published": result.get("published"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("docs", type=Path)
    parser.add_argument("--query", required=True)
    parser.add_argument("--kb-src", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kb-first"))
    parser.add_argument("--allow", action="append", default=[])
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    report = measure(args.docs.resolve(), args.query, args.kb_src.resolve(), args.workdir, args.allow)
    report["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.json_out:
        args.json_out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
