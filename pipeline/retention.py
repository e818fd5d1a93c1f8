"""`kb retention apply`: evidence past its configured age is forgotten (docs/privacy.md).

The ``retention:`` section of ``kb.config.yaml`` gives ages in days by evidence kind
(``conversation: 365d``) and by scope (``user:alice: 90d``, ``system: 730d``). An item expires
when it was added to the log longer ago than the shortest age that applies to it. Expired items
are forgotten together through ``pipeline.forget`` (one forgetting, one completion record, the
same revoke-first order and verification), as their own kind of forgetting (``retention``), kept
apart from a user's request: it is run on a schedule, and an item a user asked to forget is
never waiting for its expiry.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from kb.clock import utc_now
from kb.config import retention_days
from kb.evidence import LedgerEntry, ledger_at
from kb.repo import Repo
from pipeline.forget import ForgetResult, Target, forget


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


def apply_retention(
    repo: Repo, dry_run: bool = False, now: Callable[[], dt.datetime] = utc_now
) -> tuple[list[Expired], ForgetResult | None]:
    """Forget every expired item in one forgetting (None when nothing has expired)."""
    expired = expired_items(repo, now)
    if not expired:
        return expired, None
    return expired, forget(repo, Target(expired=tuple(e.entry.id for e in expired)), dry_run)
