"""The offline Reviewer: deterministic, no model. It approves a change only when the gate is
clean, no current fact contradicts another (same attribute, two current values), and no claim
that the evidence still supports was deleted (over-deletion).

It reads structure, never instructions: text inside pages or evidence cannot change its verdict.
What it cannot do, that a model reviewer can: notice a claim that cites the right line but
misstates its meaning in other words, or a contradiction expressed in different words.
"""

from __future__ import annotations

from agents.backend import ReadBackend
from agents.protocols import AgentIdentity, ReviewOutcome, ReviewTask
from agents.schemas import Comment
from kb.errors import FormatError
from kb.page import Page, parse_page
from kb.scopes import PAGE_FOLDERS

OFFLINE_REVIEWER = AgentIdentity("kb-offline/deterministic", "kb-deterministic")


def _page(text: str | None, path: str) -> Page | None:
    if text is None:
        return None
    try:
        return parse_page(text, path)
    except FormatError:
        return None


# relations whose cards hold several values at once: standing instructions accumulate
MULTI_VALUED = {"instruction"}


def conflicting_facts(page: Page) -> list[Comment]:
    """Single-valued attributes with two current values (keys with ':' and standing
    instructions are many-valued by design)."""
    current: dict[str, list[dict[str, object]]] = {}
    for fact in page.meta.get("facts") or []:
        # instructions stand together (a model decides which later one cancels an earlier one)
        if (
            isinstance(fact, dict)
            and fact.get("relation") not in MULTI_VALUED
            and fact.get("key") not in (None, "", "instruction")
            and not fact.get("valid_to")
            and ":" not in str(fact["key"])
        ):
            current.setdefault(str(fact["key"]), []).append(fact)
    out = []
    line = page.meta_lines.get("facts", 1)
    for key, facts in sorted(current.items()):
        values = sorted({str(f.get("value")) for f in facts})
        if len(values) > 1:
            out.append(
                Comment(
                    kind="conflict",
                    path=page.path,
                    line=line,
                    message=f"conflict: `{key}` has several current values ({', '.join(values)}); close the older one with valid_to or mark the page disputed",
                    evidence=str(facts[-1].get("source") or ""),
                )
            )
    return out


def deleted_claims(before: Page, after: Page | None, elsewhere: set[str], reprocessed: tuple[str, ...] = ()) -> list[Comment]:
    """Citations present before and gone after, unless the page was deprecated, the same
    evidence line is still cited elsewhere in the change, or the change derives that evidence
    again (``reprocessed``: its old claims are replaced by the new ones, which are checked)."""
    if after is not None and after.status == "deprecated":
        return []
    old = {c.evidence_id + f"#L{c.start}-L{c.end}": c for c in before.structure.citations if c.evidence_id}
    new = set() if after is None else {c.evidence_id + f"#L{c.start}-L{c.end}" for c in after.structure.citations if c.evidence_id}
    out = []
    for ref, cite in sorted(old.items()):
        if ref not in new and ref not in elsewhere and cite.evidence_id not in reprocessed:
            out.append(
                Comment(
                    kind="over_deletion",
                    path=before.path,
                    line=0 if after is None else 1,
                    message=f'over-deletion: the claim citing {ref} ("{cite.quote[:80]}") was removed although its evidence still stands; close it with valid_to or deprecate the page instead',
                    evidence=ref,
                )
            )
    return out


class OfflineReviewer:
    """The built-in deterministic Reviewer: it reads the task's pages before and after, never
    instructions inside them."""

    identity = OFFLINE_REVIEWER

    def review(self, task: ReviewTask, backend: ReadBackend) -> ReviewOutcome:  # noqa: ARG002  # the protocol's; the task holds all it reads
        comments = [Comment(path=f.path, line=f.line, message=f"[{f.rule}] {f.message}", kind="gate") for f in task.gate_findings]
        pages = [p for p in task.changed_files if p.endswith(".md") and p.startswith(PAGE_FOLDERS)]
        after_pages = {p: _page(task.after.get(p), p) for p in pages}
        cited_after = {
            c.evidence_id + f"#L{c.start}-L{c.end}"
            for page in after_pages.values()
            if page is not None
            for c in page.structure.citations
            if c.evidence_id
        }
        for path in pages:
            after = after_pages[path]
            before = _page(task.before.get(path), path)
            if after is not None:
                comments.extend(conflicting_facts(after))
            if before is not None:
                comments.extend(deleted_claims(before, after, cited_after, task.reprocessed))
        gate = len(task.gate_findings)
        if comments:
            summary = f"{len(comments)} problem(s): gate errors {gate}, others {len(comments) - gate}."
            return ReviewOutcome("request_changes", summary, tuple(comments), self.identity)
        summary = f"Gate clean; no conflicting current facts; no over-deletion in {len(pages)} changed page(s)."
        return ReviewOutcome(
            "approve", summary, (), self.identity, transcript={"agent": self.identity.model, "head": task.head, "verdict": "approve"}
        )
