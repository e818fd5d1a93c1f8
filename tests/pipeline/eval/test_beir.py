"""Retrieval evaluation on BEIR-format files: metrics, loading, and a tiny end-to-end run."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.config import Config
from kb.errors import FormatError, UsageError
from pipeline.eval.beir import load_beir, mrr_at, ndcg_at, recall_at, run_eval
from tests.builders import write_beir


def test_metrics() -> None:
    ranked = ["a", "b", "c", "d"]
    relevant = {"b": 1, "d": 1, "z": 1}
    assert recall_at(ranked, relevant, 2) == pytest.approx(1 / 3)
    assert recall_at(ranked, relevant, 4) == pytest.approx(2 / 3)
    assert mrr_at(ranked, relevant, 1) == 0 and mrr_at(ranked, relevant, 10) == 0.5
    assert ndcg_at(["b", "d", "z"], relevant, 3) == pytest.approx(1.0)
    assert ndcg_at(ranked, {"b": 1}, 10) == pytest.approx(1 / 1.5849625, rel=1e-6)


def test_loading_skips_unjudged_queries_and_unknown_documents(tmp_path: Path) -> None:
    data = load_beir(*write_beir(tmp_path))
    assert sorted(data.queries) == ["q1", "q2", "q3"] and data.qrels["q3"] == {"d2": 2}
    (tmp_path / "queries.jsonl").write_text("{not json\n")
    with pytest.raises(FormatError):
        load_beir(tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl", tmp_path / "qrels.tsv")
    with pytest.raises(UsageError):
        load_beir(tmp_path / "nope.jsonl", tmp_path / "queries.jsonl", tmp_path / "qrels.tsv")


def test_end_to_end_three_modes_side_by_side_and_a_rerun_embeds_nothing(tmp_path: Path) -> None:
    files = write_beir(tmp_path / "data")
    reports, info = run_eval(*files, Config(version=1), ks=(1, 3), workdir=tmp_path / "work")
    assert [r.mode for r in reports] == ["hybrid", "bm25", "dense"] and info["queries"] == 3 and info["embedded"] == 5
    for report in reports:
        assert set(report.metrics) == {"ndcg@1", "recall@1", "mrr@1", "ndcg@3", "recall@3", "mrr@3"}
        assert report.metrics["recall@3"] == 1.0, report
    _, again = run_eval(*files, Config(version=1), modes=["bm25"], ks=(10,), workdir=tmp_path / "work")
    assert again["embedded"] == 0
