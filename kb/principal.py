"""Principals and what they may read.

A principal is ``system`` (shared knowledge only) or ``user:<id>`` (shared knowledge plus that
user's memory). Retrieval, reading and grep all check visibility with these functions, inside
the lookup, so that another user's page is indistinguishable from a page that does not exist.
"""

from __future__ import annotations

import re

from kb.errors import UsageError

SYSTEM = "system"
_USER_RE = re.compile(r"^user:([a-z0-9][a-z0-9._-]{0,63})$")


def parse_principal(principal: str) -> tuple[str, ...]:
    """The scopes ``principal`` may read; anything but ``system``/``user:<id>`` is a UsageError."""
    text = (principal or "").strip()
    if text == SYSTEM:
        return (SYSTEM,)
    if _USER_RE.match(text):
        return (SYSTEM, text)
    raise UsageError(f"invalid principal {principal!r}", hint="use `system` or `user:<id>` (e.g. --as user:alice)")


def can_read(scopes: tuple[str, ...], scope: str | None) -> bool:
    return scope is not None and scope in scopes
