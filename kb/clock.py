"""UTC time, in the few formats kb writes. Every timestamp kb records comes from here.

- ``iso_utc()``: ``2025-06-18T09:30:00Z`` (ledger entries, review notes, manifests, records)
- ``compact_utc()``: ``20250618T093000Z`` (names of run folders, crash logs, index versions)
- ``today_utc()``: ``2025-06-18`` (dates written into pages, e.g. ``valid_to``)
"""

from __future__ import annotations

import datetime as dt


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def iso_utc(when: dt.datetime | None = None) -> str:
    """Seconds precision, ``Z`` suffix."""
    when = (when or utc_now()).astimezone(dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def compact_utc(when: dt.datetime | None = None, micro: bool = False) -> str:
    """For file and folder names; ``micro`` adds microseconds so that names made in one second
    stay distinct."""
    when = (when or utc_now()).astimezone(dt.UTC)
    return when.strftime("%Y%m%dT%H%M%S%fZ" if micro else "%Y%m%dT%H%M%SZ")


def today_utc() -> str:
    return utc_now().date().isoformat()
