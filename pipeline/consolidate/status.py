"""What a run reports and what the record says now: the run report of ``kb consolidate``, the
status of the current cycle (``kb consolidate status``) and the ``--if-needed`` thresholds."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pygit2

from kb.evidence import LedgerEntry, ledger_at
from kb.repo import Repo
from kb.scopes import user_of
from pipeline.consolidate.conflicts import current_conflicts
from pipeline.consolidate.record import (
    RECORD_DIR,
    REPLAY_FILE,
    Action,
    BatchState,
    Cycle,
    CycleStatus,
    FoundRecord,
    coverage,
    current_cycle,
)
from pipeline.consolidate.view import CommitView


class RunStatus(StrEnum):
    """How a run of ``kb consolidate`` ended: its cycle still open (a cap stopped it, or a branch
    waits for a person), complete, nothing new since the last complete cycle, or only planned."""

    OPEN = "open"
    COMPLETE = "complete"
    NOTHING_TO_DO = "nothing-to-do"
    PLAN = "plan"


@dataclass(frozen=True)
class PlannedBatch:
    """A batch still to do, as ``--plan`` shows it: what its offline jobs would change, find and skip."""

    batch: str
    pages: int
    would_change: list[str]
    found: list[FoundRecord]
    skipped: list[str]

    def to_dict(self) -> dict[str, object]:
        return {
            "batch": self.batch,
            "pages": self.pages,
            "would_change": self.would_change,
            "found": [f.model_dump(mode="json") for f in self.found],
            "skipped": self.skipped,
        }


@dataclass
class RunReport:
    cycle: str
    status: RunStatus
    covered: int
    total: int
    batches_done: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    needs_human: list[str] = field(default_factory=list)
    found: list[FoundRecord] = field(default_factory=list)
    stopped: str = ""
    plan: list[PlannedBatch] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what the jobs could not do (offline: what needs a model)

    @property
    def percent(self) -> float:
        return 100.0 if self.total == 0 else round(100.0 * self.covered / self.total, 1)

    def to_dict(self) -> dict[str, object]:
        return {
            "cycle": self.cycle,
            "status": self.status.value,
            "coverage": {"covered": self.covered, "total": self.total, "percent": self.percent},
            "batches_done": self.batches_done,
            "merged": self.merged,
            "needs_human": self.needs_human,
            "found": [f.model_dump(mode="json") for f in self.found],
            "stopped": self.stopped,
            "plan": [p.to_dict() for p in self.plan],
            "skipped": self.skipped,
        }


def report_of(cycle: Cycle, status: RunStatus | None = None) -> RunReport:
    """An empty report of ``cycle``: its coverage, and its status unless ``status`` is given."""
    covered, total = coverage(cycle)
    return RunReport(cycle.cycle, status or RunStatus(cycle.status.value), covered, total)


def content_digest(repo: Repo, commit: pygit2.Commit) -> str:
    """A hash of everything in ``commit``'s tree except the consolidation record itself (the
    replay cases kept beside it count)."""
    entries = sorted((e.name, str(e.id)) for e in commit.tree if e.name != RECORD_DIR)
    entries.append((REPLAY_FILE, hashlib.sha256(repo.read_at(commit, REPLAY_FILE) or b"").hexdigest()))
    return hashlib.sha256(repr(entries).encode()).hexdigest()


def cycle_status(repo: Repo) -> dict[str, Any]:
    """The current cycle as ``kb consolidate status --json`` shows it (``{"cycle": None, ...}``: none yet)."""
    head = repo.head()
    cycle = current_cycle(repo, head) if head is not None else None
    if cycle is None:
        return {"cycle": None, "status": "none"}
    covered, total = coverage(cycle)
    actions: dict[str, int] = {}
    for entry in list(cycle.pages.values()) + list(cycle.claims.values()):
        actions[entry.action.value] = actions.get(entry.action.value, 0) + 1
    states: dict[str, int] = {}
    for batch in cycle.batches:
        states[batch.state.value] = states.get(batch.state.value, 0) + 1
    return {
        "cycle": cycle.cycle,
        "status": cycle.status.value,
        "scope": cycle.scope,
        "base": cycle.base,
        "started_at": cycle.started_at,
        "finished_at": cycle.finished_at,
        "coverage": {"covered": covered, "total": total, "percent": 100.0 if not total else round(100.0 * covered / total, 1)},
        "actions": dict(sorted(actions.items())),
        "batches": dict(sorted(states.items())),
        "waiting": [b.branch for b in cycle.batches if b.state is BatchState.NEEDS_HUMAN],
        "disputed": sorted({k.rsplit("#", 1)[0] for k, e in cycle.claims.items() if e.action is Action.DISPUTED}),
        "retired": len(cycle.retired),
        "uncited": None if cycle.uncited is None else cycle.uncited.model_dump(mode="json"),
    }


def new_sessions(entries: list[LedgerEntry]) -> dict[str, int]:
    """Conversations (one session each) among ``entries``, by the user they belong to."""
    counts: dict[str, int] = {}
    for entry in entries:
        user = user_of(entry.scope)
        if entry.kind == "conversation" and user is not None:
            counts[user] = counts.get(user, 0) + 1
    return counts


def needed(repo: Repo, now: dt.datetime | None = None) -> list[str]:
    """The ``consolidation.if_needed`` thresholds passed at HEAD (empty: no cycle needed)."""
    head = repo.head()
    if head is None:
        return []
    limits = repo.config.consolidation.if_needed
    cycle = current_cycle(repo, head)
    if cycle is None:
        return ["no cycle has run yet"]
    if cycle.status is CycleStatus.OPEN:
        return [f"cycle {cycle.cycle} is open"]
    reasons = []
    ledger = ledger_at(repo, head)
    new = len(ledger) - cycle.evidence_count
    if limits.new_evidence and new >= limits.new_evidence:
        reasons.append(f"{new} new evidence item(s) since the last cycle (threshold {limits.new_evidence})")
    sessions = new_sessions(ledger[cycle.evidence_count :])
    for user, count in sorted(sessions.items()):
        if limits.new_sessions and count >= limits.new_sessions:
            reasons.append(f"{count} new session(s) of user {user} since the last cycle (threshold {limits.new_sessions})")
    view = CommitView(repo, head)
    conflicts = len(current_conflicts(view.pages()))
    if limits.open_conflicts and conflicts >= limits.open_conflicts:
        reasons.append(f"{conflicts} open conflict(s) (threshold {limits.open_conflicts})")
    from pipeline.consolidate.replay import replay_score

    before = cycle.replay
    score = replay_score(repo, head)
    if before is not None and score is not None and before - score > limits.replay_drop:
        reasons.append(f"replay score fell from {before:.2f} to {score:.2f}")
    started = dt.datetime.fromisoformat(cycle.started_at.replace("Z", "+00:00"))
    days = ((now or dt.datetime.now(dt.UTC)) - started).days
    if limits.days and days >= limits.days:
        reasons.append(f"{days} day(s) since the last cycle (threshold {limits.days})")
    return reasons
