"""Benchmark pull-request round trips against the GitHub TEST DOUBLE (tests/forge/github_double.py).

Usage: PYTHONPATH=. python bench/pr_roundtrip.py [--rounds 5] [--json]

The double is the project's own loopback stand-in for GitHub's REST subset plus real git
smart-HTTP (``git http-backend``), not GitHub: the wall times are kb's own cost plus loopback
HTTP and git, without GitHub's latency or rate limits; the call counts are what a round trip
costs on GitHub (multiply by your round-trip time to GitHub for an estimate).

Each round trip, with the built-in offline agents and the two identities (proposer, reviewer):

- setup (not a forge step, timed apart): a new document lands on main and is pushed (what
  triggers the propose workflow), and the offline Proposer makes a work branch (``kb propose``);
- open: ``kb pr open`` (gate, push, open the pull request, label it, set the ``kb/gate`` status);
- status: ``kb pr status``; review: ``kb pr review`` (gate and Reviewer on the exact head, one PR
  review, the signed note pushed); merge: ``kb pr merge --no-index`` (checks, approval, the
  merge through the API, branch deleted, main synced);
- sync: ``kb sync`` on a separate clone, the serving host (fetch main, incremental index build;
  the two parts timed apart, the index checked to be at the merged commit).

Each step calls the same functions as its command (``pipeline.forge.changes``), with a fresh
``Repo`` and forge client as a new command would have; Python's start-up and imports are not in
the step times. REST calls are counted by endpoint from the double's call log; git pushes and
fetches by wrapping ``GitRemote``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kb.evidence import add_items
from kb.intake import prepare
from kb.repo import Repo
from kb.retrieval.build import build_index
from kb.scaffold import init_repository
from pipeline.forge import changes
from pipeline.forge.remote import GitRemote
from pipeline.propose import propose
from tests.forge.github_double import GitHubDouble

STEPS = ("open", "status", "review", "merge", "sync")
TOKENS = {"KB_PROPOSER_TOKEN": "bench-proposer", "KB_REVIEWER_TOKEN": "bench-reviewer"}
CITIES = ["Lisbon", "Oslo", "Tallinn", "Porto", "Ghent", "Krakow", "Bergen", "Turku", "Graz", "Lyon", "Malmo", "Cork"]

git_ops: list[str] = []  # "push" / "fetch", in order, once count_git_operations() has run


def count_git_operations() -> None:
    """Wrap ``GitRemote._git`` (every push and fetch of the forge layer goes through it) to log them."""
    plain = GitRemote._git

    def counted(self: GitRemote, *args: str, what: str) -> str:
        if args and args[0] in ("push", "fetch"):
            git_ops.append(args[0])
        return plain(self, *args, what=what)

    GitRemote._git = counted  # type: ignore[method-assign]


def document(i: int) -> bytes:
    """A small policy document with facts of its own (one per round trip)."""
    city = CITIES[i % len(CITIES)] + ("" if i < len(CITIES) else f" {i // len(CITIES) + 1}")
    return (
        f"# {city} office handbook\n\n## Hours\n\nThe {city} office opens at {7 + i % 3}:00 and closes at {16 + i % 3}:00 on weekdays.\n"
        f"Visitors must sign in at the front desk on floor {2 + i % 5}.\n\n## Equipment\n\n"
        f"Each desk in the {city} office has {2 + i % 2} monitors. Laptops are replaced every {3 + i % 2} years.\n"
    ).encode()


def endpoint(call: str) -> str:
    """``PUT /repos/acme/kb/pulls/3/merge`` -> ``PUT /pulls/{n}/merge`` (numbers and commits generalised)."""
    method, path = call.split(" ", 1)
    path = re.sub(r"^/repos/[^/]+/[^/]+", "", path)
    path = re.sub(r"/[0-9a-f]{40}(?=/|$)", "/{sha}", path)
    return f"{method} {re.sub(r'/[0-9]+(?=/|$)', '/{n}', path)}"


def git_env(token: str) -> dict[str, str]:
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return os.environ | {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
    }


def setup(workdir: Path) -> tuple[GitHubDouble, Path, Path]:
    os.environ.update(TOKENS)
    os.environ.setdefault("KB_SIGNING_KEY", str(workdir / "review_ed25519"))
    for key, value in {"NAME": "kb bench", "EMAIL": "kb-bench@example.invalid"}.items():
        os.environ.setdefault(f"GIT_AUTHOR_{key}", value)
        os.environ.setdefault(f"GIT_COMMITTER_{key}", value)
    double = GitHubDouble(workdir / "github").start()
    double.add_token(TOKENS["KB_PROPOSER_TOKEN"], "kb-proposer")
    double.add_token(TOKENS["KB_REVIEWER_TOKEN"], "kb-reviewer")
    repo = init_repository(workdir / "kb")
    config = repo.root / "kb.config.yaml"
    forge = f"forge:\n  kind: github\n  repository: acme/kb\n  api_url: {double.api_url}\n  reviewer_login: kb-reviewer\n"
    config.write_text(config.read_text(encoding="utf-8") + forge, encoding="utf-8")
    repo.commit_worktree_paths(["kb.config.yaml"], "Use the GitHub forge")
    repo.git.remotes.create("origin", double.git_url)
    GitRemote(repo.root, "origin", TOKENS["KB_PROPOSER_TOKEN"]).push_branch("main")
    serving = workdir / "serving"
    subprocess.run(["git", "clone", "-q", double.git_url, str(serving)], env=git_env(TOKENS["KB_PROPOSER_TOKEN"]), check=True)
    return double, repo.root, serving


def sync_parts(serving: Path) -> dict[str, float]:
    """``kb sync`` in its two parts (``changes.sync`` is the first then the second), timed apart:
    fetch the default branch and move main to it, then the incremental index build."""
    start = time.perf_counter()
    changes.sync(Repo(serving), build=False)
    fetched = time.perf_counter()
    result = build_index(Repo(serving))
    assert result.commit == str(Repo(serving).head().id), "the index is not at the merged commit"
    return {"fetch_s": fetched - start, "index_s": time.perf_counter() - fetched}


def measure(double: GitHubDouble, fn: Callable[[], Any]) -> tuple[float, list[str], list[str], Any]:
    calls_before, git_before = len(double.calls), len(git_ops)
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    return seconds, [endpoint(c) for c in double.calls[calls_before:]], git_ops[git_before:], result


def round_trip(double: GitHubDouble, root: Path, serving: Path, i: int) -> dict[str, Any]:
    start = time.perf_counter()
    repo = Repo(root)
    add_items(repo, [prepare(document(i), f"office-{i}.md", "document", "system")])
    GitRemote(root, "origin", TOKENS["KB_PROPOSER_TOKEN"]).push_branch("main")
    branch = propose(Repo(root)).branch
    row: dict[str, Any] = {"setup_s": time.perf_counter() - start, "steps": {}}
    number = ""  # set by the open step; the later steps' lambdas read it when they run
    commands: dict[str, Callable[[], Any]] = {
        "open": lambda: changes.open_change(Repo(root), branch),
        "status": lambda: changes.status_of_change(Repo(root), number),
        "review": lambda: changes.review_change(Repo(root), number),
        "merge": lambda: changes.merge_change(Repo(root), number, build_index=False),
        "sync": lambda: sync_parts(serving),
    }
    for step in STEPS:
        seconds, calls, gits, result = measure(double, commands[step])
        if step == "open":
            number = str(result.change.number)
            assert result.gate_ok, f"round {i}: the gate failed on {branch}"
        if step == "review":
            assert result.review.verdict == "approve", f"round {i}: {result.review.verdict} on #{number}"
        row["steps"][step] = {"s": seconds, "calls": calls, "git": gits}
        if step == "sync":
            row["sync_parts"] = result
    assert double.pulls[int(number)].merged, f"round {i}: #{number} not merged"
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    steps: dict[str, Any] = {}
    for step in STEPS:
        times = [r["steps"][step]["s"] for r in rows]
        calls = Counter(c for r in rows for c in r["steps"][step]["calls"])
        gits = Counter(g for r in rows for g in r["steps"][step]["git"])
        steps[step] = {
            "median_s": round(statistics.median(times), 3),
            "max_s": round(max(times), 3),
            "api_calls": sum(calls.values()) / len(rows),
            "by_endpoint": {k: v / len(rows) for k, v in sorted(calls.items())},
            "git": {k: v / len(rows) for k, v in sorted(gits.items())},
        }
    totals = [sum(r["steps"][s]["s"] for s in STEPS) for r in rows]
    return {
        "round_trips": len(rows),
        "per_round_trip": {
            "api_calls": sum(s["api_calls"] for s in steps.values()),
            "git_pushes": sum(s["git"].get("push", 0) for s in steps.values()),
            "git_fetches": sum(s["git"].get("fetch", 0) for s in steps.values()),
            "median_s": round(statistics.median(totals), 3),
            "setup_median_s": round(statistics.median(r["setup_s"] for r in rows), 3),
        },
        "sync_parts_median_s": {k: round(statistics.median(r["sync_parts"][k] for r in rows), 3) for k in ("fetch_s", "index_s")},
        "steps": steps,
    }


def table(summary: dict[str, Any]) -> str:
    lines = ["| step | median s | max s | API calls | git | calls by endpoint |", "|---|---:|---:|---:|---|---|"]
    for step, s in summary["steps"].items():
        gits = ", ".join(f"{v:g} {k}" for k, v in s["git"].items()) or "-"
        ends = "; ".join(f"`{k}` {v:g}" for k, v in s["by_endpoint"].items()) or "-"
        lines.append(f"| {step} | {s['median_s']:.3f} | {s['max_s']:.3f} | {s['api_calls']:g} | {gits} | {ends} |")
    per = summary["per_round_trip"]
    lines.append(
        f"| **round trip** | {per['median_s']:.3f} | | {per['api_calls']:g} | {per['git_pushes']:g} push, {per['git_fetches']:g} fetch | |"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="round trips to run (default 5)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    args = parser.parse_args()
    count_git_operations()
    workdir = Path(tempfile.mkdtemp(prefix="kb-bench-pr-"))
    double, root, serving = setup(workdir)
    try:
        seconds, _, _, _ = measure(double, lambda: changes.sync(Repo(serving)))  # the serving host's first, full build
        rows = [round_trip(double, root, serving, i) for i in range(args.rounds)]
    finally:
        double.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    summary = summarise(rows) | {
        "first_sync_full_build_s": round(seconds, 3),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"# {summary['machine']}; {summary['round_trips']} round trips against the GitHub test double (loopback)")
    print(f"# setup per round trip (document on main, pushed; kb propose): median {summary['per_round_trip']['setup_median_s']:.3f} s")
    print(f"# the serving clone's first kb sync (full index build): {summary['first_sync_full_build_s']:.3f} s")
    parts = summary["sync_parts_median_s"]
    print(f"# sync = fetch and move main (median {parts['fetch_s']:.3f} s) + incremental index build (median {parts['index_s']:.3f} s)")
    print(table(summary))


if __name__ == "__main__":
    main()
