"""Conservation: a consolidation change never silently drops knowledge.

Every evidence span cited by a page at the change's base must still be cited by some page after
it, or be listed as retired, with its reason, in a consolidation coverage record
(``consolidation/cycles/*.json``). It applies to consolidation changes (their commits carry a
``Kb-Consolidation`` trailer); the gate runs it on every branch. The records are read from the
change's tree and, when the repository has it, from ``refs/kb/consolidation`` (``RECORD_REF``),
where ``kb consolidate`` keeps them when it goes through a forge (main changes only by merged
pull requests there).
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
RECORD_REF = "refs/kb/consolidation"


def record_at_ref(repo: Repo, path: str) -> bytes | None:
    """The file ``path`` of the consolidation record on ``refs/kb/consolidation``, if any."""
    ref = repo.git.references.get(RECORD_REF)
    return repo.read_at(ref.peel(pygit2.Commit), path) if ref is not None else None


def _retired_in(data: object) -> set[str]:
    retired = data.get("retired", []) if isinstance(data, dict) else []
    return {str(r["span"]) for r in retired if isinstance(r, dict) and r.get("span") and r.get("reason")}


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


def retired_spans(snapshot: Snapshot, repo: Repo | None = None) -> set[str]:
    """Spans retired with their reason in the records of the change's tree and of ``RECORD_REF``."""
    out: set[str] = set()
    folder = snapshot.root / "consolidation" / "cycles"
    for file in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out |= _retired_in(json.loads(file.read_text(encoding="utf-8")))
        except (ValueError, OSError):
            continue
    ref = repo.git.references.get(RECORD_REF) if repo is not None else None
    if repo is not None and ref is not None:
        for _, oid in sorted(repo.tree_files(ref.peel(pygit2.Commit), ("consolidation/cycles/",)).items()):
            try:
                out |= _retired_in(json.loads(repo.read_blob(oid)))
            except ValueError:
                continue
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
    retired = retired_spans(snapshot, view)
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
