"""The input files of `kb eval memory`, read and checked whole before any work starts: a LoCoMo
JSON file (samples with a conversation and QA items) and YAML memory cases (a question, its
evaluation criteria and the conversations). Anything malformed is one ``FormatError`` naming the
file and what is wrong, never a ``KeyError`` an hour into an evaluation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kb.errors import FormatError
from kb.intake import load_json, read_input
from kb.sessions import FORMATS_HINT, MAX_CASE_BYTES, locomo_sessions, read_sessions
from kb.yamltext import YamlProblem, load_yaml


def _text(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{name}: not UTF-8 text (byte {exc.start})", hint="convert the file to UTF-8") from None


def _check_qa(qa: Any, where: str) -> None:
    if not isinstance(qa, list):
        raise FormatError(f"{where}: `qa` must be a list of questions", hint=FORMATS_HINT)
    for n, item in enumerate(qa, 1):
        problem = (
            "must be an object with question, category and evidence"
            if not isinstance(item, dict)
            else "needs a `question` text"
            if not isinstance(item.get("question"), str)
            else "needs an integer `category`"
            if isinstance(item.get("category"), bool) or not str(item.get("category", "")).strip().isdigit()
            else "`evidence` must be a list of turn ids such as D1:3"
            if not isinstance(item.get("evidence") or [], list) or not all(isinstance(e, str) for e in item.get("evidence") or [])
            else None
        )
        if problem:
            raise FormatError(f"{where}: qa {n} {problem}", hint=FORMATS_HINT)


def load_locomo(path: Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo file, each checked (conversation, sessions, dates, QA items)."""
    name = str(path)
    data = load_json(_text(read_input(path), name), name)
    samples = data if isinstance(data, list) else [data]
    if not any(isinstance(s, dict) and "conversation" in s for s in samples):
        raise FormatError(f"{name}: not a LoCoMo file (a list of samples with `conversation` and `qa`)", hint=FORMATS_HINT)
    for n, sample in enumerate(samples, 1):
        where = f"{name}: sample {n}"
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise FormatError(f"{where}: not a LoCoMo sample (no `conversation` object)", hint=FORMATS_HINT)
        locomo_sessions(sample, where)
        if "qa" not in sample:
            raise FormatError(f"{where}: no `qa` list", hint=FORMATS_HINT)
        _check_qa(sample["qa"], where)
    return samples


def load_case(path: Path) -> dict[str, Any]:
    """A memory case, checked: its conversations (as `kb memory ingest` reads them), a
    `user_question` and `evaluation_criteria`, both text."""
    read_sessions(path)
    try:
        data = load_yaml(_text(read_input(path), path.name), MAX_CASE_BYTES)
    except YamlProblem as exc:
        raise FormatError(exc.message, hint="fix the YAML of the case file", path=str(path), line=exc.line) from None
    for key in ("user_question", "evaluation_criteria"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise FormatError(f"{path}: `{key}` must be text", hint=FORMATS_HINT)
    return data
