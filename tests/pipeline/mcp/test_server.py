"""The MCP server through the SDK's own in-memory client: every tool's result, schema and errors,
resources, scoping by principal, and the two writes (evidence, then a reviewed change)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from kb.repo import Repo
from kb.retrieval.build import build_index
from pipeline.mcp.server import ServerOptions, build_server
from tests.builders import commit, make_sample_repo, page_text

READ_TOOLS = {"kb_overview", "kb_search", "kb_read", "kb_grep", "kb_evidence", "kb_memory_context", "kb_history", "kb_change_status"}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict[str, str]]:
    repo, ids = make_sample_repo(tmp_path_factory.mktemp("mcp") / "r")
    build_index(repo)
    return repo, ids


def session(repo: Repo, principal: str = "system", writes: bool = False) -> Callable[..., Any]:
    """Run ``body(client)`` against a fresh in-memory server for ``principal``."""

    def run(body: Callable[[Client], Coroutine[Any, Any, Any]]) -> Any:
        async def main() -> Any:
            async with Client(build_server(repo, ServerOptions(principal=principal, writes=writes))) as client:
                return await body(client)

        return asyncio.run(main())

    return run


def payload(result: Any) -> dict[str, Any]:
    """The JSON inside a tool result's untrusted-data block."""
    assert not result.is_error, result.content[0].text
    text = result.content[0].text
    match = re.fullmatch(r'<untrusted-data source="([^"]+)">\n(.*)\n</untrusted-data>', text, re.S)
    assert match, text
    data = json.loads(match.group(2))
    assert "@" in match.group(1)
    return data


def error_text(result: Any) -> str:
    assert result.is_error
    return str(result.content[0].text)


