"""Kill and resume (issue 10, acceptance): `evidence add`, `memory ingest`, `merge`,
`index build`, and `forget --user`, `forget ID` and `forget --match` (issue 16) killed with
SIGKILL at random points; the next command works without a manual step, nothing reported as
added is lost, nothing forgotten shows in between (from the moment the deny entry exists), the
rest of the user's memory stays, and the repository checks clean. A few trials per command
here; ``bench/kill_trials.py`` runs many (docs/benchmarks.md)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.integration.kill_harness import SCENARIOS, kill_trial, make_template

TRIALS = {"evidence add": 3, "memory ingest": 3, "merge": 3, "index build": 2, "forget": 3, "forget item": 2, "forget match": 2}


@pytest.mark.parametrize("name", list(TRIALS))
def test_killed_at_random_points_the_next_command_resumes(tmp_path: Path, name: str) -> None:
    seed = int(os.environ.get("KB_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    template = make_template(SCENARIOS[name], tmp_path / "template")
    trials = [kill_trial(template, tmp_path / f"trial-{n}", rng) for n in range(TRIALS[name])]
    failed = [t for t in trials if not t.ok]
    assert not failed, f"seed {seed} (rerun with KB_KILL_SEED={seed}): {failed}"
