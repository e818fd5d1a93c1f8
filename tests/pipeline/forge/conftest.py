"""A kb repository whose forge is the GitHub test double (tests/forge/github_double.py) on loopback:
``origin`` is the double's git smart-HTTP, ``forge.api_url`` its REST API."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kb.repo import Repo
from kb.scaffold import init_repository
from pipeline.forge.github import GitHubForge
from pipeline.forge.remote import GitRemote
from tests.builders import add_file
from tests.forge.github_double import GitHubDouble

TOKENS = {"KB_PROPOSER_TOKEN": "tok-proposer", "KB_REVIEWER_TOKEN": "tok-reviewer"}


@dataclass
class ForgeSetup:
    repo: Repo
    double: GitHubDouble
    ids: dict[str, str]

    def forge(self, **env: str) -> GitHubForge:
        return GitHubForge(self.repo.config.forge, TOKENS | env, base_delay_s=0.01)


def forge_config(api_url: str, extra: str = "") -> str:
    return (
        "forge:\n  kind: github\n  repository: acme/kb\n"
        f"  api_url: {api_url}\n  reviewer_login: kb-reviewer\n  max_retries: 2\n  max_wait_s: 5\n{extra}"
    )


@pytest.fixture
def github(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ForgeSetup]:
    double = GitHubDouble(tmp_path / "github").start()
    double.add_token("tok-proposer", "kb-proposer")
    double.add_token("tok-reviewer", "kb-reviewer")
    double.add_token("tok-reader", "reader", access="read")
    for name, value in TOKENS.items():
        monkeypatch.setenv(name, value)
    try:
        repo = init_repository(tmp_path / "kb")
        config = repo.root / "kb.config.yaml"
        config.write_text(config.read_text(encoding="utf-8") + forge_config(double.api_url), encoding="utf-8")
        repo.commit_worktree_paths(["kb.config.yaml"], "Use the GitHub forge")
        repo.git.remotes.create("origin", double.git_url)
        ids = {
            "policy": add_file(repo, "travel-policy.md", "document"),
            "s1": add_file(repo, "alice-2025-03-02.json", "conversation", "alice"),
            "s2": add_file(repo, "alice-2025-06-18.json", "conversation", "alice"),
        }
        GitRemote(repo.root, "origin", "tok-proposer").push_branch("main")
        yield ForgeSetup(Repo(repo.root), double, ids)
    finally:
        double.stop()
