"""Run logs: every agent run keeps its transcript (messages, tool calls, results, usage) under
``.kb/runs/<run-id>/`` as JSON. Derived state: git-ignored, never needed to rebuild anything."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kb.clock import compact_utc
from kb.repo import Repo, atomic_write


def new_run_dir(repo: Repo, kind: str) -> Path:
    stamp = compact_utc(micro=True)
    path = repo.state_dir / "runs" / f"{stamp}-{kind}-{os.getpid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_transcript(run_dir: Path, name: str, data: dict[str, Any]) -> Path:
    path = run_dir / f"{name}.json"
    atomic_write(path, (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode("utf-8"))
    return path
