"""``kb_search``'s ``level`` (what each hit returns) and ``cursor`` (the next k hits of the same
search at the same commit), through the SDK's in-memory client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from kb.repo import Repo
from kb.retrieval.build import build_index
from pipeline.mcp.service import L0_HIT_FIELDS
from tests.builders import commit, make_sample_repo, page_text
from tests.pipeline.mcp.test_server import error_text, payload, session

AIRSHIPS = 7  # pages that match "airships"


def airship_pages() -> dict[str, str]:
    pages = {}
    for n in range(AIRSHIPS):
        body = f"# Airship {n}\n\n## Overview\n\nAirships of line {n}.\n\n## Routes\n\nThe airships of line {n} fly {n + 2} routes.\n"
        pages[f"knowledge/air/line-{n}.md"] = page_text(
            f"knowledge/air/line-{n}", f"Airship line {n}", f"Line {n}'s airships.", "system", body
        )
    return pages


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo, _ = make_sample_repo(tmp_path_factory.mktemp("mcp-pages") / "r")
    commit(repo, airship_pages(), "pages: airships")
    build_index(repo)
    return repo


def test_level_says_what_each_hit_returns(fleet: Repo) -> None:
    page = "knowledge/air/line-3"
    args = {"query": "airships of line 3 routes", "k": 2, "mode": "bm25"}

    async def body(c: Client) -> list[Any]:
        schema = next(t for t in (await c.list_tools()).tools if t.name == "kb_search").input_schema
        found = [payload(await c.call_tool("kb_search", {**args, "level": level})) for level in ("L0", "L1", "L2")]
        read = payload(await c.call_tool("kb_read", {"page": page}))
        bad = await c.call_tool("kb_search", {**args, "level": "L3"})
        return [schema, *found, read, bad]

    schema, l0, l1, l2, read, bad = session(fleet)(body)
    assert schema["properties"]["level"]["enum"] == ["L0", "L1", "L2"]
    assert [h["id"] for h in l0["hits"]] == [h["id"] for h in l1["hits"]] == [h["id"] for h in l2["hits"]]
    assert l0["hits"][0]["id"] == page and [r["level"] for r in (l0, l1, l2)] == ["L0", "L1", "L2"]
    first0, first1, first2 = l0["hits"][0], l1["hits"][0], l2["hits"][0]
    assert set(first0) == set(L0_HIT_FIELDS) and first0["summary"] == "Line 3's airships."
    assert set(first1) == set(L0_HIT_FIELDS) | {"outline"}
    assert first1["outline"] == read["outline"] and {e["anchor"] for e in first1["outline"]} >= {"overview", "routes"}
    assert "outline" not in first2 and "fly 5 routes" in first2["text"] and first2["summary"] == first0["summary"]
    assert "text" not in first0 and "text" not in first1
    assert "validation" in error_text(bad)


def follow(c: Client, args: dict[str, Any]) -> Any:
    async def pages() -> list[dict[str, Any]]:
        out = [payload(await c.call_tool("kb_search", args))]
        while out[-1]["next_cursor"]:
            out.append(payload(await c.call_tool("kb_search", {**args, "cursor": out[-1]["next_cursor"]})))
            assert len(out) < 20
        return out

    return pages()


@pytest.mark.parametrize("include_evidence", [False, True])
def test_cursor_pages_without_overlap_and_ends(fleet: Repo, include_evidence: bool) -> None:
    args = {"query": "airships visa", "mode": "bm25", "include_evidence": include_evidence}

    async def body(c: Client) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return payload(await c.call_tool("kb_search", {**args, "k": 50})), await follow(c, {**args, "k": 3})

    whole, pages = session(fleet)(body)

    def keys(hits: list[dict[str, Any]], kind: str) -> list[str]:
        return [h["chunk"] for h in hits if h["kind"] == kind]

    found = len(keys(whole["hits"], "page"))
    assert whole["next_cursor"] is None and found > AIRSHIPS  # the airship lines and the visa pages
    assert len(pages) == -(-found // 3) and pages[-1]["next_cursor"] is None
    assert all(p["commit"] == whole["commit"] for p in pages)
    for kind in ("page", "evidence"):
        paged = [key for p in pages for key in keys(p["hits"], kind)]
        assert paged == keys(whole["hits"], kind) and len(set(paged)) == len(paged)
        assert all(len(keys(p["hits"], kind)) <= 3 for p in pages)
    assert bool(keys(whole["hits"], "evidence")) == include_evidence


def test_bad_cursors_are_refused_with_one_line(tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    commit(repo, airship_pages(), "pages: airships")
    build_index(repo)
    args = {"query": "airships", "k": 2, "mode": "bm25"}
    first = session(repo)(lambda c: c.call_tool("kb_search", args))
    cursor = payload(first)["next_cursor"]
    assert cursor
    later = commit(repo, {"knowledge/air/line-0.md": None}, "drop line 0")

    async def body(c: Client) -> list[Any]:
        return [
            await c.call_tool("kb_search", {**args, "cursor": "not-a-cursor"}),
            await c.call_tool("kb_search", {**args, "cursor": cursor[:-4]}),
            await c.call_tool("kb_search", {**args, "query": "airship routes", "cursor": cursor}),
            await c.call_tool("kb_search", {**args, "mode": "hybrid", "cursor": cursor}),
            await c.call_tool("kb_search", {**args, "cursor": cursor, "commit": later}),
            await c.call_tool("kb_search", {**args, "cursor": cursor}),
        ]

    *refused, same = session(repo)(body)
    texts = [error_text(r) for r in refused]
    assert all(t.count("\n") == 1 and "error: " in t and "\nhint: " in t for t in texts), texts
    assert "not a kb_search cursor" in texts[0] and "not a kb_search cursor" in texts[1]
    assert "from another search" in texts[2] and "from another search" in texts[3]
    assert "this cursor is from commit" in texts[4]
    # with no commit named, the cursor's own commit is read: the page removed since is still there
    assert payload(same)["commit"] == payload(first)["commit"] and len(payload(same)["hits"]) == 2


def test_a_cursor_is_bound_to_its_principal(fleet: Repo) -> None:
    args = {"query": "airships", "k": 2, "mode": "bm25"}
    cursor = payload(session(fleet)(lambda c: c.call_tool("kb_search", args)))["next_cursor"]
    other = session(fleet, "user:bob")(lambda c: c.call_tool("kb_search", {**args, "cursor": cursor}))
    assert "from another search" in error_text(other)
