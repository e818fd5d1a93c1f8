"""`kb forget`: remove a user, an evidence item, or a piece of text from everything kb keeps.

The order is the point (docs/privacy.md):

1. ``plan_forget`` decides, from HEAD, what goes: evidence items (tombstoned, or redacted line by
   line for ``--match``), pages (deleted, or their citing claims removed) and the material: keyed
   fingerprints of the forgotten text, minus whatever retained pages and evidence also say.
2. ``revoke`` writes the deny entry (``kb.forgotten``): from then on no read returns it.
3. ``apply_head_change`` commits the change on the main branch after the deterministic checks
   pass on it (no Reviewer: a reviewer may not veto a deletion). The ledger keeps its chain:
   tombstones, recomputed hashes, and one entry recording the forgetting.
4. ``rewrite_history`` rewrites every commit of every ref so that no blob or message keeps the
   material (paths removed, ledgers tombstoned, other blobs scrubbed line by line), rebuilds the
   notes on the new commit ids, drops remote-tracking refs and copies in worktrees, expires the
   reflogs and prunes every unreachable object (``git gc --prune=now``).
5. ``purge_derived`` removes every index version and point-in-time index, rebuilds the index
   from the new HEAD, and deletes any other file under ``.kb/`` that holds the material.
6. ``verify`` scans every git object and every file under ``.kb/``; only a clean scan writes the
   completion record and lifts the deny entry.

The pending record (``.kb/forget/<id>.json``: fingerprints, ids and the step reached, never the
text) says how far a forgetting got; until it completes, its deny entry keeps the material hidden.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb.errors import ConflictError, NotFoundError, UsageError
from kb.evidence import find_entry, ledger_at
from kb.forgotten import fingerprints_from_json, load_key
from kb.repo import STATE_DIR, Repo
from pipeline.forget.change import apply_head_change, new_ledger
from pipeline.forget.hide import revoke
from pipeline.forget.plan import FORGOTTEN_DIR, SCRUBBED, Plan, Target, drop_claims, plan_forget, target_digest
from pipeline.forget.records import VerifyReport, committed, complete, done_record, unfinished, write_pending
from pipeline.forget.rewrite import rewrite_history
from pipeline.forget.verify import purge_derived, scan

__all__ = [
    "SCRUBBED",
    "ForgetResult",
    "Plan",
    "Target",
    "VerifyReport",
    "apply_head_change",
    "complete",
    "drop_claims",
    "forget",
    "new_ledger",
    "plan_forget",
    "purge_derived",
    "revoke",
    "rewrite_history",
    "scan",
    "target_digest",
    "verify_all",
]


@dataclass(frozen=True)
class ForgetResult:
    plan: dict[str, Any]
    dry_run: bool
    record: dict[str, Any] | None = None
    commit: str | None = None
    rewritten: int = 0
    purged: tuple[str, ...] = ()


def forget(repo: Repo, target: Target, dry_run: bool = False) -> ForgetResult:
    """Plan, revoke, change HEAD, rewrite history, purge, verify (module docstring)."""
    if sum(x is not None for x in (target.user, target.evidence, target.match)) + bool(target.expired or target.expired_pages) != 1:
        raise UsageError("give exactly one of --user, an evidence id, or --match", hint="e.g. `kb forget --user alice --dry-run`")
    key = load_key(repo, create=not dry_run) or b"\0" * 32
    record = None if dry_run else unfinished(repo, target_digest(key, target))
    if record is not None:
        return _resume(repo, target, key, record)
    try:
        plan = plan_forget(repo, target, key)
    except NotFoundError:
        done = None if dry_run else done_record(repo, target_digest(key, target))
        if done is None:
            raise
        return _resume(repo, target, key, done)  # forgotten before: verified again
    if dry_run:
        return ForgetResult(plan.summary(), True)
    revoke(repo, plan)
    _refuse_if_dirty(repo, plan)
    return _finish(repo, plan, apply_head_change(repo, plan))


def _refuse_if_dirty(repo: Repo, plan: Plan) -> None:
    """An uncommitted file would be lost by the rewrite, or keep a copy: the forgetting stops
    there, already hidden (``revoke`` ran), and the same command completes it once it is gone."""
    dirty = [p for p in repo.dirty_paths() if not p.startswith(STATE_DIR + "/")]
    if not dirty:
        return
    write_pending(repo, plan, "blocked")
    more = f" and {len(dirty) - 1} more" if len(dirty) > 1 else ""
    raise ConflictError(
        f"the working tree has uncommitted changes ({dirty[0]}{more}); the forgotten material is hidden from every read, "
        "history is not rewritten yet",
        hint="commit, move or delete them, then run the same `kb forget` again to complete it",
    )


def _finish(repo: Repo, plan: Plan, commit: str) -> ForgetResult:
    mapping = rewrite_history(repo, plan)
    purged = purge_derived(repo, plan)
    report = scan(repo, plan.fingerprints)
    record = complete(repo, plan, report)
    return ForgetResult(plan.summary(), False, record, mapping.get(commit, commit), len(mapping), tuple(purged))


def _reset_hard(repo: Repo) -> None:
    """The worktree and git's index back to HEAD: a killed run may have left files half-changed,
    or git's index lock behind (no process holds it: we hold the repository's write lock)."""
    with repo.write_lock():
        Path(repo.git.path, "index.lock").unlink(missing_ok=True)
        proc = subprocess.run(["git", "-C", str(repo.root), "reset", "--hard", "--quiet", "HEAD"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConflictError(
            f"could not restore the working tree: {proc.stderr.strip()}", hint="run `git reset --hard`, then `kb forget` again"
        )


def _resume(repo: Repo, target: Target, key: bytes, data: dict[str, Any]) -> ForgetResult:
    """Carry an interrupted forgetting through from the step it reached (the deny entry is
    written again first, so nothing shows meanwhile). Before its commit, the change is planned
    again from HEAD (the same material, so the same fingerprints) under the same id; after it,
    the plan comes from the record, and history rewriting, purging and verification run again
    (each is idempotent). Files a killed run left half-written are restored from HEAD first."""
    plan = Plan(
        data["id"],
        data["kind"],
        data["base"],
        dict(data.get("renames", {})),
        list(data.get("redacted", [])),
        list(data.get("deleted_pages", [])),
        list(data.get("edited_pages", [])),
        list(data.get("scopes", [])),
        fingerprints_from_json(key, data.get("fingerprints", {})),
        dict(data.get("redacted_hashes", {})),
        {p: None for p in data.get("removed", [])},
        [],
        data["target"],
        bool(data.get("indexed")),
    )
    if data.get("step") == "done":  # killed between the completion record and lifting the deny entry
        report = scan(repo, plan.fingerprints)
        return ForgetResult(plan.summary(), False, complete(repo, plan, report, now=lambda: str(data.get("completed_at"))))
    revoke(repo, plan)
    head = repo.head()
    assert head is not None
    if data.get("step") == "blocked" and not committed(repo, plan.op):  # refused for uncommitted files
        _refuse_if_dirty(repo, plan)
        fresh = plan_forget(repo, target, key)  # HEAD may hold the user's commit of them
        fresh.op = plan.op
        revoke(repo, fresh)
        return _finish(repo, fresh, apply_head_change(repo, fresh))
    if not committed(repo, plan.op):
        if str(head.id) != plan.base:
            raise ConflictError("the branch moved since the forgetting was planned", hint="reset the branch, then run `kb forget` again")
        _reset_hard(repo)  # undo a half-applied change
        fresh = plan_forget(repo, target, key)
        fresh.op, fresh.items = plan.op, plan.items
        return _finish(repo, fresh, apply_head_change(repo, fresh))
    _reset_hard(repo)  # a rewrite killed before it checked out the new HEAD
    for ident in plan.redacted:  # a redacted item: HEAD holds its redaction, every commit gets the same
        entry = find_entry(ledger_at(repo, head), ident)
        plan.files[entry.path] = repo.read_at(head, entry.path)
    return _finish(repo, plan, str(head.id))


def verify_all(repo: Repo) -> list[dict[str, Any]]:
    """`kb forget --verify`: scan again for every forgetting this repository recorded."""
    key = load_key(repo)
    folder = repo.root / STATE_DIR / FORGOTTEN_DIR
    records = sorted(folder.glob("fg-*.json")) if folder.is_dir() else []
    if key is None or not records:
        raise NotFoundError("no forgetting is recorded in this repository", hint="run `kb forget` first")
    out = []
    for path in records:
        data = json.loads(path.read_text(encoding="utf-8"))
        report = scan(repo, fingerprints_from_json(key, data.get("fingerprints", {})))
        out.append(
            {
                "id": data["id"],
                "result": "clean" if report.clean else "copies-remain",
                "copies": list(report.copies),
                "git_objects": report.objects,
                "state_files": report.files,
            }
        )
    return out
