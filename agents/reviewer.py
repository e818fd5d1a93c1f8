"""The Reviewer: a read-only agent that checks a change claim by claim against raw evidence.

``review_with_model`` gives the model the diff, the changed files, the gate findings, the
evidence ids and the list of added or changed claims with their page lines and citations (all as
untrusted data), with the read tools, ``comment`` and ``verdict``. It has no write tool. The returned run's ``result`` is the
validated ``Verdict`` and its ``comments`` the collected review comments; the pipeline binds
the verdict to ``task.head``, the commit that was reviewed.
"""

from __future__ import annotations

from agents.backend import ReadBackend
from agents.llm import Budget, LiteLLMClient
from agents.loop import AgentRun, run_agent
from agents.prompts import REVIEWER_SYSTEM
from agents.protocols import AgentIdentity, ReviewOutcome, ReviewTask
from agents.schemas import Comment, Verdict
from agents.tools import REVIEWER_TOOLS
from agents.untrusted import wrap_untrusted
from kb.citations import Citation
from kb.errors import FormatError
from kb.page import Page, parse_page

MAX_STEPS = 60
MAX_INVALID = 3
GATE = AgentIdentity("kb-gate/deterministic", "kb-deterministic")


class ModelReviewer:
    """The Reviewer protocol on a configured model. When the deterministic gate has findings,
    they go back to the Proposer as they are: no model tokens are spent on what a machine saw."""

    def __init__(self, client: LiteLLMClient, identity: AgentIdentity, budget: Budget | None) -> None:
        self.client = client
        self.identity = identity
        self.budget = budget

    def review(self, task: ReviewTask, backend: ReadBackend) -> ReviewOutcome:
        if task.gate_findings:
            comments = tuple(Comment(path=f.path, line=f.line, message=f"[{f.rule}] {f.message}", kind="gate") for f in task.gate_findings)
            summary = f"Deterministic gate: {len(comments)} error(s); the model reviewer was not called."
            return ReviewOutcome(
                "request_changes", summary, comments, GATE, transcript={"agent": GATE.model, "head": task.head, "gate": task.gate_text}
            )
        run = review_with_model(self.client, backend, task, self.budget)
        verdict = run.result
        assert isinstance(verdict, Verdict)
        return ReviewOutcome(verdict.verdict, verdict.summary, run.comments, self.identity, run.usage, run.to_dict())


def review_with_model(client: LiteLLMClient, backend: ReadBackend, task: ReviewTask, budget: Budget | None) -> AgentRun:
    """Run the Reviewer on ``task``; the returned run's ``result`` is its Verdict.

    Raises AgentModelError or AgentBudgetError (carrying the partial run) when it stops without
    a verdict.
    """
    run = run_agent(
        client,
        REVIEWER_SYSTEM,
        review_prompt(task),
        REVIEWER_TOOLS,
        backend,
        max_steps=MAX_STEPS,
        max_invalid=MAX_INVALID,
        budget=budget,
    )
    assert isinstance(run.result, Verdict), "verdict is the Reviewer's only terminal tool"
    return run


def _claims(text: str | None, path: str) -> dict[tuple[str, tuple[str, ...]], tuple[int, list[Citation]]]:
    """A page's claims: (text, cited references) -> (file line, citations)."""
    if text is None or not path.endswith(".md"):
        return {}
    try:
        page: Page = parse_page(text, path)
    except FormatError:
        return {}
    structure = page.structure
    by_label = {c.label: c for c in structure.citations}
    out: dict[tuple[str, tuple[str, ...]], tuple[int, list[Citation]]] = {}
    for claim in structure.claims:
        cites = [by_label[label] for label in claim.labels if label in by_label]
        refs = tuple(f"{c.evidence_id}#L{c.start}-L{c.end}" if c.evidence_id else c.raw for c in cites)
        out.setdefault((claim.text, refs), (claim.line, cites))
    return out


def claims_to_check(task: ReviewTask) -> str:
    """Every claim the change adds or changes (page line, text, what it cites) and every claim it
    removes: the Reviewer's checklist, computed from the pages before and after."""
    lines = []
    for path in task.changed_files:
        before = _claims(task.before.get(path), path)
        after = _claims(task.after.get(path), path)
        for key, (line, cites) in sorted(after.items(), key=lambda item: item[1][0]):
            if key in before:
                continue
            cited = "; ".join(
                f'{c.evidence_id}#L{c.start}-L{c.end} "{c.quote}"' if c.evidence_id else f"malformed citation [^{c.label}]" for c in cites
            )
            lines.append(f"- {path}:{line}: {key[0]}\n  cites: {cited or 'nothing'}")
        for key, (line, _) in sorted(before.items(), key=lambda item: item[1][0]):
            if key not in after:
                lines.append(f"- removed from {path} (was line {line}): {key[0]}")
    return "\n".join(lines)


def review_prompt(task: ReviewTask) -> str:
    """The user message of a Reviewer run."""
    files = "\n".join(f"- {path}" for path in task.changed_files) or "- (none)"
    evidence = ", ".join(task.evidence_ids) or "(none given)"
    parts = [
        f"Review the change on branch {task.branch} at commit {task.head}.",
        f"Changed files:\n{files}",
        (f"Evidence the change says it is based on: {evidence}. Read it, and search the rest of the evidence too."),
    ]
    if task.reprocessed:
        parts.append(
            f"The change derives the memory of {', '.join(task.reprocessed)} again from scratch (for example under a corrected "
            "speaker): removing the old claims that cite them is intended, not over-deletion; check the new claims strictly."
        )
    parts.append("Findings of the deterministic checks on this commit:")
    parts.append(wrap_untrusted(task.gate_text or "no findings", "gate findings"))
    parts.append(
        "Claims added or changed (page line: claim, then what it cites) and claims removed. Check each one against "
        "its cited lines and the lines around them:"
    )
    parts.append(wrap_untrusted(claims_to_check(task) or "(no claim added, changed or removed)", "claims to check"))
    parts.append("The diff (line numbers in comments refer to the new version of each file):")
    parts.append(wrap_untrusted(task.diff or "(empty diff)", f"diff {task.head}"))
    parts.append(
        "Check every claim listed above against its cited evidence and its surroundings with read_evidence; comment on each "
        "problem with the page line, the fault and the evidence line; then call verdict."
    )
    return "\n\n".join(parts)
