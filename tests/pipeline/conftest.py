"""A repository with the bundled sample evidence, for the change loop tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.repo import Repo
from kb.scaffold import init_repository
from tests.builders import add_file


@pytest.fixture
def sample_repo(tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    repo = init_repository(tmp_path / "kb")
    ids = {
        "policy": add_file(repo, "travel-policy.md", "document"),
        "s1": add_file(repo, "alice-2025-03-02.json", "conversation", "alice"),
        "s2": add_file(repo, "alice-2025-06-18.json", "conversation", "alice"),
    }
    return repo, ids
