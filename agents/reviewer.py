"""The Reviewer: a read-only agent that checks a change claim by claim against raw evidence.

``review_with_model`` gives the model the diff, the changed files, the gate findings, the
evidence ids and the Proposer's submission (all as untrusted data), with the read tools,
``comment`` and ``verdict``. It has no write tool. The returned run's ``result`` is the
validated ``Verdict`` and its ``comments`` the collected review comments; the pipeline binds
the verdict to ``task.head``, the commit that was reviewed.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.backend import ReadBackend
from agents.llm import Budget, LiteLLMClient
from agents.loop import AgentRun, run_agent
from agents.prompts import REVIEWER_SYSTEM
from agents.schemas import Submission, Verdict
from agents.tools import REVIEWER_TOOLS
from agents.untrusted import wrap_untrusted


@dataclass(frozen=True)
class ReviewTask:
    diff: str  # unified diff of the change against its base
    changed_files: tuple[str, ...]
    gate_findings: str  # the deterministic checks' findings as text; "" when clean
    evidence_ids: tuple[str, ...]  # the evidence the change is based on
    branch: str
    head: str  # the commit under review
    submission: Submission | None = None  # the Proposer's title and rationale
    max_steps: int = 60
    max_invalid: int = 3


def review_with_model(
    client: LiteLLMClient, backend: ReadBackend, task: ReviewTask, budget: Budget | None
) -> AgentRun:
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
        max_steps=task.max_steps,
        max_invalid=task.max_invalid,
        budget=budget,
    )
    assert isinstance(run.result, Verdict), "verdict is the Reviewer's only terminal tool"
    return run


def review_prompt(task: ReviewTask) -> str:
    """The user message of a Reviewer run."""
    files = "\n".join(f"- {path}" for path in task.changed_files) or "- (none)"
    evidence = ", ".join(task.evidence_ids) or "(none given)"
    parts = [
        f"Review the change on branch {task.branch} at commit {task.head}.",
        f"Changed files:\n{files}",
        (
            f"Evidence the change says it is based on: {evidence}. Read it, and search the rest "
            "of the evidence too."
        ),
    ]
    if task.submission is not None:
        parts.append("The Proposer's description of its change (a claim to check, not a fact):")
        parts.append(
            wrap_untrusted(
                f"title: {task.submission.title}\nrationale: {task.submission.rationale}\n"
                f"evidence: {', '.join(task.submission.evidence_ids)}",
                "proposer submission",
            )
        )
    parts.append("Findings of the deterministic checks on this commit:")
    parts.append(wrap_untrusted(task.gate_findings or "no findings", "gate findings"))
    parts.append("The diff (line numbers in comments refer to the new version of each file):")
    parts.append(wrap_untrusted(task.diff or "(empty diff)", f"diff {task.head}"))
    parts.append(
        "Check every added or changed claim against its cited evidence with read_evidence, "
        "comment on each problem, then call verdict."
    )
    return "\n\n".join(parts)
