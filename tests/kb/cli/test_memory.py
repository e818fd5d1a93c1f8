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


def test_a_mistyped_speaker_is_refused_with_the_speakers_found(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    chat = write_chat(
        tmp_path / "chat.json", [("Deborah", "I moved to Lisbon last spring."), ("Jolene", "How do you like it?")], "2025-05-01T10:00:00"
    )
    result = cli("memory", "ingest", "--user", "deb", "--speaker", "Debora", str(chat), "--no-index", cwd=root)
    assert result.code == 2, result.err
    assert "error: no speaker 'Debora' in these sessions; the speakers are Deborah, Jolene" in result.err
    assert "hint: did you mean --speaker 'Deborah'?" in result.err
    assert not (root / "evidence").exists() or not list((root / "evidence").rglob("ev-*.md"))  # nothing stored
    # without --speaker, no speaker is named like the user and none is 'user': say so
    result = cli("memory", "ingest", "--user", "deb", str(chat), "--no-index")
    assert result.code == 2 and "none of the speakers (Deborah, Jolene) is named like the user 'deb'" in result.err
    # the right name (any case) goes through
    result = cli("memory", "ingest", "--user", "deb", "--speaker", "deborah", str(chat), "--no-index")
    assert result.code == 0, result.err
    assert "1 session(s): 1 new" in result.out


def _memory_text(root: Path, user: str) -> str:
    return "\n".join(p.read_text() for p in sorted((root / "users" / user).rglob("*.md")))


def test_reprocess_replaces_the_memory_made_under_the_wrong_speaker(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    chat = write_chat(
        tmp_path / "chat.json",
        [("Deborah", "I moved to Lisbon last spring."), ("Jolene", "I work as a night nurse in Boston.")],
        "2025-05-01T10:00:00",
    )
    wrong = cli("memory", "ingest", "--user", "deb", "--speaker", "Jolene", str(chat), "--no-index", cwd=root)
    assert wrong.code == 0 and "merged as" in wrong.out, wrong.err
    assert "night nurse" in _memory_text(root, "deb")
    evidence = sorted(p.name for p in (root / "evidence").rglob("ev-*.md"))
    # the right speaker alone skips the stored session, and says how to derive it again
    again = cli("memory", "ingest", "--user", "deb", "--speaker", "Deborah", str(chat), "--no-index")
    assert again.code == 0 and "1 already ingested" in again.out and "add --reprocess" in again.out
    assert "night nurse" in _memory_text(root, "deb")
    fixed = cli("memory", "ingest", "--user", "deb", "--speaker", "Deborah", "--reprocess", str(chat), "--no-index")
    assert fixed.code == 0, fixed.err
    assert "1 stored session(s) reprocessed" in fixed.out and "merged as" in fixed.out
    memory = _memory_text(root, "deb")
    assert "night nurse" not in memory and "Lisbon" in memory
    assert sorted(p.name for p in (root / "evidence").rglob("ev-*.md")) == evidence  # the evidence is the same
    assert cli("check").code == 0


def test_reprocess_under_another_speaker_renames_the_memory_pages(cli, tmp_path: Path) -> None:
    """Titles, L0s and the folder index name the speaker of the last derivation, not the first."""
    root = tmp_path / "kb"
    cli("init", str(root))
    chat = write_chat(
        tmp_path / "chat.json",
        [("Deborah", "I moved to Lisbon last spring and my cats love the flat."), ("Jolene", "I work as a night nurse in Boston.")],
        "2025-05-01T10:00:00",
    )
    assert cli("memory", "ingest", "--user", "deb", "--speaker", "Jolene", str(chat), "--no-index", cwd=root).code == 0
    assert "title: Jolene's profile" in (root / "users/deb/profile.md").read_text()
    fixed = cli("memory", "ingest", "--user", "deb", "--speaker", "Deborah", "--reprocess", str(chat), "--no-index")
    assert fixed.code == 0 and "merged as" in fixed.out, fixed.err
    pages = {p.name: p.read_text() for p in sorted((root / "users" / "deb").glob("*.md"))}
    assert "title: Deborah's profile" in pages["profile.md"] and "# Deborah's profile" in pages["profile.md"]
    assert "title: Deborah's memory" in pages["index.md"]
    assert [name for name, text in pages.items() if "Jolene" in text] == [], {n: t for n, t in pages.items() if "Jolene" in t}
    assert cli("check").code == 0
