"""Conservation: a consolidation change never silently drops knowledge.

Every evidence span cited by a page at the change's base must still be cited by some page after
it, or be listed as retired, with its reason, in a consolidation coverage record
(``consolidation/cycles/*.json``). It applies to consolidation changes (their commits carry a
``Kb-Consolidation`` trailer); the gate runs it on every branch.
"""

from __future__ import annotations

import json

import pygit2

from ci.findings import Finding
from ci.snapshot import Snapshot
from kb.errors import KbError
from kb.page import Page, parse_page
from kb.repo import Repo
from kb.scopes import PAGE_FOLDERS

TRAILER = "Kb-Consolidation: "


def pages_at(repo: Repo, commit: pygit2.Commit) -> dict[str, Page]:
    """The pages of ``commit`` that parse, by path."""
    out = {}
    for path, oid in repo.tree_files(commit, PAGE_FOLDERS).items():
        if path.endswith(".md"):
            try:
                out[path] = parse_page(repo.read_blob(oid), path)
            except KbError:
                continue
    return out


def cited_spans(pages: dict[str, Page]) -> dict[str, tuple[str, int]]:
    """Span ``ev-…#La-Lb`` -> the first (path, line) that cites it."""
    out: dict[str, tuple[str, int]] = {}
    for path, page in sorted(pages.items()):
        for cite in page.structure.citations:
            if cite.evidence_id:
                out.setdefault(f"{cite.evidence_id}#L{cite.start}-L{cite.end}", (path, cite.line))
    return out


def retired_spans(snapshot: Snapshot) -> set[str]:
    out: set[str] = set()
    folder = snapshot.root / "consolidation" / "cycles"
    for file in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            continue
        out.update(str(r["span"]) for r in data.get("retired", []) if isinstance(r, dict) and r.get("span") and r.get("reason"))
    return out


def is_consolidation_change(view: Repo, base: pygit2.Commit) -> bool:
    head = view.head()
    if head is None:
        return False
    for commit in view.git.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL):
        if commit.id == base.id:
            break
        if TRAILER in commit.message:
            return True
    return False


def check_change(view: Repo, snapshot: Snapshot, base: pygit2.Commit) -> list[Finding]:
    if not is_consolidation_change(view, base):
        return []
    before = cited_spans(pages_at(view, base))
    now = {p: page for p in snapshot.page_paths if isinstance(page := snapshot.page(p), Page)}
    after = set(cited_spans(now))
    retired = retired_spans(snapshot)
    return [
        Finding(
            path,
            line,
            "conservation.dropped",
            f"{span} was cited at the base and is cited by no page now",
            hint="keep a page citing it, or list it as retired with its reason in the cycle's coverage record",
        )
        for span, (path, line) in sorted(before.items())
        if span not in after and span not in retired
    ]
