"""``kb run``, ``kb merge`` and ``kb memory context`` when there is nothing to do, or no such user."""

from __future__ import annotations

from pathlib import Path

import pygit2

from kb.errors import NotFoundError
from tests.builders import write_chat
from tests.kb.cli.helpers import assert_one_error


def _repo_with_a_chat(cli, tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    chat = write_chat(tmp_path / "chat.json", [("user", "I live in Porto and I prefer window seats.")], "2025-05-01T10:00:00")
    assert cli("evidence", "add", str(chat), "--kind", "conversation", "--user", "dana", cwd=root).code == 0
    return root


def test_run_with_nothing_new_is_not_an_error(cli, tmp_path: Path) -> None:
    root = _repo_with_a_chat(cli, tmp_path)
    first = cli("run", "--no-index", cwd=root)
    assert first.code == 0, first.err
    merged = [line for line in first.out.splitlines() if line.startswith("proposed ")]
    assert merged, first.out
    branch = merged[0].split()[1].rstrip(":")
    again = cli("run", "--no-index")
    assert again.code == 0, again.err
    assert again.out.startswith("nothing to do: no new evidence")
    # merging the branch that was merged says so, and changes nothing
    head = pygit2.Repository(str(root)).head.target
    result = cli("merge", branch, "--no-index")
    assert result.code == 0, result.err
    assert result.out.startswith(f"{branch} is already merged as ")
    assert pygit2.Repository(str(root)).head.target == head
    # a branch that never existed is still an unknown branch
    assert_one_error(cli("merge", "kb/never-was", "--no-index"), NotFoundError.exit_code, "no branch kb/never-was")


def test_memory_context_for_an_unknown_user_is_not_found(cli, tmp_path: Path) -> None:
    root = _repo_with_a_chat(cli, tmp_path)
    assert_one_error(
        cli("memory", "context", "--user", "nobody", "where do I live?", cwd=root), NotFoundError.exit_code, "no memory for user 'nobody'"
    )


def test_version(cli) -> None:
    result = cli("--version")
    assert result.code == 0 and result.out.strip() == "kb 0.1.0"


def test_a_missing_api_key_stops_kb_run_at_once_with_exit_10(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    root = _repo_with_a_chat(cli, tmp_path)
    config = root / "kb.config.yaml"
    models = "  proposer:\n    model: openai/gpt-4o\n    family: openai\n"
    config.write_text(config.read_text().replace("  allow_same_family: false", models + "  allow_same_family: false"))
    pygit2_repo = pygit2.Repository(str(root))
    head = pygit2_repo.head.target
    assert_one_error(cli("run", "--no-index", cwd=root), 10, "no API key: OPENAI_API_KEY is not set", "hint: export OPENAI_API_KEY=")
    assert pygit2_repo.head.target == head
    assert [b for b in pygit2_repo.branches.local if b.startswith("kb/")] == []
