"""Tool-call latency of ``kb mcp``: ``kb_search`` and ``kb_memory_context`` over stdio and over
Streamable HTTP against the same calls made in-process, and the token cost of the tool list.

    PYTHONPATH=. python bench/mcp_latency.py --pages 1000 --model minilm-en --workdir /tmp/kb-mcp1k

The repository is ``bench/retrieval_scale.py``'s (SciFact abstracts as pages, 80% shared and 20%
over 50 users; the queries are SciFact's claims), built in full with the configured embedder, so
every hybrid search embeds its query with the real model. Memory contexts are asked as user
``u004``. Each transport gets the same queries in the same order after ``--warmup`` calls; the
in-process figures (run first and again last, pooled) call ``pipeline.mcp.service.KbService`` directly (no protocol, no JSON-RPC).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrieval_scale

USER = "u004"  # retrieval_scale gives user u(n % 50) the pages n with n % 5 == 4


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values) * 1000, 1), "p95_ms": round(percentile(values, 0.95) * 1000, 1), "n": len(values)}


def prepare(workdir: Path, pages: int, model: str, embedder: str = "model") -> Path:
    root = workdir / "kb"
    if not (root / ".kb" / "index").exists():
        workdir.mkdir(parents=True, exist_ok=True)
        if not root.exists():
            retrieval_scale.generate(root, pages, model=model)
        print(json.dumps({"build": retrieval_scale.build(root, embedder)}), file=sys.stderr)
    if embedder == "hash":
        relabel(root)
    return root


def relabel(root: Path) -> None:
    """Name the configured model as the embedder of a hash-vector index (same dimension), so that
    the server accepts it and every hybrid query is embedded by the real model: the latency is
    the model's and the dense search's over the same number of vectors; the dense ranks are noise."""
    from kb.repo import Repo
    from kb.retrieval.embedder import make_embedder
    from kb.retrieval.store import index_store

    repo = Repo(root)
    folder = index_store(repo).current_path()
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    identity = make_embedder(repo.config.retrieval.embedder).identity
    if manifest["build_key"]["embedder"] != identity:
        manifest["build_key"]["embedder"] = identity
        (folder / "manifest.json").write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
        print(json.dumps({"relabelled": str(folder.name), "as": identity}), file=sys.stderr)


def calls(queries: list[str]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for q in queries:
        out.append(("kb_search", {"query": q, "k": 10}))
        out.append(("kb_memory_context", {"question": q, "budget": 2000}))
    return out


def in_process(root: Path, plan: list[tuple[str, dict[str, Any]]], warmup: int) -> dict[str, list[float]]:
    from kb.repo import Repo
    from pipeline.mcp.service import KbService

    service = KbService(Repo(root), f"user:{USER}")
    run = {
        "kb_search": lambda a: service.search(a["query"], a["k"]),
        "kb_memory_context": lambda a: service.memory_context(a["question"], a["budget"]),
    }
    times: dict[str, list[float]] = {"kb_search": [], "kb_memory_context": []}
    for n, (tool, args) in enumerate(plan):
        t0 = time.perf_counter()
        run[tool](args)
        if n >= warmup:
            times[tool].append(time.perf_counter() - t0)
    return times


async def _through(client: Any, plan: list[tuple[str, dict[str, Any]]], warmup: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"kb_search": [], "kb_memory_context": []}
    for n, (tool, args) in enumerate(plan):
        t0 = time.perf_counter()
        result = await client.call_tool(tool, args)
        if result.is_error:
            raise SystemExit(f"{tool} failed: {result.content[0].text}")
        if n >= warmup:
            times[tool].append(time.perf_counter() - t0)
    return times


def over_stdio(root: Path, plan: list[tuple[str, dict[str, Any]]], warmup: int) -> tuple[dict[str, list[float]], dict[str, int]]:
    from mcp import Client, StdioServerParameters

    from kb.tokens import count_tokens

    args = ["-m", "kb", "--repo", str(root), "mcp", "--as", f"user:{USER}"]

    async def main() -> tuple[dict[str, list[float]], dict[str, int]]:
        costs = {}
        for writes in (False, True):
            params = StdioServerParameters(command=sys.executable, args=args + (["--writes"] if writes else []), env=dict(os.environ))
            async with Client(params) as client:
                tools = (await client.list_tools()).model_dump(mode="json", exclude_none=True)["tools"]
                costs["with_writes" if writes else "reads"] = count_tokens(json.dumps(tools, ensure_ascii=False))
                if not writes:
                    times = await _through(client, plan, warmup)
        return times, costs

    return asyncio.run(main())


def over_http(root: Path, plan: list[tuple[str, dict[str, Any]]], warmup: int) -> dict[str, list[float]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from pipeline.mcp.auth import token_digest

    secret = "bench-token-0123456789"
    tokens = root.parent / "tokens.yaml"
    grant = {"name": "bench", "sha256": token_digest(secret), "principal": f"user:{USER}", "scopes": ["kb:read"]}
    tokens.write_text(json.dumps({"tokens": [grant]}), encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (root.parent / "http.log").open("w")
    cmd = [sys.executable, "-m", "kb", "--repo", str(root), "mcp", "--http", "--port", str(port), "--tokens", str(tokens)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)

        async def main() -> dict[str, list[float]]:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=300) as http:
                async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
                    return await _through(client, plan, warmup)

        return asyncio.run(main())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--model", default="minilm-en", help="the repository's retrieval.embedder")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kb-mcp-bench"))
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument(
        "--embedder",
        default="model",
        choices=["model", "hash"],
        help="hash: vectors from a hash of the text (retrieval_scale's stand-in) for a quick build at 10,000 pages; "
        "queries still embed with the configured model, so latency is real but dense ranks are not",
    )
    parser.add_argument("--warmup", type=int, default=6, help="calls (of both tools) left out of the figures on each transport")
    args = parser.parse_args()
    root = prepare(args.workdir, args.pages, args.model, args.embedder)
    queries = json.loads((root.parent / "queries.json").read_text())[: args.queries]
    plan = calls(queries)
    report: dict[str, Any] = {"pages": args.pages, "model": args.model, "embedder": args.embedder, "queries": len(queries)}
    first = in_process(root, plan, args.warmup)
    stdio, costs = over_stdio(root, plan, args.warmup)
    http = over_http(root, plan, args.warmup)
    last = in_process(root, plan, args.warmup)  # again at the end: the machine's state drifts over a run
    report["in_process"] = {k: summary(first[k] + last[k]) for k in first}
    report["stdio"] = {k: summary(v) for k, v in stdio.items()}
    report["http"] = {k: summary(v) for k, v in http.items()}
    report["tool_list_tokens"] = costs
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
