"""The typed coverage record reads what earlier kb versions wrote and writes it back byte for byte.

``records/`` holds cycles written by the code before the record had types (issue 22): the seeded
cycle of test_cycle (complete), the revision cases of test_revision (a page withdrawn after review;
a branch refused and left for a person; the same branch deleted by the person, so declined) and a
dedupe refused by the replay rule. Each is loaded, saved, and compared with the file as written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.offline.reviewer import conflicting_facts
from kb.errors import FormatError
from kb.page import parse_page
from pipeline.consolidate.conflicts import one_page_conflicts
from pipeline.consolidate.record import NEEDS_HUMAN, Action, BatchKind, BatchState, Cycle, CycleStatus, Entry, pointer_text

RECORDS = Path(__file__).parent / "records"
CYCLES = sorted(RECORDS.glob("*.cycle.json"))


def test_the_committed_records_are_there() -> None:
    assert [p.name.removesuffix(".cycle.json") for p in CYCLES] == [
        "declined-complete",
        "refused-open",
        "replay-open",
        "seeded-complete",
        "withdrawn-complete",
    ]


@pytest.mark.parametrize("path", CYCLES, ids=lambda p: p.name)
def test_a_record_written_before_the_types_round_trips_byte_for_byte(path: Path) -> None:
    data = path.read_text(encoding="utf-8")
    cycle = Cycle.loads(data, path.name)
    assert cycle.dumps() == data
    pointer = path.with_name(path.name.replace(".cycle.", ".current."))
    assert pointer_text(cycle) == pointer.read_text(encoding="utf-8")


def test_the_loaded_records_are_typed() -> None:
    declined = Cycle.loads((RECORDS / "declined-complete.cycle.json").read_bytes(), "declined")
    assert declined.status is CycleStatus.COMPLETE and declined.content
    assert [b.state for b in declined.batches].count(BatchState.DECLINED) == 1
    refused = Cycle.loads((RECORDS / "refused-open.cycle.json").read_bytes(), "refused")
    waiting = [b for b in refused.batches if b.state is BatchState.NEEDS_HUMAN]
    assert len(waiting) == 1 and waiting[0].state == NEEDS_HUMAN and waiting[0].kind is BatchKind.PAGES
    assert refused.content is None and "content" not in refused.model_dump(mode="json")
    withdrawn = Cycle.loads((RECORDS / "withdrawn-complete.cycle.json").read_bytes(), "withdrawn")
    [batch] = [b for b in withdrawn.batches if b.withdrawn]
    assert batch.rounds == 2 and batch.withdrawn is not None
    assert [w.kind for w in batch.withdrawn.values()] == ["conflict"]
    assert withdrawn.claims["knowledge/policies/hours.md#1"].action is Action.DISPUTED


def test_keys_written_only_once_set_stay_absent_until_then() -> None:
    """A record with retired spans, skipped work and a found item without a job (as the old code
    wrote them) round-trips too; an entry without a reason is written without one."""
    data = json.loads((RECORDS / "seeded-complete.cycle.json").read_text(encoding="utf-8"))
    data["batches"][0]["skipped"] = ["re-verification: 2 claim(s) in other words than their quote (needs a model)"]
    data["batches"][0]["found"].append({"kind": "declined", "path": "", "detail": "declined earlier, not reopened", "fixed": False})
    data["retired"] = [{"span": "ev-0123456789abcdef#L1-L2", "reason": "no longer cited after x", "batch": "x"}]
    text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert Cycle.loads(text, "edited").dumps() == text
    assert Entry(action=Action.VERIFIED, commit="c").model_dump(mode="json") == {"action": "verified", "commit": "c"}


def test_an_action_only_moves_up() -> None:
    entry = Entry()
    entry.set_action(Action.MERGED, "a", "stated elsewhere")
    entry.set_action(Action.VERIFIED, "b")
    assert (entry.action, entry.commit, entry.reason) == (Action.MERGED, "a", "stated elsewhere")
    entry.set_action(Action.RETIRED, "c")
    assert (entry.action, entry.commit) == (Action.RETIRED, "c")


def test_a_record_of_another_shape_is_a_format_error() -> None:
    data = json.loads((RECORDS / "refused-open.cycle.json").read_text(encoding="utf-8"))
    data["batches"][0]["state"] = "half-done"
    with pytest.raises(FormatError) as caught:
        Cycle.loads(json.dumps(data), "consolidation/cycles/x.json")
    assert caught.value.message.startswith("consolidation/cycles/x.json is not a consolidation record: batches.0.state:")
    assert "git log -- consolidation/" in (caught.value.hint or "")


def test_a_one_page_conflict_carries_its_key() -> None:
    """The fact's key comes from the facts themselves, also when it holds a backtick (which a
    pattern over the comment's message would cut short)."""
    text = (
        "---\nid: knowledge/hours\ntype: fact\ntitle: Hours\nsummary: Hours.\nscope: system\nstatus: active\n"
        "facts:\n"
        "- {key: 'opening`time', value: 9am, label: '1'}\n"
        "- {key: 'opening`time', value: 8am, label: '2'}\n"
        "- {key: closing-time, value: 5pm, label: '3'}\n"
        "- {key: closing-time, value: 6pm, label: '4', valid_to: '2024-01-01'}\n"
        "- {key: floor, value: '2', label: '5'}\n"
        "- {key: floor, value: '3'}\n"
        "---\n# Hours\n"
    )
    page = parse_page(text, "knowledge/hours.md")
    conflicts = one_page_conflicts(page)
    assert [(c.key, c.labels) for c in conflicts] == [("floor", ("5",)), ("opening`time", ("1", "2"))]
    assert [c.comment for c in conflicts] == conflicting_facts(page)
