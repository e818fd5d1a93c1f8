"""The Proposer: an agent that turns new evidence into a change on a work branch, through tools.

``propose_with_model`` builds the task message (the evidence to integrate, where it may write,
and for a revision the review it must answer) and runs the agent loop with the read tools, the
write tools and ``submit``. Its writes go through the backend, which confines them to the work
branch; the result is the run, whose ``result`` is the validated ``Submission``.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.backend import WriteBackend
from agents.llm import Budget, LiteLLMClient
from agents.loop import AgentRun, run_agent
from agents.prompts import PROPOSER_SYSTEM
from agents.schemas import Submission
from agents.tools import PROPOSER_TOOLS
from agents.untrusted import wrap_untrusted
from kb.errors import UsageError


@dataclass(frozen=True)
class EvidenceBrief:
    """One new evidence item as the Proposer first sees it; it reads the rest with read_evidence."""

    id: str
    scope: str  # system or user:<id>
    preview: str = ""  # the first stored lines, as stored
    kind: str = ""  # conversation, trajectory, document, tool-output
    lines: int | None = None


@dataclass(frozen=True)
class ProposalTask:
    evidence: tuple[EvidenceBrief, ...]
    write_prefixes: tuple[str, ...]  # e.g. ("users/alice/",) or ("knowledge/",)
    # For a revision: the review comments and gate findings of the previous round, as text.
    feedback: str | None = None
    current_diff: str | None = None  # for a revision: the change so far, against its base
    max_steps: int = 60
    max_invalid: int = 3


def propose_with_model(
    client: LiteLLMClient, backend: WriteBackend, task: ProposalTask, budget: Budget | None
) -> AgentRun:
    """Run the Proposer on ``task``; the returned run's ``result`` is its Submission.

    Raises AgentModelError or AgentBudgetError (carrying the partial run) when it stops without
    submitting, and UsageError for a task without evidence or without a writable folder.
    """
    if not task.evidence:
        raise UsageError("a proposal needs at least one evidence item")
    if not task.write_prefixes:
        raise UsageError("a proposal needs at least one folder it may write to")
    run = run_agent(
        client,
        PROPOSER_SYSTEM,
        proposal_prompt(task),
        PROPOSER_TOOLS,
        backend,
        max_steps=task.max_steps,
        max_invalid=task.max_invalid,
        budget=budget,
    )
    assert isinstance(run.result, Submission), "submit is the Proposer's only terminal tool"
    return run


def proposal_prompt(task: ProposalTask) -> str:
    """The user message of a Proposer run."""
    parts = [
        f"New evidence to integrate ({len(task.evidence)} item{'s' if len(task.evidence) != 1 else ''}):"
    ]
    for item in task.evidence:
        details = ", ".join(
            part
            for part in (
                f"scope {item.scope}",
                item.kind,
                f"{item.lines} lines" if item.lines is not None else "",
            )
            if part
        )
        parts.append(f"- {item.id} ({details})")
        if item.preview:
            parts.append(wrap_untrusted(item.preview, f"{item.id} preview"))
    folders = ", ".join(task.write_prefixes)
    parts.append(
        f"You may write only under: {folders}. A write anywhere else is refused. "
        "Facts from a user's evidence go under that user's folder only."
    )
    if task.feedback:
        parts.append(
            "This is a revision: your previous version of the change is already on the work branch. "
            "The review and the checks of that version said the following. Check each point "
            "against the evidence, fix what is right, and explain in your rationale what you "
            "did not change and why."
        )
        parts.append(wrap_untrusted(task.feedback, "review of the previous version"))
    if task.current_diff:
        parts.append("Your change so far, against its base:")
        parts.append(wrap_untrusted(task.current_diff, "current diff"))
    parts.append(
        "Read the evidence with read_evidence, search the existing pages, make the change, run "
        "run_checks until it is clean, then call submit."
    )
    return "\n\n".join(parts)
