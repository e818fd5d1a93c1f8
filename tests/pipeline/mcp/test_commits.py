"""Every read accepts an optional commit and every result names the commit it was read from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from kb.retrieval.build import build_index
from tests.builders import commit, make_sample_repo, page_text
from tests.pipeline.mcp.test_server import READ_TOOLS, payload, session


def test_every_read_takes_a_commit_and_names_the_one_it_read(tmp_path: Path) -> None:
    repo, ids = make_sample_repo(tmp_path / "r")
    build_index(repo)
    first = str(repo.head().id)  # type: ignore[union-attr]
    body = "# Hangars\n\n## Overview\n\nZeppelin hangars.\n\n## Size\n\nHuge.\n"
    commit(repo, {"knowledge/hangars.md": page_text("knowledge/hangars", "Hangars", "Zeppelin hangars.", "system", body)}, "hangars")
    build_index(repo)
    second = str(repo.head().id)  # type: ignore[union-attr]
    tools = {t.name: t for t in session(repo)(lambda c: c.list_tools()).tools}
    # kb_change_status names a branch, whose head is the commit it reports
    assert {n for n in READ_TOOLS if "commit" in tools[n].input_schema["properties"]} == READ_TOOLS - {"kb_change_status"}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("kb_overview", {}),
        ("kb_search", {"query": "window seats"}),
        ("kb_read", {"page": "users/alice/preferences"}),
        ("kb_grep", {"pattern": "window"}),
        ("kb_evidence", {"reference": ids["chat"]}),
        ("kb_memory_context", {"question": "Which seat should I book?", "budget": 500}),
        ("kb_history", {"page": "users/alice/preferences"}),
    ]

    async def body_(c: Client) -> list[tuple[str, str, str]]:
        out = []
        for name, args in calls:
            now = payload(await c.call_tool(name, args))["commit"]
            then = payload(await c.call_tool(name, {**args, "commit": first}))["commit"]
            out.append((name, now, then))
        return out

    for name, now, then in session(repo, "user:alice")(body_):
        assert (now, then) == (second, first), name
