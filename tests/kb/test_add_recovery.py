"""An add killed before its commit (issue 10, item 6): the next add cleans up what the killed one
left (temporary files, uncommitted items, appended ledger lines), says so, and loses nothing that
was committed; changes no kb command makes are still refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.evidence import LEDGER_PATH, add_items, load_ledger
from kb.intake import prepare
from tests.builders import make_repo


def _doc(text: str, name: str) -> object:
    return prepare(f"# {name}\n\n{text}\n".encode(), f"{name}.md", "document", "system")


@pytest.mark.parametrize("stage", ["temp file", "item written", "items and ledger written"])
def test_the_next_add_cleans_up_after_a_killed_one(cli, tmp_path: Path, stage: str) -> None:
    repo = make_repo(tmp_path / "kb")
    first = _doc("Committed before the kill.", "first")
    add_items(repo, [first])
    ledger_before = (repo.root / LEDGER_PATH).read_bytes()
    folder = repo.root / "evidence" / "2026" / "12"
    folder.mkdir(parents=True, exist_ok=True)
    # the state a kill leaves at each point of add_items, before its commit
    (folder / ".ev-00000000000000aa.md.tmp-4242").write_text("half an ite")
    if stage != "temp file":
        (folder / "ev-00000000000000bb.md").write_text("# lost\n\nNever committed.\n")
    if stage == "items and ledger written":
        with open(repo.root / LEDGER_PATH, "ab") as handle:
            handle.write(b'{"id":"ev-00000000000000bb","partial":true}\n')
    note = tmp_path / "second.md"
    note.write_text("# Second\n\nAdded after the kill.\n")
    result = cli("--repo", str(repo.root), "evidence", "add", str(note))
    assert result.code == 0, result.err
    assert "cleaned up after an interrupted add" in result.err
    entries = load_ledger(repo.root)
    assert [e.id for e in entries][0] == first.id and len(entries) == 2
    assert (repo.root / LEDGER_PATH).read_bytes().startswith(ledger_before)
    assert repo.dirty_paths(("evidence/",)) == []
    assert cli("--repo", str(repo.root), "check").code == 0


def test_an_edited_item_is_still_refused_with_a_hint_that_works(cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb")
    first = _doc("Committed.", "first")
    result = add_items(repo, [first])
    item = repo.root / result.added[0].path
    item.write_text(item.read_text() + "tampered\n")
    note = tmp_path / "n.md"
    note.write_text("# N\n\nAnother note.\n")
    refused = cli("--repo", str(repo.root), "evidence", "add", str(note))
    assert refused.code == 8 and "changes no kb command makes" in refused.err and "git checkout -- evidence" in refused.err
    assert item.read_text().endswith("tampered\n")  # nothing was touched
