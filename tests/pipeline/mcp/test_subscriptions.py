"""Subscribers are told when a new commit is served (``subscriptions/listen`` through the SDK's
in-memory and stdio clients), only about pages they may read, and no longer once they leave."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from kb.repo import Repo
from kb.retrieval.build import build_index
from pipeline.mcp.server import ServerOptions, build_server
from pipeline.mcp.subscriptions import OVERVIEW_URI, ServedBus, changed_pages, events_for
from tests.builders import commit, make_sample_repo, page_text

VISAS, HERS = "kb://page/knowledge/travel/visas", "kb://page/users/alice/preferences"


def edit_visas(repo: Repo, text: str) -> None:
    body = f"# Visas\n\n## Overview\n\n{text}\n\n## Rules\n\n{text}\n"
    commit(repo, {"knowledge/travel/visas.md": page_text("knowledge/travel/visas", "Visas", text, "system", body)}, "visas")


def edit_hers(repo: Repo, text: str) -> None:
    body = f"# Preferences\n\n## Overview\n\n{text}\n\n## Seats\n\n{text}\n"
    page = page_text("users/alice/preferences", "Preferences", text, "user:alice", body)
    commit(repo, {"users/alice/preferences.md": page}, "alice")


class Raw:
    """Every message the client receives, as JSON text (the raw frames of the listen stream)."""

    def __init__(self) -> None:
        self.frames: list[str] = []

    async def __call__(self, message: Any) -> None:
        dump = getattr(message, "model_dump_json", None)
        self.frames.append(dump() if dump else repr(message))


async def next_events(sub: Any, seconds: float) -> list[Any]:
    """Events that arrive within ``seconds`` of quiet after the first (or none at all)."""
    events: list[Any] = []
    with anyio.move_on_after(seconds):
        async for event in sub:
            events.append(event)
    return events


def test_a_subscriber_hears_of_a_new_commit_and_not_after_leaving(tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    build_index(repo)
    raw = Raw()

    async def main() -> tuple[list[Any], list[Any], int, int]:
        server = build_server(repo, ServerOptions(principal="user:bob"))
        async with Client(server, message_handler=raw) as client:
            uris = [VISAS, f"{VISAS}/l0", HERS, f"{HERS}/l0", OVERVIEW_URI]
            async with client.listen(resource_subscriptions=uris, resources_list_changed=True) as sub:
                assert set(sub.honored.resource_subscriptions or ()) == set(uris)
                edit_visas(repo, "Visas take ten days now.")
                build_index(repo)
                first = await next_events(sub, 3.0)
                edit_hers(repo, "Prefers aisle seats now.")  # alice's page: bob hears nothing
                hers = await next_events(sub, 2.0)
            frames = len(raw.frames)
            edit_visas(repo, "Visas take twelve days now.")  # after leaving the stream: no frame
            await anyio.sleep(2.0)
            later = len(raw.frames)
            result = await client.read_resource(VISAS)
            assert "twelve days" in result.contents[0].text  # type: ignore[union-attr]
            return first, hers, frames, later

    first, hers, frames, later = asyncio.run(main())
    uris = {e.uri for e in first if isinstance(e, ResourceUpdated)}
    assert uris == {VISAS, f"{VISAS}/l0", OVERVIEW_URI}
    assert not any(isinstance(e, ResourcesListChanged) for e in first)  # a page changed, none was added
    assert hers == [] and later == frames
    text = "\n".join(raw.frames)
    assert VISAS in text  # the raw frames are seen: the next line is not vacuous
    assert "users/alice" not in text and "aisle" not in text


def test_a_new_page_is_a_list_change_and_updates_the_overview(tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")

    async def main() -> list[Any]:
        async with Client(build_server(repo, ServerOptions(principal="system"))) as client:
            async with client.listen(resource_subscriptions=[OVERVIEW_URI], resources_list_changed=True) as sub:
                body = "# Hangars\n\n## Overview\n\nZeppelin hangars.\n\n## Size\n\nHuge.\n"
                page = page_text("knowledge/hangars", "Hangars", "Zeppelin hangars.", "system", body)
                commit(repo, {"knowledge/hangars.md": page}, "hangars")
                events = await next_events(sub, 3.0)
                overview = await client.read_resource(OVERVIEW_URI)
                return [*events, overview.contents[0].text]  # type: ignore[union-attr]

    *events, overview = asyncio.run(main())
    assert ResourceUpdated(uri=OVERVIEW_URI) in events and ResourcesListChanged() in events
    assert "knowledge/hangars" in overview and str(repo.head().id) in overview  # type: ignore[union-attr]


def test_each_principal_hears_only_of_its_own_pages(tmp_path: Path) -> None:
    """The bus scopes per stream: alice hears of her page, bob and a stream without a principal
    do not (unit level: the bus's fan-out without a transport)."""
    repo, _ = make_sample_repo(tmp_path / "r")
    before = str(repo.head().id)  # type: ignore[union-attr]
    edit_hers(repo, "Prefers aisle seats now.")
    changes = changed_pages(repo, before, str(repo.head().id))  # type: ignore[union-attr]
    assert [(c.page, c.scope, c.kind) for c in changes] == [("users/alice/preferences", "user:alice", "modified")]
    assert events_for(changes, ("system", "user:bob")) == []
    assert ResourceUpdated(uri=HERS) in events_for(changes, ("system", "user:alice"))

    heard: dict[str, list[Any]] = {"alice": [], "bob": [], "nobody": []}
    principals = iter(["user:alice", "user:bob", None])

    async def main() -> None:
        bus = ServedBus(repo, lambda: next(principals), interval=3600)
        leave = [bus.subscribe(heard[name].append) for name in ("alice", "bob", "nobody")]
        edit_hers(repo, "Prefers the front row.")
        bus.check()
        for unsubscribe in leave:
            unsubscribe()

    asyncio.run(main())
    assert ResourceUpdated(uri=HERS) in heard["alice"] and heard["bob"] == [] and heard["nobody"] == []


def test_stdio_subscriber_is_told_of_a_new_commit(tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    command = [sys.executable, "-m", "kb", "--repo", str(repo.root), "mcp", "--as", "user:alice"]
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))

    async def main() -> list[Any]:
        async with Client(params) as client:
            async with client.listen(resource_subscriptions=[HERS, VISAS]) as sub:
                edit_hers(repo, "Prefers aisle seats now.")
                return await next_events(sub, 4.0)

    events = asyncio.run(main())
    assert {e.uri for e in events} == {HERS}
