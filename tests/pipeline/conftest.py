"""A repository with the bundled sample evidence, for the change loop tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.evidence import add_items
from kb.intake import prepare
from kb.repo import Repo
from kb.scaffold import init_repository
from kb.scopes import user_scope

SAMPLES = Path(__file__).resolve().parents[2] / "kb" / "samples"


def add_file(repo: Repo, name: str, kind: str, user: str | None = None) -> str:
    item = prepare((SAMPLES / name).read_bytes(), name, kind, user_scope(user))
    add_items(repo, [item])
    return item.id


@pytest.fixture
def sample_repo(tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    repo = init_repository(tmp_path / "kb")
    ids = {
        "policy": add_file(repo, "travel-policy.md", "document"),
        "s1": add_file(repo, "alice-2025-03-02.json", "conversation", "alice"),
        "s2": add_file(repo, "alice-2025-06-18.json", "conversation", "alice"),
    }
    return repo, ids
