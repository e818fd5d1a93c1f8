"""Wall time of `kb forget` and `kb forget --verify` on a generated repository of N pages and M
evidence items (docs/benchmarks.md, issue 16).

Usage: PYTHONPATH=. python bench/forget_scale.py [--pages 10000] [--evidence 2000] [--dir DIR]

The repository is the one of bench/check_scale.py (80% system pages, 20% over 10 users, three
citations per page, folder indexes; evidence of 20 lines, half of it users'), generated once and
copied for each target, so every forgetting starts from the same state. No index is built: with
one, a forgetting also rebuilds it from the new HEAD, which costs what a full `kb index build`
costs (measured apart in docs/benchmarks.md). Each target runs through the real CLI in a fresh
process:

- ``--user u9`` (200 evidence items and 1,000 memory pages),
- one evidence item (u9's item cited by the most pages),
- ``--match`` a sentence of one item.

Prints a table of wall and CPU times (forget, then forget --verify) with the exit codes and the
summary line each printed. CPU time says more than wall time on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.check_scale import generate
from kb.evidence import load_ledger


def _run(args: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds of the process and its children, exit code, its first line of
    output: the summary, or the error)."""
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kb", *args], cwd=cwd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    lines = (proc.stdout.strip() if proc.returncode == 0 else proc.stderr.strip() or proc.stdout.strip()).splitlines()
    first = next((line for line in lines if line.startswith(("commit", "verification", "fg-", "error"))), lines[0] if lines else "")
    return wall, cpu, proc.returncode, first


def _plan_size(command: list[str], root: Path) -> str:
    """What the forgetting changes, from its dry run: items, pages deleted, pages edited."""
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run(
        [sys.executable, "-m", "kb", *command, "--dry-run", "--json"], cwd=root, capture_output=True, text=True, env=env, check=True
    )
    plan = json.loads(proc.stdout)["plan"]
    return f"{len(plan['evidence'])} items, {len(plan['redacted'])} redacted, {len(plan['deleted_pages'])} pages deleted, {len(plan['edited_pages'])} edited"


def _targets(template: Path) -> list[tuple[str, list[str]]]:
    """u9 (the generator gives memory pages to u4 and u9, evidence to odd users: u9 has both),
    u9's item cited by the most pages, and one line of it."""
    entries = [e for e in load_ledger(template) if e.path and e.scope == "user:u9"]
    pages = [p.read_text(encoding="utf-8") for p in (template / "users" / "u9").rglob("*.md")]
    item = max(entries, key=lambda e: sum(e.id in text for text in pages))
    line = (template / item.path).read_text(encoding="utf-8").splitlines()[3]
    sentence = line.split(": ", 1)[1]
    return [
        ("--user u9", ["forget", "--user", "u9"]),
        ("one evidence item", ["forget", item.id]),
        ("--match (one line)", ["forget", "--match", sentence]),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=10000)
    parser.add_argument("--evidence", type=int, default=2000)
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="kb-bench-forget-"))
    template = base / "template"
    started = time.perf_counter()
    if not (template / "kb.config.yaml").exists():
        generate(template, args.pages, args.evidence)
    generated = time.perf_counter() - started
    objects = subprocess.run(["git", "-C", str(template), "count-objects", "-v"], capture_output=True, text=True, check=True).stdout
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; load {os.getloadavg()[0]:.1f}")
    print(f"repository: {args.pages} pages, {args.evidence} evidence items; generated in {generated:.1f} s")
    print("git objects: " + ", ".join(line for line in objects.splitlines() if line.startswith(("count", "in-pack", "size-pack"))))
    print("\n| target | forget wall (CPU) s | exit | forget --verify wall (CPU) s | exit | output |")
    print("|---|---|---|---|---|---|")
    failures = 0
    for name, command in _targets(template):
        root = base / name.split()[0].strip("-")
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(template, root, symlinks=True)
        wall, cpu, code, out = _run(command, root)
        vwall, vcpu, vcode, vout = _run(["forget", "--verify"], root)
        failures += bool(code or vcode)
        plan = _plan_size(command, template)
        print(f"| {name} ({plan}) | {wall:.1f} ({cpu:.1f}) | {code} | {vwall:.1f} ({vcpu:.1f}) | {vcode} | {out} / {vout} |", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
