"""Generators shared by the fuzz tests: text that looks like the inputs kb reads (YAML, JSON,
chat messages, LoCoMo samples, page headers), so that examples reach past the first parse."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import strategies as st

from kb.errors import KbError

T = TypeVar("T")

# Unicode text including line separators, controls and surrogate-free astral characters.
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
tricky_words = st.sampled_from(
    [
        "no",
        "yes",
        "on",
        "null",
        "~",
        "0x10",
        "1e3",
        "1_0",
        "12:30",
        ".inf",
        ".nan",
        "2025-13-40",
        "2025-01-10",
        "2025-01-10T10:00:00Z",
        "2025-01-10 10:00:00.5",
        "*a",
        "&a",
        "!!python/object",
        "!!binary",
        "<<",
        "? k",
        "- x",
        "#c",
        "'",
        '"',
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "|",
        ">",
        "\t",
        "\u2028",
        "\x85",
        "\ufeff",
        "\x00",
    ]
)
words = st.one_of(text, tricky_words)

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False, allow_infinity=False), words
)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(words, inner, max_size=4), max_leaves=20
)

yaml_tokens = st.sampled_from(
    [
        "\n",
        "\n  ",
        "\n- ",
        ": ",
        "- ",
        "[",
        "]",
        "{",
        "}",
        ", ",
        "&a ",
        "*a",
        "!!str ",
        "!!int ",
        "!!timestamp ",
        "!!python/name:os.system ",
        "? ",
        "|\n  ",
        ">-\n  ",
        "'",
        '"',
        "#",
        "---\n",
        "...\n",
        "%YAML 1.1\n",
        "version",
        "1",
        "2025-13-40",
        "budgets",
        "l0_tokens",
        "retrieval",
        "models",
        "proposer",
        "model",
        "options",
        "secrets",
        "allow",
        "conversation_histories",
        "timestamp",
        "messages",
        "role",
        "content",
        "user_question",
        "evaluation_criteria",
        "id",
        "title",
        "tags",
        "sources",
    ]
)
yaml_like = st.lists(st.one_of(yaml_tokens, words), max_size=40).map("".join)


def json_text(values: st.SearchStrategy[Any] = json_values) -> st.SearchStrategy[str]:
    return values.map(lambda v: json.dumps(v, ensure_ascii=False))


def only_kb_errors(call: Callable[[], T]) -> T | None:
    """Run ``call``: a KbError is an answer (bad input, said clearly); anything else escapes and
    fails the test."""
    try:
        return call()
    except KbError:
        return None
