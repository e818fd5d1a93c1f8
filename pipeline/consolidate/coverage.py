"""The coverage record's bookkeeping: what a batch did to each page and claim it looked at, and
what a person decided about a branch left for them. An action only ever moves up (``Action.outranks``)
(a claim merged away is not later recorded as merely verified)."""

from __future__ import annotations

from kb.repo import Repo
from pipeline.consolidate.record import UNCHECKED, Action, Batch, BatchKind, BatchState, Cycle, FoundRecord
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
    if not fixed_ok:
        _unchecked(cycle, _paths_of(cycle, batch, jobs), commit, f"{UNCHECKED}: its batch {batch.id} was declined")
        return
    for _, result in jobs:
        for key, (action, reason) in result.claims.items():
            if key in cycle.claims:
                cycle.claims[key].set_action(action, commit, reason)
        for path, action in result.pages.items():
            if path in cycle.pages:
                cycle.pages[path].set_action(action, commit)
    if batch.kind is BatchKind.PAGES:
        for path in batch.pages:
            if path in cycle.pages:
                cycle.pages[path].set_action(Action.VERIFIED, commit)
            for key, entry in cycle.claims.items():
                if key.rsplit("#", 1)[0] == path:
                    entry.set_action(Action.VERIFIED, commit)
    for path, what in (batch.withdrawn or {}).items():
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
    if done is None:
        _unchecked(cycle, paths, commit, f"{UNCHECKED}: {branch} was declined by a person")
        return
    for path in paths & set(cycle.pages):
        cycle.pages[path].set_action(Action.CHANGED, commit)
    for key, entry in cycle.claims.items():
        if key.rsplit("#", 1)[0] in paths:
            entry.set_action(Action.KEPT, commit, "merged by a person")


def _paths_of(cycle: Cycle, batch: Batch, jobs: list[tuple[str, JobResult]]) -> set[str]:
    """The pages a batch covers: its own, else (a scope root's batch) those its jobs named."""
    named = {path for _, r in jobs for path in r.pages} | {key.rsplit("#", 1)[0] for _, r in jobs for key in r.claims}
    return set(batch.pages) | (named & set(cycle.pages))


def _unchecked(cycle: Cycle, paths: set[str], commit: str, reason: str) -> None:
    """Pages and claims of a declined batch: kept as they are, and not counted as checked (an
    entry another batch already checked stays as that batch recorded it)."""
    for entry in [cycle.pages[p] for p in paths if p in cycle.pages] + [e for k, e in cycle.claims.items() if k.rsplit("#", 1)[0] in paths]:
        if entry.action in (Action.PENDING, Action.VERIFIED, Action.KEPT):
            entry.action, entry.commit, entry.reason = Action.KEPT, commit, reason
