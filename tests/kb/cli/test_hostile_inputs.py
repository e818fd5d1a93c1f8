"""Hostile inputs through the real CLI (issue 10, low items): special files as evidence or
sessions are refused at once with one line, never read (a FIFO would hang, /dev/zero would
never end); inputs over the size bound are refused without being read whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kb.evidence import load_ledger
from tests.kb.cli.helpers import assert_one_error


@pytest.fixture
def repo_root(cli, tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    return root


def test_a_fifo_is_refused_without_waiting_for_a_writer(cli, repo_root: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "chat.json"
    os.mkfifo(fifo)
    for args in (("evidence", "add", str(fifo)), ("memory", "ingest", str(fifo), "--user", "alice")):
        result = cli(*args, cwd=repo_root)
        assert_one_error(result, 2, str(fifo), "is a FIFO, not a regular file")
    assert load_ledger(repo_root) == []


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_character_device_is_refused(cli, repo_root: Path, device: str) -> None:
    result = cli("evidence", "add", device, cwd=repo_root)
    assert_one_error(result, 2, device, "is a character device, not a regular file")
    assert load_ledger(repo_root) == []


def test_an_input_over_the_size_bound_is_refused(cli, repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kb.intake

    monkeypatch.setattr(kb.intake, "MAX_INPUT_BYTES", 1000)
    big = tmp_path / "big.md"
    big.write_text("word " * 1000, encoding="utf-8")
    result = cli("evidence", "add", str(big), cwd=repo_root)
    assert_one_error(result, 5, str(big), "over the limit of 1,000 bytes")
    assert load_ledger(repo_root) == []


@pytest.mark.parametrize(
    ("name", "text", "args"),
    [
        ("deep.json", "[" * 100_000 + "]" * 100_000, ("--kind", "conversation")),
        ("deep.json", '{"a":' * 100_000 + "1" + "}" * 100_000, ("--kind", "tool-output")),
        ("shallow-enough.json", "[" * 600 + "]" * 600, ("--kind", "tool-output")),  # parses, deep for the printer
        ("deep.jsonl", "[" * 100_000 + "\n{}\n", ("--kind", "conversation")),
    ],
)
def test_deeply_nested_json_evidence_is_a_format_error(cli, repo_root: Path, tmp_path: Path, name: str, text: str, args) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = cli("evidence", "add", str(path), *args, cwd=repo_root)
    assert_one_error(result, 5, "nested too deeply")
    assert load_ledger(repo_root) == []


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_deeply_nested_json_sessions_are_a_format_error(cli, repo_root: Path, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text('{"conversation": ' * 50_000 + "1" + "}" * 50_000, encoding="utf-8")
    result = cli("memory", "ingest", str(path), "--user", "alice", cwd=repo_root)
    assert_one_error(result, 5, "nested too deeply")
    assert load_ledger(repo_root) == []
