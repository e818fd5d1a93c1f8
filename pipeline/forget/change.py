"""Step 3 of `kb forget`: the change on HEAD, committed once the deterministic checks pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from kb.clock import iso_utc
from kb.errors import ConflictError, GateError
from kb.evidence import LEDGER_PATH, LedgerEntry, forget_record, ledger_at, rechain, tombstone
from kb.repo import Repo, atomic_write
from pipeline.forget.plan import Plan
from pipeline.forget.records import write_pending

if TYPE_CHECKING:
    from ci.run import CheckReport


def new_ledger(entries: list[LedgerEntry], plan: Plan, record: LedgerEntry | None) -> list[LedgerEntry]:
    """``entries`` with tombstones for forgotten items, new hashes for redacted ones, chained again."""
    out = []
    for e in entries:
        if e.id in plan.items:
            out.append(tombstone(e, plan.items[e.id]))
        elif e.id in plan.redacted_hashes:
            out.append(LedgerEntry(**(e.payload() | {"sha256": plan.redacted_hashes[e.id]})))
        else:
            out.append(e)
    return rechain(out + ([record] if record else []))


def apply_head_change(repo: Repo, plan: Plan, now: Callable[[], str] = iso_utc) -> str:
    """Step 3: commit the removal on the current branch once the deterministic checks pass."""
    with repo.write_lock():
        head = repo.head()
        assert head is not None
        entries = ledger_at(repo, head)
        if any(e.kind == "forget" and e.id == plan.op for e in entries):
            return str(head.id)  # done before (a resumed run)
        if str(head.id) != plan.base:
            raise ConflictError("the branch moved since the forgetting was planned", hint="run `kb forget` again")
        meta = {
            "evidence": len(plan.items),
            "redacted": len(plan.redacted),
            "pages_deleted": len(plan.deleted_pages),
            "pages_edited": len(plan.edited_pages),
            "target": plan.kind,
        }
        record = forget_record(0, plan.op, now(), meta)
        ledger = new_ledger(entries, plan, record)
        originals = {p: (repo.root / p).read_bytes() if (repo.root / p).is_file() else None for p in [*plan.files, LEDGER_PATH]}
        try:
            for path, data in plan.files.items():
                if data is None:
                    (repo.root / path).unlink(missing_ok=True)
                    _remove_empty_parents(repo.root, repo.root / path)
                else:
                    atomic_write(repo.root / path, data)
            atomic_write(repo.root / LEDGER_PATH, "".join(e.to_line() for e in ledger).encode("utf-8"))
            report = _check_change(repo, head)
            if not report.ok:
                first = report.errors[0]
                raise GateError(
                    f"the forgetting change fails the checks: {first.path}:{first.line}: {first.message}",
                    hint="fix the page by hand (the material stays hidden meanwhile), then run the same `kb forget` again",
                )
            commit = repo.commit_worktree_paths(sorted([*plan.files, LEDGER_PATH]), f"forget: {plan.op}\n\nKb-Forget: {plan.op}\n")
        except BaseException:
            for path, data in originals.items():
                if data is None:
                    (repo.root / path).unlink(missing_ok=True)
                else:
                    atomic_write(repo.root / path, data)
            raise
    write_pending(repo, plan, "committed")
    return str(commit)


def _check_change(repo: Repo, head: pygit2.Commit) -> CheckReport:
    """The deterministic checks over what the forgetting changes: its pages, the indexes of their
    folders, the pages naming a deleted page, and the whole ledger (its chain; no append-only
    comparison with HEAD, since removing evidence is the point). A deletion is not held up by an
    unrelated page elsewhere, and a full check of 10,000 pages took minutes of the forgetting."""
    from ci.run import check_selection
    from ci.selection import plan_changed
    from ci.snapshot import Snapshot

    snapshot = Snapshot.load(repo.root, repo.config)
    selection = plan_changed(snapshot, repo.changed_since(head), head)
    # a folder deleted whole (a user's) has no index to check
    folders = tuple(f for f in selection.folders if (repo.root / f).is_dir())
    selection = dataclasses.replace(selection, folders=folders, base=None)
    return check_selection(repo, snapshot, selection)


def _remove_empty_parents(root: Path, path: Path) -> None:
    folder = path.parent
    while folder != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
