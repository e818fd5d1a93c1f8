"""Malformed LoCoMo and YAML memory-case files are one clean FormatError naming the file and
what is wrong, from `kb memory ingest` and from `kb eval memory` alike, before any work is
done; never another exception (issue 10, item 9)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.kb.cli.helpers import assert_one_error
from tests.pipeline.eval.test_locomo_eval import SAMPLE


def _broken(change: Any) -> dict[str, Any]:
    sample = copy.deepcopy(SAMPLE)
    change(sample)
    return sample


LOCOMO_CASES = [
    (lambda s: s["conversation"].pop("speaker_b"), "speaker_b"),
    (lambda s: s["conversation"].update(speaker_a=""), "speaker_a"),
    (lambda s: s["conversation"].update(speaker_a=["Rosa"]), "speaker_a"),
    (lambda s: s["conversation"].update(session_1="hello"), "session_1 must be a list of turns"),
    (lambda s: s["conversation"].update(session_1=["hello"]), "session_1 turn 1"),
    (lambda s: s["conversation"]["session_1"][1].pop("speaker"), "session_1 turn 2"),
    (lambda s: s["conversation"]["session_1"][0].update(text={"a": 1}), "session_1 turn 1"),
    (lambda s: s["conversation"].update(session_1_date_time="1:56 pm on 40 May, 2023"), "session_1_date_time"),
    (lambda s: s["conversation"].update(session_1_date_time="99:99 pm on 8 May, 2023"), "session_1_date_time"),
    (lambda s: s["conversation"].update(session_1_date_time=None), "session_1_date_time"),
]
LOCOMO_EVAL_CASES = [
    (lambda s: s.update(conversation=[1, 2]), "not a LoCoMo sample"),
    (lambda s: s.pop("qa"), "qa"),
    (lambda s: s.update(qa="what?"), "qa"),
    (lambda s: s["qa"].append("what?"), "qa 4"),
    (lambda s: s["qa"][0].pop("question"), "qa 1"),
    (lambda s: s["qa"][0].update(category="one"), "qa 1"),
    (lambda s: s["qa"][0].update(evidence="D1:1"), "qa 1"),
    (lambda s: s["qa"][0].update(evidence=[1]), "qa 1"),
]


@pytest.mark.parametrize(("change", "needle"), LOCOMO_CASES)
def test_malformed_locomo_is_refused_by_ingest(cli, tmp_path: Path, change: Any, needle: str) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([_broken(change)]))
    result = cli("memory", "ingest", str(data), "--user", "rosa", "--speaker", "Rosa", cwd=root)
    assert_one_error(result, 5, "locomo.json", needle)


@pytest.mark.parametrize(("change", "needle"), LOCOMO_CASES + LOCOMO_EVAL_CASES)
def test_malformed_locomo_is_refused_by_eval_before_any_work(cli, tmp_path: Path, change: Any, needle: str) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([SAMPLE, _broken(change)]))
    work = tmp_path / "work"
    result = cli("eval", "memory", "--locomo", str(data), "--workdir", str(work), cwd=tmp_path)
    assert_one_error(result, 5, "locomo.json", needle)
    assert not (work / "locomo").exists()  # refused before a repository was made


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[1, 2]", "not a LoCoMo file"),
        ('"just text"', "not a LoCoMo file"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ("{", "not valid JSON"),
    ],
)
def test_locomo_files_that_are_not_samples(cli, tmp_path: Path, text: str, needle: str) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(text)
    assert_one_error(cli("eval", "memory", "--locomo", str(data), "--workdir", str(tmp_path / "w"), cwd=tmp_path), 5, needle)


GOOD_CASE = """\
user_question: Which car should I service first?
evaluation_criteria: The older car.
conversation_histories:
  - conversation_id: c1
    timestamp: 2024-11-15 10:30:00
    messages:
      - {role: user, content: I own two cars.}
"""
CASES = [
    ("conversation_histories: 3\nuser_question: q\nevaluation_criteria: c\n", "conversation_histories must be a list"),
    ("conversation_histories: {a: 1}\nuser_question: q\nevaluation_criteria: c\n", "conversation_histories must be a list"),
    ("conversation_histories: [hello]\nuser_question: q\nevaluation_criteria: c\n", "conversation 1"),
    (GOOD_CASE.replace("timestamp: 2024-11-15 10:30:00", "timestamp: '2025-13-40'"), "timestamp"),
    (GOOD_CASE.replace("timestamp: 2024-11-15 10:30:00", "timestamp: 2025-13-40"), "impossible value"),
    (GOOD_CASE.replace("      - {role: user, content: I own two cars.}", "      - just a string"), "message 1"),
    (GOOD_CASE.replace("    messages:\n", "    messages: 7\n").replace("      - {role: user, content: I own two cars.}\n", ""), "messages"),
    ("- 1\n- 2\n", "conversation_histories"),
    ("a: [\n", "malformed YAML"),
]
CASE_EVAL_ONLY = [
    (GOOD_CASE.replace("user_question: Which car should I service first?\n", ""), "user_question"),
    (GOOD_CASE.replace("evaluation_criteria: The older car.", "evaluation_criteria: [a, b]"), "evaluation_criteria"),
]


@pytest.mark.parametrize(("text", "needle"), CASES)
def test_malformed_case_files_are_refused_by_ingest(cli, tmp_path: Path, text: str, needle: str) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    case = tmp_path / "case.yaml"
    case.write_text(text)
    assert_one_error(cli("memory", "ingest", str(case), "--user", "william", cwd=root), 5, "case.yaml", needle)


@pytest.mark.parametrize(("text", "needle"), CASES + CASE_EVAL_ONLY)
def test_malformed_case_files_are_refused_by_eval_before_any_work(cli, tmp_path: Path, text: str, needle: str) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "a-good.yaml").write_text(GOOD_CASE)
    (folder / "b-bad.yaml").write_text(text)
    work = tmp_path / "work"
    result = cli("eval", "memory", "--cases", str(folder), "--workdir", str(work), cwd=tmp_path)
    assert_one_error(result, 5, "b-bad.yaml", needle)
    assert not (work / "cases").exists()


def test_tool_calls_of_the_wrong_shape_are_not_a_crash() -> None:
    from kb.intake import message_from_dict

    assert message_from_dict({"role": "assistant", "tool_calls": [{"function": "x"}, 3]}, "m").text == ""
    assert message_from_dict({"role": "assistant", "tool_calls": 7}, "m").text == ""
