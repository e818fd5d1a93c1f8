"""``kb`` as separate processes, for the concurrency and kill tests: the command line of this
checkout (``python -m kb`` with this worktree first on the import path and the tests' pinned git
identity), and what main's history may contain."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pygit2

from tests.conftest import GIT_HOME

ROOT = Path(__file__).resolve().parents[2]


def kb_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KB_REPO", "KB_LOCK_WAIT")}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(GIT_HOME), "PYTHONDONTWRITEBYTECODE": "1"})
    env.update(extra)
    return env


def start_kb(*args: str, cwd: Path, **env: str) -> subprocess.Popen[str]:
    """``kb *args`` in a new process (stdout and stderr piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", "kb", *args], cwd=cwd, env=kb_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def main_line(root: Path) -> list[str]:
    """Subjects of main's first-parent history, newest first: what landed on main itself."""
    git = pygit2.Repository(str(root))
    commit: pygit2.Commit | None = git.head.peel(pygit2.Commit)
    subjects = []
    while commit is not None:
        subjects.append(commit.message.splitlines()[0])
        commit = commit.parents[0] if commit.parents else None
    return subjects


def unreviewed_on_main(root: Path) -> list[str]:
    """Commits on main's first-parent line that are neither the initial commit, an evidence add
    nor a merge nor a forgetting: what no kb command may put there."""
    allowed = ("kb: initialise", "evidence: add ", "Merge kb/", "forget: fg-")
    return [s for s in main_line(root) if not s.startswith(allowed)]
