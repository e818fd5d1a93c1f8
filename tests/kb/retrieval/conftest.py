"""Helpers for the retrieval tests: small real repositories with valid pages, real git commits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kb.page import page_id_for_path, render_page
from kb.repo import Repo
from kb.scaffold import init_repository
from kb.scopes import scope_for_path


def page_text(
    path: str,
    title: str,
    summary: str,
    body: str,
    *,
    status: str = "active",
    type: str = "fact",
    valid_from: str | None = None,
    valid_to: str | None = None,
) -> str:
    """A valid page for ``path`` (id and scope derived from the path)."""
    meta: dict[str, Any] = {
        "id": page_id_for_path(path),
        "type": type,
        "title": title,
        "summary": summary,
        "scope": scope_for_path(path),
        "status": status,
    }
    if valid_from:
        meta["valid_from"] = valid_from
    if valid_to:
        meta["valid_to"] = valid_to
    return render_page(meta, body if body.endswith("\n") else body + "\n")


def make_repo(root: Path, pages: dict[str, str] | None = None) -> Repo:
    """``kb init`` in ``root``, then one commit with ``pages`` (path -> full page text)."""
    repo = init_repository(root)
    if pages:
        commit(repo, pages, "add pages")
    return repo


def commit(repo: Repo, changes: dict[str, str | None], message: str = "change") -> str:
    """Write ``changes`` to the working tree and commit exactly those paths (None deletes)."""
    for path, text in changes.items():
        target = repo.root / path
        if text is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return str(repo.commit_worktree_paths(sorted(changes), message))


def add_conversation(repo: Repo, messages: list[dict[str, str]], user: str | None = None, name: str = "chat.json") -> str:
    """Append a conversation to the evidence log (committed); returns its evidence id."""
    from kb.evidence import add_items
    from kb.intake import prepare
    from kb.scopes import user_scope

    item = prepare(json.dumps(messages).encode(), name, "conversation", user_scope(user))
    result = add_items(repo, [item])
    return result.added[0].id


def sections(*pairs: tuple[str, str]) -> str:
    """A body with one ``## title`` section per (title, text) pair."""
    return "".join(f"## {title}\n\n{text}\n\n" for title, text in pairs)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """Run ``kb`` in-process: returns (exit code, stdout, stderr)."""
    from kb.cli.app import main

    def run(*args: str) -> tuple[int, str, str]:
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    yield run
