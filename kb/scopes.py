"""Who may read what: scopes, principals, the folders that decide them, and user ids.

The path decides the scope: ``knowledge/**`` is ``system``; ``users/<id>/**`` is ``user:<id>``.
A principal is ``system`` (shared knowledge only) or ``user:<id>`` (shared knowledge plus that
user's memory). Retrieval, reading, grep, the agents' tools and the checks all use these
functions, inside the lookup, so that another user's page is indistinguishable from a page that
does not exist. This module is the only definition of the rule.
"""

from __future__ import annotations

import re

from kb.errors import PathError, UsageError

SYSTEM = "system"
KNOWLEDGE_DIR = "knowledge/"
USERS_DIR = "users/"
PAGE_FOLDERS = (KNOWLEDGE_DIR, USERS_DIR)  # every page lives under one of these
USER_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\Z")
_USER_SCOPE_RE = re.compile(r"^user:([a-z0-9][a-z0-9._-]{0,63})\Z")


def user_scope(user: str | None) -> str:
    """The scope of a user id (``system`` for None); an invalid id is a UsageError."""
    if user is None:
        return SYSTEM
    if not USER_ID_RE.match(user):
        raise UsageError(
            f"invalid user id {user!r}",
            hint="use lower-case letters, digits, '.', '_' or '-' (no slashes or '..'), at most 64 characters",
        )
    return f"user:{user}"


def is_scope(text: str) -> bool:
    """``text`` is a scope as paths decide them: ``system`` or ``user:<id>`` with a valid user id."""
    return text == SYSTEM or _USER_SCOPE_RE.match(text) is not None


def user_of(scope: str) -> str | None:
    """The user id of a ``user:<id>`` scope, None for ``system``."""
    return scope.split(":", 1)[1] if scope.startswith("user:") else None


def parse_principal(principal: str) -> tuple[str, ...]:
    """The scopes ``principal`` may read; anything but ``system``/``user:<id>`` is a UsageError."""
    text = (principal or "").strip()
    if text == SYSTEM:
        return (SYSTEM,)
    if _USER_SCOPE_RE.match(text):
        return (SYSTEM, text)
    raise UsageError(f"invalid principal {principal!r}", hint="use `system` or `user:<id>` (e.g. --as user:alice)")


def can_read(scopes: tuple[str, ...], scope: str | None) -> bool:
    return scope is not None and scope in scopes


def visible_from(reader_scope: str | None, target_scope: str | None) -> bool:
    """A reader of ``reader_scope`` pages may also see ``target_scope``: shared knowledge, or
    its own scope. Used for links and citations, so that a page never points at what its
    readers cannot see."""
    return target_scope == SYSTEM or (target_scope is not None and target_scope == reader_scope)


def scope_for_path(path: str) -> str | None:
    """The scope a path decides: ``system`` under knowledge/, ``user:<id>`` under users/<id>/."""
    parts = path.split("/")
    if parts[0] == "knowledge":
        return SYSTEM
    if parts[0] == "users" and len(parts) >= 3 and parts[1]:
        return f"user:{parts[1]}"
    return None


def folder_for_scope(scope: str) -> str:
    """The folder whose pages have ``scope``: ``knowledge/`` or ``users/<id>/``."""
    user = user_of(scope)
    return KNOWLEDGE_DIR if user is None else f"{USERS_DIR}{user}/"


def readable_folders(scopes: tuple[str, ...]) -> tuple[str, ...]:
    """The page folders a principal with ``scopes`` may read."""
    return tuple(sorted({folder_for_scope(s) for s in scopes}))


def principal_for_folders(folders: tuple[str, ...]) -> str:
    """The principal that reads what a change confined to ``folders`` may touch: the user of a
    user folder (who also sees shared knowledge), else ``system``.

    No principal reads two users' memories, so folders of two users are a PathError: such a
    change can be neither written nor reviewed by anyone entitled to see all of it.
    """
    users = sorted({f.split("/")[1] for f in folders if f.startswith(USERS_DIR) and f.count("/") >= 2})
    if len(users) > 1:
        raise PathError(
            f"a change may touch one user's folder, not {len(users)} ({', '.join(f'{USERS_DIR}{u}/' for u in users)})",
            hint="split it: one branch per user (no principal may read two users' memories)",
        )
    return f"user:{users[0]}" if users else SYSTEM
