"""Who commits: kb signs with the git identity it finds (``Repo.signature``), and the tests pin
that identity (tests/conftest.py) so no test depends on the machine's git configuration."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import ConfigLevel

from kb.repo import Repo
from kb.scaffold import init_repository
from tests.conftest import GIT_IDENTITY


def identity(signature: pygit2.Signature) -> tuple[str, str]:
    return signature.name, signature.email


def test_commits_made_in_a_test_repository_carry_the_pinned_identity(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    first = repo.head()
    assert identity(first.author) == identity(first.committer) == GIT_IDENTITY
    (repo.root / "knowledge" / "note.md").write_text("a note\n")
    repo = Repo(repo.root)
    second = repo.git[repo.commit_worktree_paths(["knowledge/note.md"], "add a note\n")]
    assert identity(second.author) == identity(second.committer) == GIT_IDENTITY
    # the git binary, which some tests run, commits as the same identity
    subprocess.run(["git", "commit", "--allow-empty", "-q", "-m", "empty"], cwd=repo.root, check=True, capture_output=True)
    third = Repo(repo.root).head()
    assert third.parents[0].id == second.id
    assert identity(third.author) == identity(third.committer) == GIT_IDENTITY


@pytest.fixture
def no_git_identity(tmp_path: Path) -> Iterator[None]:
    """libgit2 finds no global configuration (so no user.name/user.email) for this test."""
    paths = pygit2.settings.search_path
    saved = paths[ConfigLevel.GLOBAL]
    empty = tmp_path / "empty-home"
    empty.mkdir()
    paths[ConfigLevel.GLOBAL] = str(empty)
    try:
        yield
    finally:
        paths[ConfigLevel.GLOBAL] = saved


@pytest.mark.usefixtures("no_git_identity")
def test_without_a_configured_identity_kb_signs_as_itself(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    assert identity(repo.signature()) == ("kb", "kb@localhost")
    assert identity(repo.head().author) == ("kb", "kb@localhost")
