"""Frontmatter schema and types, unique ids, id = path, scope = path."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ci.findings import Finding
from ci.selection import Selection
from ci.snapshot import Snapshot
from kb.errors import FormatError
from kb.ids import is_evidence_id
from kb.page import FIELD_ORDER, PAGE_TYPES, STATUSES, Page, page_id_for_path
from kb.scopes import scope_for_path

REQUIRED = ("id", "type", "title", "summary", "scope", "status")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")
HINT = "see docs/format.md for the page header"


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _text_problem(key: str, value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return f"`{key}` must be a non-empty string (got {value!r}; quote values YAML reads as other types)"
    if key == "summary" and "\n" in value.strip():
        return "`summary` (L0) must be one line"
    return None


def _type_field_problem(_key: str, value: Any) -> str | None:
    return None if value in PAGE_TYPES else f"`type` must be one of {', '.join(PAGE_TYPES)} (got {value!r})"


def _status_problem(_key: str, value: Any) -> str | None:
    return None if value in STATUSES else f"`status` must be one of {', '.join(STATUSES)} (got {value!r})"


def _date_problem(key: str, value: Any) -> str | None:
    if value is None or (isinstance(value, str) and DATE_RE.match(value)):
        return None
    return f"`{key}` must be an ISO date like 2025-01-10 or empty (got {value!r})"


def _str_list_problem(key: str, value: Any) -> str | None:
    return None if _is_str_list(value) else f"`{key}` must be a list of strings (got {value!r})"


def _sources_problem(_key: str, value: Any) -> str | None:
    if _is_str_list(value) and all(is_evidence_id(v) for v in value):
        return None
    return f"`sources` must be a list of evidence ids like ev-9f2c4e1ab07d3c55 (got {value!r})"


def _verified_problem(_key: str, value: Any) -> str | None:
    if value is None or (
        isinstance(value, dict)
        and isinstance(value.get("at"), str)
        and isinstance(value.get("by"), str)
        and isinstance(value.get("claims", 0), int)
        and isinstance(value.get("supported", 0), int)
        and set(value) <= {"at", "by", "claims", "supported"}
    ):
        return None
    return "`verified` must be {at: <datetime>, by: <model>, claims: <int>, supported: <int>} or empty"


def _facts_problem(_key: str, value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return None
    return "`facts` must be a list of mappings"


# The type rule of each field that has one: (key, value) -> the problem, or None.
TYPE_RULES: dict[str, Callable[[str, Any], str | None]] = {
    "id": _text_problem,
    "title": _text_problem,
    "summary": _text_problem,
    "scope": _text_problem,
    "type": _type_field_problem,
    "status": _status_problem,
    "valid_from": _date_problem,
    "valid_to": _date_problem,
    "supersedes": _str_list_problem,
    "superseded_by": _str_list_problem,
    "tags": _str_list_problem,
    "sources": _sources_problem,
    "origin": _text_problem,
    "verified": _verified_problem,
    "facts": _facts_problem,
}


def _type_problem(key: str, value: Any) -> str | None:
    rule = TYPE_RULES.get(key)
    return rule(key, value) if rule is not None else None


def check_page(page: Page) -> list[Finding]:
    out = []
    meta = page.meta
    for key in REQUIRED:
        if key not in meta:
            out.append(Finding(page.path, 1, "frontmatter.required", f"missing field `{key}`", hint=HINT))
    for key, value in meta.items():
        line = page.meta_lines.get(key, 1)
        if key not in FIELD_ORDER:
            out.append(
                Finding(page.path, line, "frontmatter.unknown-key", f"unknown field `{key}`", hint="remove it or fix its spelling; " + HINT)
            )
            continue
        problem = _type_problem(key, value)
        if problem:
            out.append(Finding(page.path, line, "frontmatter.type", problem, hint=HINT))
    vf, vt = meta.get("valid_from"), meta.get("valid_to")
    if isinstance(vf, str) and isinstance(vt, str) and DATE_RE.match(vf) and DATE_RE.match(vt) and vt[:10] < vf[:10]:
        out.append(
            Finding(page.path, page.meta_lines.get("valid_to", 1), "frontmatter.validity", f"valid_to {vt} is before valid_from {vf}")
        )
    expected_id = page_id_for_path(page.path)
    if isinstance(meta.get("id"), str) and meta["id"] != expected_id:
        out.append(
            Finding(
                page.path,
                page.meta_lines.get("id", 1),
                "id.path",
                f"id `{meta['id']}` does not match its path (expected `{expected_id}`)",
                hint="rename the file or fix the id",
            )
        )
    expected_scope = scope_for_path(page.path)
    if expected_scope is None:
        out.append(Finding(page.path, 1, "scope.path", "pages live under knowledge/ or users/<id>/"))
    elif isinstance(meta.get("scope"), str) and meta["scope"] != expected_scope:
        out.append(
            Finding(
                page.path,
                page.meta_lines.get("scope", 1),
                "scope.path",
                f"scope `{meta['scope']}` does not match its path (expected `{expected_scope}`)",
                hint="the folder decides the scope",
            )
        )
    if page.path.endswith("/index.md") and meta.get("type") != "index":
        out.append(Finding(page.path, page.meta_lines.get("type", 1), "frontmatter.type", "a folder's index.md must have `type: index`"))
    return out


def check(snapshot: Snapshot, selection: Selection) -> list[Finding]:
    out: list[Finding] = []
    ids_seen: dict[str, str] = {}
    path_ids = {page_id_for_path(p): p for p in snapshot.page_paths}
    for path in selection.pages:
        page = snapshot.page(path)
        if isinstance(page, FormatError):
            out.append(Finding(path, page.line or 1, "page.parse", page.detail, hint=page.hint))
            continue
        out.extend(check_page(page))
        pid = page.meta.get("id")
        if isinstance(pid, str):
            other = ids_seen.get(pid) or (path_ids.get(pid) if path_ids.get(pid) != path else None)
            if other and other != path:
                out.append(Finding(path, page.meta_lines.get("id", 1), "id.unique", f"id `{pid}` is also used by {other}"))
            ids_seen.setdefault(pid, path)
    return out
