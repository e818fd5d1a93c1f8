"""The documented Python API (kb.api): its names exist and its example runs end to end."""

from __future__ import annotations

from pathlib import Path

from kb import api


def test_every_exported_name_exists() -> None:
    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert missing == []


def test_the_documented_example_works(tmp_path: Path) -> None:
    repo = api.init_repository(tmp_path / "my-kb")
    item = api.prepare(b"# Seats\n\nAlice prefers window seats on long flights.\n", "seats.md", "document", api.user_scope(None))
    added = api.add_items(repo, [item])
    assert [e.id for e in added.added] == [item.id]
    built = api.build_index(repo)
    assert built.evidence == 1 and built.summary().startswith("built ")
    hits = api.search(repo, api.make_query("window seat", principal="system", k=5, include_evidence=True))
    evidence_hits = [h for h in hits if h.kind == "evidence"]
    assert [h.id for h in evidence_hits] == [item.id] and "window seats" in evidence_hits[0].text
