"""The Proposer: an agent that turns new evidence into a change on a work branch, through tools.

``propose_with_model`` builds the task message (the evidence to integrate, where it may write,
and for a revision the review it must answer) and runs the agent loop with the read tools, the
write tools and ``submit``. Its writes go through the backend, which confines them to the work
branch; the result is the run, whose ``result`` is the validated ``Submission``.
"""

from __future__ import annotations

from agents.backend import WriteBackend
from agents.llm import Budget, LiteLLMClient
from agents.loop import AgentRun, run_agent
from agents.prompts import PROPOSER_SYSTEM
from agents.protocols import AgentIdentity, ProposalTask, ProposerOutcome
from agents.schemas import Submission
from agents.tools import PROPOSER_TOOLS
from agents.untrusted import wrap_untrusted
from kb.errors import UsageError

MAX_STEPS = 60
MAX_INVALID = 3


class ModelProposer:
    """The Proposer protocol on a configured model: one agent run per proposal or revision."""

    def __init__(self, client: LiteLLMClient, identity: AgentIdentity, budget: Budget | None) -> None:
        self.client = client
        self.identity = identity
        self.budget = budget

    def propose(self, task: ProposalTask, backend: WriteBackend) -> ProposerOutcome:
        run = propose_with_model(self.client, backend, task, self.budget)
        return ProposerOutcome(usage=run.usage, transcript=run.to_dict())


def propose_with_model(client: LiteLLMClient, backend: WriteBackend, task: ProposalTask, budget: Budget | None) -> AgentRun:
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
        max_steps=MAX_STEPS,
        max_invalid=MAX_INVALID,
        budget=budget,
    )
    assert isinstance(run.result, Submission), "submit is the Proposer's only terminal tool"
    return run


def proposal_prompt(task: ProposalTask) -> str:
    """The user message of a Proposer run."""
    parts = [f"New evidence to integrate ({len(task.evidence)} item{'s' if len(task.evidence) != 1 else ''}):"]
    for item in task.evidence:
        details = ", ".join(
            part
            for part in (
                f"scope {item.scope}",
                item.kind,
                f"{item.lines} lines" if item.lines else "",
                f"dated {item.date}" if item.date else "",
            )
            if part
        )
        parts.append(f"- {item.id} ({details})")
        preview = item.preview()
        if preview:
            parts.append(wrap_untrusted(preview, f"{item.id} preview"))
    for user, speakers in sorted(task.user_speakers.items()):
        if speakers:
            parts.append(f"In user {user}'s conversations, the user speaks as: {', '.join(speakers)}.")
    folders = ", ".join(task.write_prefixes)
    parts.append(
        f"You may write only under: {folders}. A write anywhere else is refused. "
        "Facts from a user's evidence go under that user's folder only."
    )
    if task.feedback is not None:
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
