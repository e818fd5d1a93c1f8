"""Step 2 of `kb forget`: the deny entry every read consults, written before anything changes."""

from __future__ import annotations

from kb.forgotten import read_entries, write_entries
from kb.repo import Repo
from pipeline.forget.plan import Plan
from pipeline.forget.records import pending_path, write_pending


def revoke(repo: Repo, plan: Plan) -> None:
    """Step 2: hide everything the plan forgets from every read, at once. The pending record is
    written first, so that a process killed in between leaves a forgetting a re-run resumes."""
    if not pending_path(repo, plan.op).exists():
        write_pending(repo, plan, "planned")
    entries = read_entries(repo)
    entries[plan.op] = {
        "scopes": plan.scopes,
        "evidence": sorted(set(plan.items) | set(plan.redacted)),
        "paths": sorted(set(plan.deleted_pages) | set(plan.edited_pages)),
        "text": plan.fingerprints.to_json(),
    }
    write_entries(repo, entries)
    write_pending(repo, plan, "revoked")
