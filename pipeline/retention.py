"""`kb retention apply`: evidence and memory pages past their configured age are forgotten
(docs/privacy.md).

The ``retention:`` section of ``kb.config.yaml`` gives ages in days by evidence kind
(``conversation: 365d``), by scope (``user:alice: 90d``, ``system: 730d``) and for memory pages
(``memory: 180d``). An item expires when it was added to the log longer ago than the shortest age
that applies to it (its kind's, its scope's). A memory page (``users/<id>/...``, folder indexes
aside) expires when its last change on the branch is older than the shortest of ``memory`` and
its user's scope age; shared knowledge pages never expire by age. Everything expired is
forgotten together through ``pipeline.forget`` (one forgetting, one completion record, the same
revoke-first order and verification), as its own kind of forgetting (``retention``), kept apart
from a user's request: it is run on a schedule, and an item a user asked to forget is never
waiting for its expiry.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from kb.clock import utc_now
from kb.config import retention_days
from kb.evidence import LedgerEntry, ledger_at
from kb.repo import Repo
from kb.scopes import USERS_DIR, scope_for_path
from pipeline.forget import ForgetResult, Target, forget

MEMORY_RULE = "memory"  # the retention key for every user's memory pages


@dataclass(frozen=True)
class Expired:
    entry: LedgerEntry
    age_days: int
    limit_days: int
    rule: str  # the kind or scope whose age applied


def expired_items(repo: Repo, now: Callable[[], dt.datetime] = utc_now) -> list[Expired]:
    """The evidence items at HEAD older than the shortest retention age that applies to them."""
    rules = {key: retention_days(age) for key, age in repo.config.retention.items()}
    head = repo.head()
    if not rules or head is None:
        return []
    today = now()
    out = []
    for entry in ledger_at(repo, head):
        if not entry.path:  # tombstones and forgetting records hold nothing
            continue
        applying = [(days, key) for key, days in rules.items() if key in (entry.kind, entry.scope)]
        if not applying:
            continue
        limit, rule = min(applying)
        added = dt.datetime.strptime(entry.added_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        age = (today - added).days
        if age > limit:
            out.append(Expired(entry, age, limit, rule))
    return out


@dataclass(frozen=True)
class ExpiredPage:
    path: str
    age_days: int  # since its last change on the branch
    limit_days: int
    rule: str  # ``memory`` or the user's scope


def last_changes(repo: Repo, folder: str) -> dict[str, dt.datetime]:
    """Path -> when the current branch last changed it, for the files under ``folder`` at HEAD
    (one ``git log`` along the first parents: a merged change counts when it was merged)."""
    log = subprocess.run(
        ["git", "-C", str(repo.root), "log", "--first-parent", "-m", "--name-only", "--format=%x00%ct", "HEAD", "--", folder],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    out: dict[str, dt.datetime] = {}
    for block in log.split("\0")[1:]:
        stamp, *paths = block.strip().split("\n")
        when = dt.datetime.fromtimestamp(int(stamp), dt.UTC)
        for path in paths:
            if path.strip():
                out.setdefault(path.strip(), when)
    return out


def expired_pages(repo: Repo, now: Callable[[], dt.datetime] = utc_now) -> list[ExpiredPage]:
    """The memory pages at HEAD whose last change is older than the shortest age that applies
    (``memory``, their user's scope); folder index pages stay (they list what is left)."""
    rules = {key: retention_days(age) for key, age in repo.config.retention.items()}
    head = repo.head()
    if head is None or not any(key == MEMORY_RULE or key.startswith("user:") for key in rules):
        return []
    present = set(repo.tree_files(head, (USERS_DIR,)))
    today = now()
    out = []
    for path, changed in sorted(last_changes(repo, USERS_DIR).items()):
        if path not in present or not path.endswith(".md") or path.rsplit("/", 1)[-1] == "index.md":
            continue
        applying = [(days, key) for key, days in rules.items() if key in (MEMORY_RULE, scope_for_path(path))]
        if not applying:
            continue
        limit, rule = min(applying)
        age = (today - changed).days
        if age > limit:
            out.append(ExpiredPage(path, age, limit, rule))
    return out


def apply_retention(
    repo: Repo, dry_run: bool = False, now: Callable[[], dt.datetime] = utc_now
) -> tuple[list[Expired | ExpiredPage], ForgetResult | None]:
    """Forget every expired item and memory page in one forgetting (None when nothing expired)."""
    items, pages = expired_items(repo, now), expired_pages(repo, now)
    expired: list[Expired | ExpiredPage] = [*items, *pages]
    if not expired:
        return expired, None
    target = Target(expired=tuple(e.entry.id for e in items), expired_pages=tuple(p.path for p in pages))
    return expired, forget(repo, target, dry_run)
