"""A merged change is traceable from git alone and can be undone: `git revert -m 1` of the merge
followed by `kb index build` removes its pages from every retriever."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kb.repo import Repo
from kb.retrieval.build import build_index
from kb.retrieval.search import make_query, search
from kb.scaffold import init_repository
from pipeline.loop import RunStatus, run_loop
from tests.builders import add_file


def test_revert_of_a_merge_then_index_build_removes_its_pages(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    add_file(repo, "travel-policy.md", "document")
    result = run_loop(repo)  # merges and builds the index
    assert result.status is RunStatus.MERGED
    for mode in ("bm25", "dense", "hybrid"):
        assert [h.id for h in search(repo, make_query("daily meal allowance", k=3, mode=mode))][0] == "knowledge/travel-policy"
    merge = repo.head()
    # the git binary commits as the identity pinned in tests/conftest.py
    subprocess.run(["git", "revert", "--no-edit", "-m", "1", str(merge.id)], cwd=repo.root, check=True, capture_output=True)
    repo = Repo(repo.root)
    assert not (repo.root / "knowledge/travel-policy.md").exists()
    build_index(repo)
    for mode in ("bm25", "dense", "hybrid"):
        assert "knowledge/travel-policy" not in [h.id for h in search(repo, make_query("daily meal allowance", k=10, mode=mode))]
