"""The evidence log: formats, stable stored form, dedup, atomicity, append-only checking."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ci.run import run_checks
from kb import evidence
from kb.errors import FormatError, UsageError
from kb.evidence import add_items, load_ledger, verify_chain
from kb.intake import prepare
from kb.scaffold import init_repository
from kb.scopes import user_scope
from tests.builders import ALICE_CHAT, make_sample_repo


def test_conversation_stored_one_message_per_line_with_speaker_and_time() -> None:
    item = prepare(json.dumps(ALICE_CHAT).encode(), "c.json", "conversation", "user:alice")
    lines = item.content.splitlines()
    assert lines[0] == "[2025-01-10T09:00:00Z] user: Hi, I need to book a flight to Lisbon."
    assert lines[2].startswith("[2025-01-10T09:00:30Z] user: I prefer window seats.")
    assert item.meta["first_time"] == "2025-01-10T09:00:00Z"


def test_openai_format_jsonl_and_multiline_messages() -> None:
    chat = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "line one\nline two"}]},
        ]
    }
    item = prepare(json.dumps(chat).encode(), "c.json", "conversation", "system")
    assert item.content == "system: Be brief.\nuser: line one\n    line two\n"
    jsonl = "\n".join(json.dumps(m) for m in ALICE_CHAT[:2])
    assert prepare(jsonl.encode(), "c.jsonl", "conversation", "system").content.count("\n") == 2


def test_markdown_conversation_and_document_are_kept_verbatim() -> None:
    text = "**Alice:** hello\r\n**Bot:** hi"
    item = prepare(text.encode(), "c.md", "conversation", "system")
    assert item.content == "**Alice:** hello\n**Bot:** hi\n"


def test_invalid_inputs_are_format_errors() -> None:
    with pytest.raises(FormatError, match="not valid JSON"):
        prepare(b"[{", "bad.json", "conversation", "system")
    with pytest.raises(FormatError, match="not UTF-8"):
        prepare(b"caf\xe9", "latin1.txt", "document", "system")
    with pytest.raises(FormatError, match="empty conversation"):
        prepare(b"[]", "empty.json", "conversation", "system")
    with pytest.raises(FormatError, match="secret"):
        prepare(b"my key is sk-proj-abcdefghijklmnopqrstuvwxyz0123", "k.txt", "document", "system")
    with pytest.raises(UsageError, match="invalid user id"):
        user_scope("../bob")


def test_same_content_twice_is_detected_not_duplicated(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "r")
    item = prepare(b"a fact\n", "a.txt", "document", "system")
    first = add_items(repo, [item])
    second = add_items(repo, [item, prepare(b"a fact\n", "copy.txt", "document", "system")])
    assert len(first.added) == 1 and second.added == [] and second.duplicates == [item.id, item.id]
    assert len(load_ledger(repo.root)) == 1
    other_scope = prepare(b"a fact\n", "a.txt", "document", user_scope("bob"))
    assert other_scope.id != item.id


def test_ledger_chains_and_each_add_is_one_commit(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "r")
    head0 = repo.head().id
    add_items(repo, [prepare(b"one\n", "1.txt", "document", "system")])
    add_items(repo, [prepare(b"two\n", "2.txt", "document", "system")])
    entries = load_ledger(repo.root)
    assert [e.seq for e in entries] == [1, 2] and entries[1].prev == entries[0].hash
    assert verify_chain(entries) == []
    assert repo.head().parents[0].parents[0].id == head0
    assert repo.dirty_paths() == []


def test_failure_between_item_and_ledger_leaves_repository_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = init_repository(tmp_path / "r")
    add_items(repo, [prepare(b"first\n", "1.txt", "document", "system")])
    head = repo.head().id
    ledger_before = (repo.root / evidence.LEDGER_PATH).read_bytes()
    files_before = sorted(p.relative_to(repo.root) for p in (repo.root / "evidence").rglob("*"))

    def crash(_path: Path, _data: bytes) -> None:
        raise OSError("disk full (injected)")

    monkeypatch.setattr(evidence, "_write_ledger", crash)
    with pytest.raises(OSError, match="injected"):
        add_items(repo, [prepare(b"second\n", "2.txt", "document", "system")])
    assert repo.head().id == head
    assert (repo.root / evidence.LEDGER_PATH).read_bytes() == ledger_before
    assert sorted(p.relative_to(repo.root) for p in (repo.root / "evidence").rglob("*")) == files_before
    assert repo.dirty_paths() == []


def test_failure_in_commit_rolls_back_files_and_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = init_repository(tmp_path / "r")
    head = repo.head().id

    def crash(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("commit failed (injected)")

    monkeypatch.setattr(type(repo), "commit_worktree_paths", crash)
    with pytest.raises(RuntimeError):
        add_items(repo, [prepare(b"x\n", "x.txt", "document", "system")])
    assert repo.head().id == head and repo.dirty_paths() == []


def test_modified_or_deleted_evidence_is_caught_against_base(tmp_path: Path) -> None:
    repo, ids = make_sample_repo(tmp_path / "r")
    entry = next(e for e in load_ledger(repo.root) if e.id == ids["doc"])
    path = repo.root / entry.path
    path.write_text(path.read_text().replace("90 days", "180 days"))
    rules = {(f.rule, f.path) for f in run_checks(repo, base="HEAD").errors}
    assert ("evidence.modified", entry.path) in rules
    path.unlink()
    rules = {(f.rule, f.path) for f in run_checks(repo, base="HEAD").errors}
    assert ("evidence.removed", entry.path) in rules
    assert ("evidence.removed", entry.path) in {(f.rule, f.path) for f in run_checks(repo, changed_only=True).errors}


def test_rewritten_or_truncated_ledger_is_caught(tmp_path: Path) -> None:
    repo, ids = make_sample_repo(tmp_path / "r")
    ledger = repo.root / evidence.LEDGER_PATH
    lines = ledger.read_text().splitlines(keepends=True)
    ledger.write_text(lines[0].replace('"source":"visas.md"', '"source":"other.md"') + lines[1])
    findings = run_checks(repo, base="HEAD").errors
    assert ("evidence.rewritten", 1) in {(f.rule, f.line) for f in findings}
    assert "evidence.chain" in {f.rule for f in findings}
    ledger.write_text(lines[0])
    findings = run_checks(repo, base="HEAD").errors
    assert ("evidence.rewritten", 2) in {(f.rule, f.line) for f in findings}


def test_unrecorded_evidence_file_is_reported(tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    (repo.root / "evidence" / "sneaky.md").write_text("not via kb\n")
    assert "evidence.unrecorded" in {f.rule for f in run_checks(repo).errors}


def test_ledger_lines_against_base_are_counted_at_newlines_only(tmp_path: Path) -> None:
    """An old kb wrote a source holding U+2028 raw into the ledger: the comparison with the base
    counts that entry as one line, so a rewrite of the entry after it is reported at its own line."""
    repo, _ids = make_sample_repo(tmp_path / "r")
    ledger = repo.root / evidence.LEDGER_PATH
    lines = ledger.read_text(encoding="utf-8").split("\n")
    old = json.loads(lines[0])
    old.pop("hash")
    entry = evidence.LedgerEntry(**(old | {"source": "meeting\u2028notes\x85old.md"}))
    first = json.dumps(entry.payload() | {"hash": entry.compute_hash()}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    ledger.write_text("\n".join([first, *lines[1:]]), encoding="utf-8")
    subprocess.run(["git", "-C", str(repo.root), "commit", "-qam", "an old kb's ledger line"], check=True)
    rewritten = ledger.read_text(encoding="utf-8").split("\n")
    rewritten[1] = rewritten[1].replace('"source":"', '"source":"x')
    ledger.write_text("\n".join(rewritten), encoding="utf-8")
    rewrites = {f.line for f in run_checks(repo, base="HEAD").errors if f.rule == "evidence.rewritten"}
    assert rewrites == {2}
