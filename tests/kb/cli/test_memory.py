"""``kb memory ingest`` through the CLI: bad input, and sessions without timestamps."""

from __future__ import annotations

import os
from pathlib import Path

from tests.builders import write_chat


def test_memory_bad_input(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    unknown = tmp_path / "notes.csv"
    unknown.write_text("a,b\n")
    result = cli("memory", "ingest", "--user", "dana", str(unknown), "--no-index", cwd=root)
    assert result.code == 5 and "unknown session format" in result.err and "Traceback" not in result.err
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    result = cli("memory", "ingest", "--user", "dana", str(empty), "--no-index")
    assert result.code == 5 and "empty" in result.err
    result = cli("memory", "ingest", "--user", "../dana", str(empty), "--no-index")
    assert result.code == 2 and "invalid user id" in result.err
    untimed = write_chat(tmp_path / "untimed.json", [("user", "I live in Porto and I prefer window seats.")], None)
    os.utime(untimed, (1_700_000_000, 1_700_000_000))
    result = cli("memory", "ingest", "--user", "dana", str(untimed), "--no-index")
    assert result.code == 0, result.err
    assert "warning: untimed.json: messages have no timestamps; using the file's time 2023-11-14T22:13:20" in result.err
    stored = next((root / "evidence").rglob("ev-*.md")).read_text()
    assert stored.startswith("[2023-11-14T22:13:20] user: I live in Porto")