def test_reads_only_without_writes_and_schemas_from_the_arguments(sample: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample
    tools = session(repo)(lambda c: c.list_tools()).tools
    assert {t.name for t in tools} == READ_TOOLS
    by_name = {t.name: t for t in tools}
    search = by_name["kb_search"].input_schema
    assert search["required"] == ["query"] and search["properties"]["k"]["maximum"] == 50
    assert search["properties"]["mode"]["enum"] == ["hybrid", "bm25", "dense"]
    assert all(t.annotations and t.annotations.read_only_hint for t in tools)
    writable = session(repo, writes=True)(lambda c: c.list_tools()).tools
    assert {t.name for t in writable} == READ_TOOLS | {"kb_remember", "kb_propose", "kb_forget"}
    forget = next(t for t in writable if t.name == "kb_forget")
    assert forget.annotations and forget.annotations.destructive_hint
    assert all(t.annotations and not t.annotations.read_only_hint for t in writable if t.name in {"kb_remember", "kb_propose"})


def test_search_read_grep_evidence_and_history(sample: tuple[Repo, dict[str, str]]) -> None:
    repo, ids = sample
    head = str(repo.head().id)  # type: ignore[union-attr]

    async def body(c: Client) -> list[Any]:
        return [
            await c.call_tool("kb_search", {"query": "window seats", "k": 3}),
            await c.call_tool("kb_read", {"page": "users/alice/preferences", "level": "L2"}),
            await c.call_tool("kb_grep", {"pattern": "vegetarian", "ignore_case": True}),
            await c.call_tool("kb_evidence", {"reference": f"{ids['chat']}#L3-L3"}),
            await c.call_tool("kb_history", {"page": "users/alice/preferences"}),
            await c.call_tool("kb_overview", {}),
            await c.call_tool("kb_memory_context", {"question": "Which seat should I book?", "budget": 500}),
        ]

    search, read, grep, evidence, history, overview, memory = (payload(r) for r in session(repo, "user:alice")(body))
    assert search["commit"] == head and search["hits"][0]["id"] == "users/alice/preferences"
    assert read["commit"] == head and "Prefers window seats." in read["text"]
    assert {h["page"] for h in grep["hits"]} == {"users/alice/index", "users/alice/preferences"}
    assert evidence["lines"][0]["line"] == 3 and "window seats" in evidence["lines"][0]["text"]
    assert [c["commit"] for c in history["changes"]] == [head]
    assert {f["folder"] for f in overview["folders"]} == {"knowledge", "knowledge/travel", "users/alice"}
    assert memory["commit"] == head and "window" in json.dumps(memory)


def test_errors_are_one_line_results_with_a_hint(sample: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample

    async def body(c: Client) -> list[Any]:
        return [
            await c.call_tool("kb_read", {"page": "knowledge/nope"}),
            await c.call_tool("kb_search", {"query": "   "}),
            await c.call_tool("kb_search", {"query": "x", "k": 0}),
            await c.call_tool("kb_evidence", {"reference": "ev-0000000000000000#L1-L2"}),
            await c.call_tool("kb_evidence", {"reference": "ev-0000000000000000#Lx"}),
            await c.call_tool("kb_read", {"page": "knowledge/travel/visas", "commit": "no-such-rev"}),
            await c.call_tool("kb_memory_context", {"question": "anything"}),
            await c.call_tool("kb_grep", {"pattern": "(a|aa)+$", "regex": True, "page": "knowledge/nope"}),
            await c.call_tool("kb_change_status", {"branch": "kb/missing"}),
        ]

    texts = [error_text(r) for r in session(repo)(body)]
    assert "error: no page 'knowledge/nope'" in texts[0] and "hint:" in texts[0]
    assert "error: empty query" in texts[1]
    assert "k" in texts[2] and "validation" in texts[2]
    assert "unknown evidence id 'ev-0000000000000000'" in texts[3]
    assert "bad line span" in texts[4]
    assert "unknown commit or branch `no-such-rev`" in texts[5]
    assert "a memory context is a user's" in texts[6]
    assert "hint:" in texts[7]
    assert "unknown branch 'kb/missing'" in texts[8]
    assert not any("Traceback" in t for t in texts)


def test_cursor_and_an_older_commit(tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    first = str(repo.head().id)  # type: ignore[union-attr]
    long_body = (
        "# Long\n\n## Overview\n\nA long page.\n\n## Part\n\n" + "\n\n".join(f"Paragraph {n} about airships." for n in range(400)) + "\n"
    )
    commit(repo, {"knowledge/long.md": page_text("knowledge/long", "Long", "A long page.", "system", long_body)}, "long page")

    async def body(c: Client) -> list[Any]:
        one = payload(await c.call_tool("kb_read", {"page": "knowledge/long", "level": "L2", "max_tokens": 100}))
        two = payload(
            await c.call_tool("kb_read", {"page": "knowledge/long", "level": "L2", "max_tokens": 100, "cursor": one["next_cursor"]})
        )
        old = await c.call_tool("kb_read", {"page": "knowledge/long", "commit": first})
        return [one, two, old]

    one, two, old = session(repo)(body)
    assert one["next_cursor"] and two["line_start"] > one["line_end"] - 1
    assert "Paragraph 0 " in one["text"] and "Paragraph 0 " not in two["text"]
    assert "no page 'knowledge/long'" in error_text(old)


def test_no_principal_sees_another_users_pages_or_evidence(sample: tuple[Repo, dict[str, str]]) -> None:
    """Nothing of alice's reaches system or bob: not her text, not a count, not a different error
    than for a page or an evidence id that does not exist (asserted on the raw result bytes)."""
    repo, ids = sample
    hers, nobodys = "users/alice/preferences", "users/alice/no-such-page"
    her_item, no_item = ids["chat"], "ev-00000000000000ff"

    async def body(c: Client) -> tuple[str, list[str], list[str]]:
        results = [
            await c.call_tool("kb_search", {"query": "which seat and meals do I like", "include_evidence": True}),
            await c.call_tool("kb_grep", {"pattern": "window"}),
            await c.call_tool("kb_overview", {}),
            await c.call_tool("kb_search", {"query": "prefers", "mode": "bm25"}),
        ]
        pairs = []
        for tool, args in (("kb_read", {"page": "{p}"}), ("kb_history", {"page": "{p}"}), ("kb_evidence", {"reference": "{e}"})):
            texts = []
            for page, item in ((hers, her_item), (nobodys, no_item)):
                filled = {k: v.format(p=page, e=item) for k, v in args.items()}
                texts.append(error_text(await c.call_tool(tool, filled)).replace(page, "P").replace(item, "E"))
            pairs.append(texts)
        listing = [(await c.list_resources()).model_dump_json(), (await c.list_resource_templates()).model_dump_json()]
        return "\n".join([r.model_dump_json() for r in results] + listing), [a for a, _ in pairs], [b for _, b in pairs]

    for principal in ("system", "user:bob"):
        raw, for_hers, for_nobodys = session(repo, principal)(body)
        for word in ("window seats", "Vegetarian", "Alice prefers", hers, her_item, "user:alice"):
            assert word not in raw, (principal, word)
        assert for_hers == for_nobodys, principal


def test_remember_then_propose_gives_a_reviewed_change_and_main_stays(tmp_path: Path) -> None:
    from pipeline.review import review_branch

    repo, _ = make_sample_repo(tmp_path / "r")
    chat = "[2025-03-01T10:00:00Z] user: I prefer aisle seats on long flights.\n[2025-03-01T10:00:05Z] assistant: Noted.\n"

    async def body(c: Client) -> list[dict[str, Any]]:
        first = payload(await c.call_tool("kb_remember", {"content": chat, "kind": "conversation", "source": "chat-42"}))
        again = payload(await c.call_tool("kb_remember", {"content": chat, "kind": "conversation", "source": "chat-42"}))
        main_after_remember = str(repo.head().id)  # type: ignore[union-attr]
        change = payload(await c.call_tool("kb_propose", {"evidence_ids": [first["evidence_id"]]}))
        assert str(repo.head().id) == main_after_remember  # type: ignore[union-attr]
        status = payload(await c.call_tool("kb_change_status", {"branch": change["branch"]}))
        return [first, again, change, status]

    first, again, change, status = session(repo, "user:alice", writes=True)(body)
    assert first["added"] and not again["added"] and again["evidence_id"] == first["evidence_id"]
    entry = next(e for e in __import__("kb.evidence", fromlist=["x"]).load_ledger(repo.root) if e.id == first["evidence_id"])
    assert entry.scope == "user:alice" and entry.source == "chat-42"
    assert change["branch"].startswith("kb/") and change["claims"] >= 1 and status["merged"] is False
    review = review_branch(repo, change["branch"])
    assert review.record.verdict == "approve"


def test_a_write_tool_needs_writes_enabled(sample: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample
    result = session(repo, "user:alice")(lambda c: c.call_tool("kb_remember", {"content": "x"}))
    assert "kb_remember" in error_text(result)


def test_a_running_server_picks_up_a_new_index_version(tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    build_index(repo)

    async def body(c: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        before = payload(await c.call_tool("kb_search", {"query": "zeppelin hangar", "mode": "bm25"}))
        body_text = "# Hangars\n\n## Overview\n\nZeppelin hangars.\n\n## Size\n\nThe zeppelin hangar is huge.\n"
        commit(
            repo, {"knowledge/hangars.md": page_text("knowledge/hangars", "Hangars", "Zeppelin hangars.", "system", body_text)}, "hangars"
        )
        build_index(repo)
        after = payload(await c.call_tool("kb_search", {"query": "zeppelin hangar", "mode": "bm25"}))
        return before, after

    before, after = session(repo)(body)
    assert before["commit"] != after["commit"] == str(repo.head().id)  # type: ignore[union-attr]
    assert "knowledge/hangars" not in [h["id"] for h in before["hits"]]
    assert after["hits"][0]["id"] == "knowledge/hangars"


def test_forget_is_a_plan_first_and_runs_only_for_the_admin_with_its_code(tmp_path: Path) -> None:
    from kb.evidence import load_ledger

    repo, ids = make_sample_repo(tmp_path / "r")
    as_alice = session(repo, "user:alice", writes=True)(lambda c: c.call_tool("kb_forget", {"user": "alice"}))
    assert "forgetting needs the admin principal" in error_text(as_alice)

    async def body(c: Client) -> list[Any]:
        plan = payload(await c.call_tool("kb_forget", {"user": "alice"}))
        wrong = await c.call_tool("kb_forget", {"user": "alice", "confirm": "000000000000"})
        both = await c.call_tool("kb_forget", {"user": "alice", "evidence_id": ids["chat"]})
        done = payload(await c.call_tool("kb_forget", {"user": "alice", "confirm": plan["confirm"]}))
        return [plan, wrong, both, done]

    head = str(repo.head().id)  # type: ignore[union-attr]
    plan, wrong, both, done = session(repo, "system", writes=True)(body)
    assert plan["done"] is False and plan["commit"] == head and "users/alice/preferences.md" in plan["plan"]["deleted_pages"]
    assert "does not match the current plan" in error_text(wrong)
    assert "exactly one of" in error_text(both)
    assert done["done"] is True and done["record"]["result"] == "clean"
    assert repo.read_at(repo.head(), "users/alice/preferences.md") is None  # type: ignore[arg-type]
    assert ids["chat"] not in {e.id for e in load_ledger(repo.root) if e.kind != "forget"}
