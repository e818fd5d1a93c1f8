"""The coverage record's bookkeeping: what a batch did to each page and claim it looked at, and
what a person decided about a branch left for them. An action only ever moves up (``Action.outranks``)
(a claim merged away is not later recorded as merely verified)."""

from __future__ import annotations

from kb.repo import Repo
from pipeline.consolidate.record import Action, Batch, BatchKind, BatchState, Cycle, FoundRecord
from pipeline.consolidate.result import JobResult
from pipeline.consolidate.view import root_of
from pipeline.merge import merged_as


def found_records(jobs: list[tuple[str, JobResult]]) -> list[FoundRecord]:
    """What the jobs found, as the record and the report list it."""
    return [FoundRecord(job=name, kind=f.kind, path=f.path, detail=f.detail, fixed=f.fixed) for name, r in jobs for f in r.found]


def record_batch(cycle: Cycle, batch: Batch, jobs: list[tuple[str, JobResult]], commit: str, state: BatchState) -> None:
    """What the batch did, into the coverage record (pages and claims it looked at)."""
    batch.state = state
    batch.commit = commit
    batch.found = found_records(jobs)
    skipped = [f"{name}: {s}" for name, r in jobs for s in r.skipped]
    if skipped:
        batch.skipped = skipped
    fixed_ok = state is BatchState.DONE
    for _, result in jobs:
        for key, (action, reason) in result.claims.items():
            if key in cycle.claims:
                cycle.claims[key].set_action(action if fixed_ok else Action.KEPT, commit, reason)
        for path, action in result.pages.items():
            if path in cycle.pages:
                cycle.pages[path].set_action(action if fixed_ok else Action.KEPT, commit)
    if batch.kind is BatchKind.PAGES:
        for path in batch.pages:
            if path in cycle.pages:
                cycle.pages[path].set_action(Action.VERIFIED, commit)
            for key, entry in cycle.claims.items():
                if key.rsplit("#", 1)[0] == path:
                    entry.set_action(Action.VERIFIED, commit)
    for path, what in (batch.withdrawn or {}).items() if fixed_ok else ():
        # the Reviewer refused the change to this page: it stays as it was; a contradiction on it waits for a person
        action = Action.DISPUTED if what.kind == "conflict" else Action.KEPT
        reason = f"change withdrawn after review: {what.reason}" + ("; for a person to decide" if action is Action.DISPUTED else "")
        for entry in cycle.entries_of(path):
            entry.action, entry.commit, entry.reason = action, commit, reason


def settle_human(repo: Repo, cycle: Cycle, batch: Batch, pull_state: str | None = None) -> None:
    """A branch left for a person: merged by them (done), deleted by them or its pull request
    closed (declined: its pages and claims are kept as they are, and the branch is never
    reopened), or still open (``pull_state``: its pull request's state, on a forge)."""
    branch = str(batch.branch)
    if pull_state == "open" or (pull_state is None and branch in repo.git.branches.local):
        return
    done = merged_as(repo, branch)
    batch.state = BatchState.DONE if done is not None else BatchState.DECLINED
    commit = done.commit if done is not None else str(batch.commit or cycle.base)
    batch.commit = commit
    paths = set(batch.pages) or {p for p in cycle.pages if root_of(p) == batch.root}
    for path in paths & set(cycle.pages):
        cycle.pages[path].set_action(Action.CHANGED if done is not None else Action.KEPT, commit)
    for key, entry in cycle.claims.items():
        if key.rsplit("#", 1)[0] in paths:
            entry.set_action(Action.KEPT, commit)
