"""``kb mcp`` as a real process: stdio with the SDK's stdio client, and Streamable HTTP on loopback
with bearer tokens for two users and an admin (scopes, no cross-user leak, concurrent calls)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from kb.repo import Repo
from kb.retrieval.build import build_index
from pipeline.mcp.auth import token_digest
from tests.builders import make_sample_repo
from tests.pipeline.mcp.test_server import error_text, payload


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict[str, str]]:
    repo, ids = make_sample_repo(tmp_path_factory.mktemp("mcp-proc") / "r")
    build_index(repo)
    return repo, ids


def kb_command(repo: Repo, *args: str) -> list[str]:
    return [sys.executable, "-m", "kb", "--repo", str(repo.root), *args]


def test_stdio_server_with_the_sdk_stdio_client(sample: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample
    command = kb_command(repo, "mcp", "--as", "user:alice")
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))

    async def main() -> tuple[set[str], dict[str, Any]]:
        async with Client(params) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            return tools, payload(await client.call_tool("kb_search", {"query": "window seats", "k": 2}))

    tools, found = asyncio.run(main())
    assert "kb_search" in tools and "kb_remember" not in tools
    assert found["hits"][0]["id"] == "users/alice/preferences"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789", "admin": "tok-admin-0123456789"}


@pytest.fixture(scope="module")
def http_server(sample: tuple[Repo, dict[str, str]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(sample[0], tmp_path_factory.mktemp("tokens")) as url:
        yield url


@contextmanager
def serving(repo: Repo, folder: Path) -> Iterator[str]:
    """``kb mcp --http --writes`` over ``repo`` on a free loopback port, with the three tokens."""
    grants = [
        {"name": "alice", "sha256": token_digest(TOKENS["alice"]), "principal": "user:alice", "scopes": ["kb:read"]},
        {"name": "bob", "sha256": token_digest(TOKENS["bob"]), "principal": "user:bob", "scopes": ["kb:read", "kb:remember"]},
        {"name": "admin", "sha256": token_digest(TOKENS["admin"]), "principal": "system", "scopes": ["kb:read"]},
    ]
    tokens = folder / "tokens.yaml"
    tokens.write_text(json.dumps({"tokens": grants}), encoding="utf-8")  # JSON is YAML
    port = free_port()
    log = (folder / "server.log").open("w")
    proc = subprocess.Popen(kb_command(repo, "mcp", "--http", "--port", str(port), "--tokens", str(tokens), "--writes"), stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None, (folder / "server.log").read_text()
            time.sleep(0.2)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def over_http(url: str, token: str | None, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def main() -> list[Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return [await client.call_tool(name, args) for name, args in calls]

    return asyncio.run(main())


def test_http_tokens_decide_the_principal_and_nothing_leaks(http_server: str, sample: tuple[Repo, dict[str, str]]) -> None:
    _, ids = sample
    calls = [
        ("kb_search", {"query": "which seat do I like", "include_evidence": True}),
        ("kb_read", {"page": "users/alice/preferences", "level": "L2"}),
        ("kb_evidence", {"reference": ids["chat"]}),
        ("kb_grep", {"pattern": "seat"}),
        ("kb_overview", {}),
    ]
    alice = over_http(http_server, TOKENS["alice"], calls)
    assert payload(alice[0])["hits"][0]["id"] == "users/alice/preferences"
    assert "window seats" in payload(alice[1])["text"]
    for who in ("bob", "admin"):
        results = over_http(http_server, TOKENS[who], calls)
        raw = "\n".join(r.model_dump_json() for r in results)
        for word in ("window seats", "Vegetarian", "user:alice", "Alice prefers"):
            assert word not in raw, (who, word)
        assert "no page 'users/alice/preferences'" in error_text(results[1])


def test_http_scopes_and_bad_tokens(http_server: str) -> None:
    denied = over_http(http_server, TOKENS["alice"], [("kb_remember", {"content": "[2025-01-01T00:00:00Z] user: hi there"})])
    assert "needs the kb:remember scope" in error_text(denied[0])
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers in ({"Authorization": "Bearer not-a-token"}, {}):
        answer = httpx2.post(http_server, json=initialize, headers={"Accept": "application/json, text/event-stream", **headers})
        assert answer.status_code == 401 and "Bearer" in answer.headers.get("www-authenticate", "")
        assert "window" not in answer.text and "alice" not in answer.text


def test_http_twenty_concurrent_calls_all_answered(http_server: str) -> None:
    async def one(n: int) -> str:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=120) as http:
            async with Client(streamable_http_client(http_server, http_client=http)) as client:
                query = "window seats" if n % 2 else "visa days"
                result = payload(await client.call_tool("kb_search", {"query": query, "k": 1, "mode": "bm25"}))
                return str(result["hits"][0]["id"])

    async def main() -> list[str]:
        return list(await asyncio.gather(*(one(n) for n in range(20))))

    answers = asyncio.run(main())
    assert answers == ["knowledge/travel/visas" if n % 2 == 0 else "users/alice/preferences" for n in range(20)]


class Tee(httpx2.AsyncBaseTransport):
    """A transport that keeps every response byte the client receives (the raw SSE frames)."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.received = bytearray()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        tee = self

        class Stream(httpx2.AsyncByteStream):
            async def __aiter__(self) -> Any:
                async for chunk in response.stream:  # type: ignore[union-attr]
                    tee.received.extend(chunk)
                    yield chunk

            async def aclose(self) -> None:
                await response.aclose()

        return httpx2.Response(response.status_code, headers=response.headers, stream=Stream(), extensions=response.extensions)


def test_http_listen_streams_are_bound_to_the_token(tmp_path: Path) -> None:
    """Over HTTP each listen stream hears as its token's principal: alice is told of her page's new
    commit; bob, naming the same URI, gets no frame about it (asserted on his raw messages)."""
    from tests.pipeline.mcp.test_subscriptions import HERS, edit_hers, next_events

    repo, _ = make_sample_repo(tmp_path / "r")

    async def listen(url: str, token: str, raw: Tee, started: asyncio.Event) -> list[Any]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60, transport=raw) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                async with client.listen(resource_subscriptions=[HERS]) as sub:
                    started.set()
                    return await next_events(sub, 4.0)

    alice_raw = Tee()

    async def main(url: str) -> tuple[list[Any], list[Any], Tee]:
        ready = [asyncio.Event(), asyncio.Event()]
        bob_raw = Tee()
        alice = asyncio.create_task(listen(url, TOKENS["alice"], alice_raw, ready[0]))
        bob = asyncio.create_task(listen(url, TOKENS["bob"], bob_raw, ready[1]))
        await asyncio.gather(*(e.wait() for e in ready))
        edit_hers(repo, "Prefers aisle seats now.")
        return await alice, await bob, bob_raw

    (tmp_path / "tokens").mkdir()
    with serving(repo, tmp_path / "tokens") as url:
        hers, bobs, bob_raw = asyncio.run(main(url))
    assert {e.uri for e in hers} == {HERS}
    assert b"notifications/resources/updated" in bytes(alice_raw.received)  # the tee sees such frames
    raw = bytes(bob_raw.received)
    assert b"notifications/subscriptions/acknowledged" in raw  # his stream was open and read
    assert bobs == [] and b"notifications/resources/updated" not in raw and b"aisle" not in raw
