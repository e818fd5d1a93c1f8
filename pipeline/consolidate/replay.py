"""The replay score of a commit: the share of ``consolidation/replay.yaml`` cases found there."""

from __future__ import annotations

import pygit2

from ci.rules.conservation import pages_at
from ci.rules.replay import REPLAY_FILE, found, parse_replay
from kb.repo import Repo


def replay_score(repo: Repo, commit: pygit2.Commit | None) -> float | None:
    """None when the repository keeps no replay cases."""
    data = repo.read_at(commit, REPLAY_FILE) if commit is not None else None
    cases = parse_replay(data.decode("utf-8")) if data else []
    if not cases or commit is None:
        return None
    pages = pages_at(repo, commit)
    return sum(1 for case in cases if found(case, pages)) / len(cases)
