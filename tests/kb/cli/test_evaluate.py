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
