"""A catastrophic regular expression in ``kb grep`` or the agents' ``grep_docs`` is stopped by a
time bound and answered with one clear error, never a hang (issue 10, low items); an over-long
pattern is refused before it is compiled."""

from __future__ import annotations

import time

import pytest

import kb.retrieval.reading
from agents.read_tools import RepoReader
from kb.errors import UsageError
from kb.repo import Repo
from tests.builders import make_repo, page_for
from tests.kb.cli.helpers import assert_one_error

# (a|aa)+$ against a run of a's that ends in another letter backtracks exponentially.
EVIL = "(a|aa)+$"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    body = "# Runs\n\n" + "a" * 80 + "b\n\nAnvils are heavy.\n"
    return make_repo(tmp_path_factory.mktemp("grep") / "kb", {"knowledge/runs.md": page_for("knowledge/runs.md", "Runs", "Runs.", body)})


@pytest.fixture(autouse=True)
def short_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kb.retrieval.reading, "REGEX_SECONDS", 0.3)


def test_kb_grep_stops_a_catastrophic_regex(repo: Repo, cli) -> None:
    start = time.monotonic()
    result = cli("--repo", str(repo.root), "grep", EVIL, "--regex")
    assert time.monotonic() - start < 10
    assert_one_error(result, 2, "regular expression took longer than 0.3 s")
    assert "Anvils" in cli("--repo", str(repo.root), "grep", "anvils are", "--regex", "-i").out  # an ordinary one still works


def test_grep_docs_stops_a_catastrophic_regex(repo: Repo) -> None:
    reader = RepoReader(repo, repo, "system", checks=lambda: "")
    with pytest.raises(UsageError, match="took longer than"):
        reader.grep_docs(EVIL, regex=True)
    assert "knowledge/runs" in reader.grep_docs("heavy")


def test_an_over_long_pattern_is_refused(repo: Repo, cli) -> None:
    result = cli("--repo", str(repo.root), "grep", "x" * 100_000)
    assert_one_error(result, 2, "pattern of 100,000 characters is over the limit")
