"""End to end: a card number masked at ``kb memory ingest`` never reaches the evidence file,
pages, any git object, the index or the memory context; a phone number (``no-copy``) stays in
the evidence but reaches neither pages nor the memory context."""

from __future__ import annotations

import json
from pathlib import Path

from kb.forgotten import fingerprint
from kb.repo import Repo
from pipeline.forget import scan
from tests.builders import write_chat

CARD = "4111 1111 1111 1111"
PHONE = "+44 20 7946 0958"


def test_masked_card_and_no_copy_phone_through_ingest_pages_index_and_context(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    chat = write_chat(
        tmp_path / "chat.json",
        [
            ("user", f"My card number is {CARD} and I use it for flights."),
            ("assistant", "Thanks, noted."),
            ("user", f"You can reach me on {PHONE} any evening after work."),
            ("user", "I live in Porto and I prefer window seats on long flights."),
        ],
        "2025-03-01T10:00:00",
    )
    result = cli("memory", "ingest", "--user", "alice", str(chat), cwd=root)
    assert result.code == 0, result.err
    repo = Repo(root)

    stored = next((root / "evidence").rglob("ev-*.md")).read_text(encoding="utf-8")
    assert "user: My card number is [CARD-1] and I use it for flights." in stored
    assert PHONE in stored  # no-copy: kept in the evidence
    ledger = [json.loads(line) for line in (root / "evidence" / "ledger.jsonl").read_text().splitlines()]
    assert [e["meta"].get("masked") for e in ledger if e.get("kind") == "conversation"] == [{"card": 1}]

    pages = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in (root / "users" / "alice").rglob("*.md")}
    assert any("Porto" in text for text in pages.values()), pages  # the ordinary statement became memory
    leaked = [line for text in pages.values() for line in text.splitlines() if "7946" in line or "4111" in line or "[CARD-1]" in line]
    assert leaked == []

    # every git object (reachable or not) and every file under .kb/ (the index included)
    card_prints = fingerprint(b"k" * 32, [f"My card number is {CARD}", CARD.replace(" ", "")])
    report = scan(repo, card_prints)
    assert report.objects > 10 and report.files > 0
    assert report.copies == ()

    context = cli("memory", "context", "how can I reach alice by phone, and which card?", "--user", "alice", "--json")
    assert context.code == 0, context.err
    text = json.loads(context.out)["text"]
    assert "[PHONE-1]" in text and "7946" not in text and "4111" not in text

    check = cli("check")
    assert check.code == 0, check.out + check.err
