"""Concurrency and kill trials (issue 10): many parallel `kb evidence add`s, and many SIGKILLs of
`evidence add`, `memory ingest`, `merge` and `index build` at random points, each followed by the
next command and a check of the repository (tests/integration/kill_harness.py; the test suite
runs a few of the same trials).

Usage: PYTHONPATH=. python bench/kill_trials.py [--trials 20] [--adds 10] [--rounds 3] [--seed N] [--only PREFIX]

``--only forget`` runs the forget scenarios alone (`forget --user`, `forget ID`, `forget --match`),
``--adds 0`` skips the parallel adds.

Prints, per command, how many trials ran, how many were killed while running (the rest had
finished before the signal), how many passed; then the wall time of N parallel adds (all must
land). Exit 1 if any trial or add failed.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kb.evidence import load_ledger, verify_chain
from kb.scaffold import init_repository
from tests.integration.kill_harness import SCENARIOS, kill_trial, make_template
from tests.integration.processes import finish, start_kb, unreviewed_on_main


def parallel_adds(folder: Path, count: int) -> tuple[float, int, int]:
    """Wall time of ``count`` concurrent ``kb evidence add`` processes; (seconds, exit-0 count,
    items in the ledger)."""
    repo = init_repository(folder / "kb")
    notes = []
    for n in range(count):
        note = folder / f"note-{n}.md"
        note.write_text(f"# Note {n}\n\nParallel note number {n}.\n")
        notes.append(note)
    started = time.monotonic()
    processes = [start_kb("--repo", str(repo.root), "evidence", "add", str(note), cwd=folder) for note in notes]
    codes = [finish(p)[0] for p in processes]
    wall = time.monotonic() - started
    entries = load_ledger(repo.root)
    if verify_chain(entries) or unreviewed_on_main(repo.root):
        return wall, 0, len(entries)
    return wall, codes.count(0), len(entries)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="kill trials per command")
    parser.add_argument("--adds", type=int, default=10, help="parallel adds")
    parser.add_argument("--rounds", type=int, default=3, help="repetitions of the parallel adds")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--only", default="", help="run only the scenarios whose name starts with this")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}; seed {seed}")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="kb-kill-") as tmp:
        base = Path(tmp)
        print(f"\n{'command':<15}{'trials':>7}{'killed':>8}{'passed':>8}{'run (s)':>9}")
        for name, scenario in SCENARIOS.items():
            if not name.startswith(args.only):
                continue
            template = make_template(scenario, base / name.replace(" ", "-") / "template")
            trials = [kill_trial(template, base / name.replace(" ", "-") / f"trial-{n}", rng) for n in range(args.trials)]
            passed = sum(t.ok for t in trials)
            failures += len(trials) - passed
            print(f"{name:<15}{len(trials):>7}{sum(t.killed for t in trials):>8}{passed:>8}{template.duration:>9.2f}")
            for t in trials:
                if not t.ok:
                    print(f"    FAILED after {t.delay}s: {t.problems}")
        if args.adds:
            failures += _parallel_rounds(base, args.adds, args.rounds)
    return 1 if failures else 0


def _parallel_rounds(base: Path, adds: int, rounds: int) -> int:
    """Rounds of ``adds`` parallel adds; returns how many adds did not land."""
    failures = 0
    print(f"\n{adds} parallel `kb evidence add` ({rounds} rounds)")
    walls = []
    for r in range(rounds):
        wall, landed, items = parallel_adds(base / f"adds-{r}", adds)
        walls.append(wall)
        failures += adds - landed
        print(f"  round {r + 1}: {landed}/{adds} exited 0, {items} items in the ledger, wall {wall:.2f}s")
    print(f"  median wall {statistics.median(walls):.2f}s")
    return failures


if __name__ == "__main__":
    sys.exit(main())
