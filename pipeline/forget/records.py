"""The forgetting's records under ``.kb/forget/``: the pending record (fingerprints, ids and the
step reached, never the text), the completion record, and finding an unfinished one again."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb.clock import iso_utc
from kb.evidence import ledger_at
from kb.forgotten import forget_dir, read_entries, write_entries
from kb.repo import Repo, atomic_write
from pipeline.forget.plan import Plan


@dataclass(frozen=True)
class VerifyReport:
    objects: int
    files: int  # files under .kb/ scanned (the git directory's files are scanned too, not counted)
    copies: tuple[str, ...]  # where material was found: object ids, .git/ and .kb/ paths

    @property
    def clean(self) -> bool:
        return not self.copies


def pending_path(repo: Repo, op: str) -> Path:
    return forget_dir(repo) / f"{op}.json"


def write_pending(repo: Repo, plan: Plan, step: str) -> None:
    data = plan.summary() | {
        "step": step,
        "scopes": plan.scopes,
        "renames": plan.items,
        "fingerprints": plan.fingerprints.to_json(),
        "target": plan.target,
        "removed": sorted(p for p, d in plan.files.items() if d is None),
        "redacted_hashes": plan.redacted_hashes,
        "indexed": plan.indexed,
    }
    atomic_write(pending_path(repo, plan.op), (json.dumps(data, sort_keys=True, indent=1) + "\n").encode("utf-8"))


def complete(repo: Repo, plan: Plan, report: VerifyReport, now: Callable[[], str] = iso_utc) -> dict[str, Any]:
    """The completion record (when, what by fingerprint, what was scanned, the result); the deny
    entry is lifted only when the scan is clean."""
    record = plan.summary() | {
        "evidence": sorted(plan.items.values()),  # the tombstones' ids, never the old ones
        "completed_at": now() if report.clean else None,
        "scanned": {"git_objects": report.objects, "state_files": report.files},
        "copies": list(report.copies),
        "result": "clean" if report.clean else "copies-remain",
        "fingerprints": plan.fingerprints.to_json(),
        "step": "done" if report.clean else "purged",
        "scopes": plan.scopes,
        "renames": plan.items if not report.clean else {},
        "target": plan.target,
        "removed": sorted(p for p, d in plan.files.items() if d is None) if not report.clean else [],
        "redacted_hashes": plan.redacted_hashes if not report.clean else {},
    }
    atomic_write(pending_path(repo, plan.op), (json.dumps(record, sort_keys=True, indent=1) + "\n").encode("utf-8"))
    if report.clean:
        entries = read_entries(repo)
        entries.pop(plan.op, None)
        write_entries(repo, entries)
    return record


def unfinished(repo: Repo, target: str) -> dict[str, Any] | None:
    """The newest record of a forgetting of the same target that a killed run left unfinished
    (or finished without lifting its deny entry); None when there is none."""
    folder = forget_dir(repo)
    denied = read_entries(repo)
    found = []
    for path in folder.glob("fg-*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("target") == target and (data.get("step") != "done" or data.get("id") in denied):
            found.append((path.stat().st_mtime, data))
    return max(found, key=lambda pair: pair[0])[1] if found else None


def done_record(repo: Repo, target: str) -> dict[str, Any] | None:
    """The newest completed forgetting of the same target (a re-run after it verifies again)."""
    found = []
    for path in forget_dir(repo).glob("fg-*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("target") == target and data.get("step") == "done":
            found.append((path.stat().st_mtime, data))
    return max(found, key=lambda pair: pair[0])[1] if found else None


def committed(repo: Repo, op: str) -> bool:
    head = repo.head()
    return head is not None and any(e.kind == "forget" and e.id == op for e in ledger_at(repo, head))
