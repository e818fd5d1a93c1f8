"""The table of forges (pipeline/forge/kinds.py) and the capabilities the jobs ask instead of a
forge's name: a forge that only differs in what it offers changes what the jobs do."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import get_args

import pytest

from kb.config import ForgeKind
from kb.errors import ForgeError, UsageError
from kb.repo import Repo
from pipeline.forge.base import Capabilities
from pipeline.forge.changes import list_changes, make_forge, review_change, status_of_change
from pipeline.forge.github import GitHubForge
from pipeline.forge.kinds import FORGES
from pipeline.forge.local import LocalForge
from pipeline.loop import LocalSteps, loop_steps
from pipeline.propose import propose

ROOT = Path(__file__).resolve().parents[3]


def test_the_table_holds_exactly_the_kinds_the_config_accepts() -> None:
    assert set(FORGES) == set(get_args(ForgeKind))


def test_make_forge_builds_the_kind_the_table_names(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample_repo
    local = make_forge(repo)
    assert isinstance(local, LocalForge) and local.capabilities == Capabilities()
    assert local.remote(repo.root, "proposer") is None
    with pytest.raises(UsageError, match="unknown forge 'gitea'") as caught:
        make_forge(repo, "gitea")
    assert caught.value.hint == "use one of: local, github (e.g. --forge local)"
    assert GitHubForge.capabilities == Capabilities(pull_requests=True, labels=True, required_checks=True)


class LabelledLocalForge(LocalForge):
    """The local forge as a forge whose changes carry labels and whose merges wait for checks."""

    capabilities = Capabilities(labels=True, required_checks=True)


def test_the_jobs_follow_the_capabilities_not_the_name(sample_repo: tuple[Repo, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _ = sample_repo
    branch = propose(repo).branch
    plain = make_forge(repo, "local")
    assert [s.change.branch for s in list_changes(repo, plain)] == [branch]
    assert status_of_change(repo, branch, plain).required == ()

    monkeypatch.setitem(FORGES, "labelled", LabelledLocalForge)
    labelled = make_forge(repo, "labelled")
    # unlabelled branches are not kb's on a forge with labels: not listed, not reviewed
    assert list_changes(repo, labelled) == []
    with pytest.raises(ForgeError, match="was not made by kb"):
        review_change(repo, branch, labelled)
    assert status_of_change(repo, branch, labelled).required == ("kb/gate",)
    # without pull requests, `kb run` reviews and merges here
    assert isinstance(loop_steps(repo, labelled), LocalSteps)


def test_no_module_outside_the_table_tests_a_forge_by_name() -> None:
    """The acceptance grep of issue 22: no kind-string test of a forge outside pipeline/forge/kinds.py."""
    pattern = r'forge\.kind ==\|forge\.kind !=\|kind == "github"\|kind == "local"'
    found = subprocess.run(
        ["grep", "-rn", "--include=*.py", pattern, "kb", "ci", "agents", "pipeline"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert found.returncode == 1 and found.stdout == "", found.stdout
    planted = subprocess.run(["grep", "-n", pattern], input='if forge.kind == "github":\n', capture_output=True, text=True, check=False)
    assert planted.returncode == 0  # the same pattern finds a planted test
