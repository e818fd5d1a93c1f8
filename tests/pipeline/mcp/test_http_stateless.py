"""Two ``kb mcp --http`` processes over one repository answer the same ``kb_search`` calls
identically, and a cursor one of them returned is taken by the other (requests are stateless)."""

from __future__ import annotations

from pathlib import Path

from kb.retrieval.build import build_index
from tests.builders import commit, make_sample_repo
from tests.pipeline.mcp.test_search_levels_and_cursors import airship_pages
from tests.pipeline.mcp.test_server import payload
from tests.pipeline.mcp.test_transports import TOKENS, over_http, serving


def test_two_http_servers_answer_the_same_search_alike(tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    commit(repo, airship_pages(), "pages: airships")
    build_index(repo)
    calls = [
        ("kb_search", {"query": "airships and visas", "k": 3}),
        ("kb_search", {"query": "which seat do I like", "include_evidence": True, "level": "L1"}),
        ("kb_search", {"query": "airship routes", "k": 2, "mode": "bm25", "level": "L0"}),
    ]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with serving(repo, tmp_path / "a") as one, serving(repo, tmp_path / "b") as two:
        assert one != two
        first = over_http(one, TOKENS["alice"], calls)
        second = over_http(two, TOKENS["alice"], calls)
        texts = [r.content[0].text for r in first]
        assert texts == [r.content[0].text for r in second]
        cursor = payload(first[0])["next_cursor"]
        assert cursor and [payload(r)["hits"] for r in first].count([]) == 0
        onward = ("kb_search", {"query": "airships and visas", "k": 3, "cursor": cursor})
        from_one, from_two = over_http(one, TOKENS["alice"], [onward])[0], over_http(two, TOKENS["alice"], [onward])[0]
    assert from_one.content[0].text == from_two.content[0].text
    ahead = payload(from_two)
    assert ahead["hits"] and not {h["id"] for h in ahead["hits"]} & {h["id"] for h in payload(first[0])["hits"]}
    assert "users/alice/preferences" in texts[1]  # alice's token reads her page on both servers
