"""The offline Reviewer: deterministic, no model. It approves a change only when the gate is
clean, no current fact contradicts another (same attribute, two current values), and no claim
that the evidence still supports was deleted (over-deletion).

It reads structure, never instructions: text inside pages or evidence cannot change its verdict.
What it cannot do, that a model reviewer can: notice a claim that cites the right line but
misstates its meaning in other words, or a contradiction expressed in different words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pygit2

from agents.schemas import Comment
from kb.errors import FormatError
from kb.page import Page, parse_page
from kb.repo import Repo
from ci.gate import GateReport

FOOTNOTE_LINE_RE = re.compile(r"^\[\^([^\]\s]+)\]:")


@dataclass(frozen=True)
class OfflineVerdict:
    verdict: str
    summary: str
    comments: list[Comment]


def _page_at(repo: Repo, commit: pygit2.Commit, path: str) -> Page | None:
    data = repo.read_at(commit, path)
    if data is None:
        return None
    try:
        return parse_page(data, path)
    except FormatError:
        return None


def conflicting_facts(page: Page) -> list[Comment]:
    current: dict[str, list[dict]] = {}
    for fact in page.meta.get("facts") or []:
        if isinstance(fact, dict) and fact.get("key") and not fact.get("valid_to") and ":" not in str(fact["key"]):
            current.setdefault(str(fact["key"]), []).append(fact)
    out = []
    line = page.meta_lines.get("facts", 1)
    for key, facts in sorted(current.items()):
        values = sorted({str(f.get("value")) for f in facts})
        if len(values) > 1:
            out.append(Comment(path=page.path, line=line, message=f"conflict: `{key}` has several current values ({', '.join(values)}); close the older one with valid_to or mark the page disputed", evidence=str(facts[-1].get("source") or "")))
    return out


def deleted_claims(before: Page, after: Page | None, elsewhere: set[str]) -> list[Comment]:
    """Citations present before and gone after, unless the page was deprecated or the same
    evidence line is still cited elsewhere in the change."""
    if after is not None and after.status == "deprecated":
        return []
    old = {c.evidence_id + f"#L{c.start}-L{c.end}": c for c in before.structure.citations if c.evidence_id}
    new = set() if after is None else {c.evidence_id + f"#L{c.start}-L{c.end}" for c in after.structure.citations if c.evidence_id}
    out = []
    for ref, cite in sorted(old.items()):
        if ref not in new and ref not in elsewhere:
            out.append(Comment(path=before.path, line=0 if after is None else 1, message=f"over-deletion: the claim citing {ref} (\"{cite.quote[:80]}\") was removed although its evidence still stands; close it with valid_to or deprecate the page instead", evidence=ref))
    return out


def review_offline(repo: Repo, base: pygit2.Commit, head: pygit2.Commit, gate: GateReport) -> OfflineVerdict:
    comments = [
        Comment(path=f.path, line=f.line, message=f"[{f.rule}] {f.message}", evidence=None)
        for f in gate.errors
    ]
    diff = repo.git.diff(base.tree, head.tree)
    changed = [d.new_file.path if d.status != pygit2.enums.DeltaStatus.DELETED else d.old_file.path for d in diff.deltas]
    pages = [p for p in changed if p.endswith(".md") and p.startswith(("knowledge/", "users/"))]
    after_pages = {p: _page_at(repo, head, p) for p in pages}
    cited_after = {
        c.evidence_id + f"#L{c.start}-L{c.end}"
        for page in after_pages.values()
        if page is not None
        for c in page.structure.citations
        if c.evidence_id
    }
    for path in pages:
        after = after_pages[path]
        before = _page_at(repo, base, path)
        if after is not None:
            comments.extend(conflicting_facts(after))
        if before is not None:
            comments.extend(deleted_claims(before, after, cited_after))
    if comments:
        return OfflineVerdict("request_changes", f"{len(comments)} problem(s): gate errors {len(gate.errors)}, others {len(comments) - len(gate.errors)}.", comments)
    return OfflineVerdict("approve", f"Gate clean ({gate.checked} page(s) checked); no conflicting current facts; no over-deletion in {len(pages)} changed page(s).", [])
