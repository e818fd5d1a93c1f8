"""``kb eval retrieval`` through the CLI (``kb eval memory`` runs end to end in tests/integration)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.builders import write_beir


def test_eval_cli_json_has_one_object_per_mode(tmp_path: Path, cli) -> None:
    corpus, queries, qrels = write_beir(tmp_path / "data")
    result = cli(
        "eval",
        "retrieval",
        "--corpus",
        str(corpus),
        "--queries",
        str(queries),
        "--qrels",
        str(qrels),
        "--k",
        "1,10",
        "--json",
        "--mode",
        "bm25",
        "--workdir",
        str(tmp_path / "w"),
    )
    lines = [json.loads(line) for line in result.out.splitlines()]
    assert result.code == 0, result.err
    assert [line["mode"] for line in lines] == ["bm25"] and lines[0]["recall@10"] == 1.0
    bad_k = cli("eval", "retrieval", "--corpus", str(corpus), "--queries", str(queries), "--qrels", str(qrels), "--k", "ten")
    assert bad_k.code == 2 and bad_k.err.startswith("error: invalid --k")


def test_eval_inside_a_repository_fills_its_embedding_cache(tmp_path: Path, cli) -> None:
    import sqlite3

    from kb.retrieval.embed_cache import CACHE_FILE
    from tests.builders import make_repo

    repo = make_repo(tmp_path / "kb")
    corpus, queries, qrels = write_beir(tmp_path / "data")
    args = ("eval", "retrieval", "--corpus", str(corpus), "--queries", str(queries), "--qrels", str(qrels), "--mode", "dense", "--json")
    first = cli(*args, cwd=repo.root)
    assert first.code == 0, first.err
    chunks = json.loads(first.out.splitlines()[0])["info"]["chunks"]
    with sqlite3.connect(repo.state_dir / CACHE_FILE) as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == chunks
    # a second run (a fresh temporary index) reads every vector from the cache and scores the same
    second = cli(*args, cwd=repo.root)
    assert second.code == 0 and json.loads(second.out.splitlines()[0])["recall@10"] == json.loads(first.out.splitlines()[0])["recall@10"]
