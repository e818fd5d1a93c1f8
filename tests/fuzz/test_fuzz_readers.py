"""Fuzz the readers of material from outside: evidence intake (``prepare``,
``prepare_messages``), session files (``read_sessions``), the evaluation's LoCoMo and case
loaders and the config loader. Every input is read or refused with a KbError; nothing else
escapes."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from kb.config import parse_config
from kb.intake import KINDS, Message, prepare, prepare_messages
from kb.sessions import read_sessions
from pipeline.eval.inputs import load_case, load_locomo
from tests.fuzz.strategies import json_text, json_values, only_kb_errors, text, words, yaml_like
from tests.pipeline.eval.test_locomo_eval import SAMPLE

SUFFIXES = st.sampled_from([".json", ".jsonl", ".md", ".txt", ".yaml", ""])
message_dicts = st.dictionaries(
    st.sampled_from(["role", "speaker", "name", "content", "text", "timestamp", "time", "id", "tool_calls", "dia_id"]),
    json_values,
    max_size=6,
)
chats = st.one_of(
    json_text(),
    st.lists(message_dicts, max_size=4).map(json.dumps),
    st.lists(message_dicts, min_size=1, max_size=4).map(lambda ms: "\n".join(json.dumps(m) for m in ms)),
    st.dictionaries(st.just("messages"), st.lists(message_dicts, max_size=3)).map(json.dumps),
)


def _write(folder: str, name: str, data: bytes) -> Path:
    path = Path(folder) / name
    path.write_bytes(data)
    return path


@given(st.one_of(st.binary(max_size=300), chats.map(str.encode), text.map(str.encode)), SUFFIXES, st.sampled_from(KINDS))
def test_prepare_reads_or_refuses_any_bytes(data: bytes, suffix: str, kind: str) -> None:
    only_kb_errors(lambda: prepare(data, f"input{suffix}", kind, "system"))


@given(st.lists(st.builds(Message, words, st.text(max_size=80), st.none() | words, st.none() | words), max_size=4))
def test_prepare_messages_reads_or_refuses_any_messages(messages: list[Message]) -> None:
    only_kb_errors(lambda: prepare_messages(messages, "chat.json#1", "user:alice"))


cases = st.one_of(
    yaml_like,
    st.fixed_dictionaries(
        {
            "conversation_histories": st.one_of(
                json_values,
                st.lists(
                    st.dictionaries(
                        words | st.sampled_from(["timestamp", "messages"]), json_values | st.lists(message_dicts, max_size=3), max_size=4
                    ),
                    max_size=3,
                ),
            )
        },
        optional={"user_question": json_values, "evaluation_criteria": json_values},
    ).map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
)


def _mutated_locomo(draw: st.DrawFn) -> Any:
    """The test's LoCoMo sample with one to three places replaced by arbitrary values."""
    sample = copy.deepcopy(SAMPLE)
    for _ in range(draw(st.integers(1, 3))):
        node: Any = sample
        path = []
        while isinstance(node, dict | list) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else list(range(len(node)))))
            path.append((node, key))
            node = node[key]
        if path:
            parent, key = path[-1]
            parent[key] = draw(json_values)
    return [sample]


locomo = st.one_of(json_text(), st.composite(_mutated_locomo)().map(json.dumps))


@given(st.one_of(chats, cases, locomo, text), st.sampled_from([".json", ".jsonl", ".yaml", ".yml"]))
def test_session_files_are_read_or_refused(content: str, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(folder, f"sessions{suffix}", content.encode())
        only_kb_errors(lambda: read_sessions(path))
        only_kb_errors(lambda: read_sessions(path, sample="0"))


@given(locomo)
def test_locomo_files_are_loaded_or_refused(content: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        only_kb_errors(lambda: load_locomo(_write(folder, "locomo.json", content.encode())))


@given(cases)
def test_case_files_are_loaded_or_refused(content: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        only_kb_errors(lambda: load_case(_write(folder, "case.yaml", content.encode())))


config_dicts = st.fixed_dictionaries(
    {"version": st.one_of(st.just(1), json_values)},
    optional={
        section: st.one_of(json_values, st.dictionaries(words | st.sampled_from(keys), json_values, max_size=4))
        for section, keys in {
            "budgets": ["l0_tokens", "l1_tokens"],
            "retrieval": ["chunk_tokens", "chunk_overlap", "embedder", "rrf_k", "candidates"],
            "models": ["proposer", "reviewer", "judge", "allow_same_family"],
            "loop": ["max_rounds", "max_tokens", "max_cost_usd"],
            "secrets": ["allow"],
            "name": ["kb"],
        }.items()
    },
)


@given(st.one_of(yaml_like, text, config_dicts.map(lambda d: yaml.safe_dump(d, allow_unicode=True))))
def test_any_config_text_is_a_config_or_a_config_error(content: str) -> None:
    only_kb_errors(lambda: parse_config(content))
