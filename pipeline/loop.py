"""`kb run`: propose, check, review, revise until approved or out of budget, then merge.

A branch that does not converge within the rounds (or the token/cost budget) is left unmerged
and marked ``needs-human`` (a git note on its head), never merged by default.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from agents.llm import Usage, budget_for, check_budget
from agents.loop import stopped_run
from agents.protocols import ProposalTask, Withdrawal
from kb.errors import KbError
from kb.repo import Repo
from pipeline.backend import branch_backend
from pipeline.merge import MergeResult, merge_branch
from pipeline.propose import Proposal, branch_diff, close_open_branch, evidence_items, propose, select_evidence, trailers_for
from pipeline.records import count_trailers, set_status
from pipeline.review import ReviewResult, branch_base, clean_workspace, review_branch
from pipeline.roles import make_agents
from pipeline.runs import save_transcript


class RunStatus(enum.Enum):
    MERGED = "merged"
    NEEDS_HUMAN = "needs-human"
    NOTHING_TO_DO = "nothing-to-do"


@dataclass
class RunResult:
    proposal: Proposal
    reviews: list[ReviewResult] = field(default_factory=list)
    merge: MergeResult | None = None
    status: RunStatus = RunStatus.NOTHING_TO_DO
    reason: str = ""
    usage: Usage = field(default_factory=Usage)
    revisions: list[Withdrawal | None] = field(default_factory=list)  # after each review that asked for changes


def feedback_text(review: ReviewResult) -> str:
    """What the Proposer must answer in its revision: gate findings and review comments."""
    lines = [f"Round {review.record.round} verdict: {review.verdict}. {review.summary}"]
    if review.gate.errors:
        lines.append("Gate findings (deterministic checks):")
        lines += [f"- {f.path}:{f.line} [{f.rule}] {f.message}" for f in review.gate.errors]
    reviewer_comments = [c for c in review.comments if c.kind != "gate"]
    if reviewer_comments:
        lines.append("Reviewer comments:")
        lines += [f"- {c.where()}" for c in reviewer_comments]
    return "\n".join(lines)


def revision_message(round_no: int, withdrawal: Withdrawal | None) -> tuple[str, dict[str, str]]:
    """The revision commit's message (the withdrawal notes, one per rule) and its count trailers."""
    message = f"Revise after review round {round_no}"
    if withdrawal is None:
        return message, {}
    notes = "\n".join(withdrawal.notes)
    return message + (f"\n\n{notes}" if notes else ""), count_trailers(withdrawal.withdrawn, withdrawal.kept)


def no_change_reason(round_no: int, withdrawal: Withdrawal | None) -> str:
    reason = f"round {round_no}: the Proposer made no change in response to the review"
    if withdrawal is not None and withdrawal.kept:
        kept = ", ".join(f"{rule} ({n})" for rule, n in sorted(withdrawal.kept.items()))
        reason += f"; it kept the verbatim claims flagged by {kept}: a rule that fires on most verbatim claims is a rule bug"
    return reason


def run_loop(
    repo: Repo,
    ids: list[str] | None = None,
    since: str | None = None,
    user_speakers: Mapping[str, tuple[str, ...]] | None = None,
    build_index: bool = True,
    retract: tuple[str, ...] = (),
) -> RunResult:
    """The whole loop holds the repository lock (two runs never share evidence, branches or
    main), then rebuilds the index outside it. ``retract``: see ``pipeline.propose.propose``."""
    with repo.write_lock():
        try:
            result = _run_locked(repo, ids, since, user_speakers, retract)
        finally:
            close_open_branch(repo)  # merged, left for a human, or failed: no longer being written
    if build_index and result.merge is not None:
        from kb.retrieval.build import build_index as build

        result.merge = replace(result.merge, index=build(repo))
    return result


def _run_locked(
    repo: Repo, ids: list[str] | None, since: str | None, user_speakers: Mapping[str, tuple[str, ...]] | None, retract: tuple[str, ...]
) -> RunResult:
    agents = make_agents(repo.config)
    budget = budget_for(repo.config.loop)
    proposal = propose(repo, ids, since, user_speakers, agents, for_run=True, retract=retract)
    result = RunResult(proposal)
    if proposal.head is None:
        result.reason = "no claims to propose"
        return result
    result.usage = result.usage + proposal.usage
    max_rounds = repo.config.loop.max_rounds
    for round_no in range(1, max_rounds + 1):
        review = review_branch(repo, proposal.branch, round_no, agents)
        result.reviews.append(review)
        result.usage = result.usage + review.usage
        if review.verdict == "approve":
            result.merge = merge_branch(repo, proposal.branch, build_index=False)
            result.status = RunStatus.MERGED
            return result
        spent = check_budget(budget, result.usage, round_no)
        if spent:
            result.reason = spent if round_no < max_rounds else f"not approved after {max_rounds} round(s)"
            break
        workspace = clean_workspace(repo, proposal.branch)
        base = branch_base(repo, workspace.head())
        entries = select_evidence(repo, list(proposal.evidence_ids))
        task = ProposalTask(
            evidence_items(repo, entries),
            workspace.allowed,
            dict(user_speakers or {}),
            feedback=feedback_text(review),
            comments=review.comments,
            current_diff=branch_diff(workspace, proposal.base),
        )
        before = str(workspace.head().id)
        backend = branch_backend(workspace, base)
        try:
            outcome = agents.proposer.propose(task, backend)
        except KbError as exc:
            partial = stopped_run(exc)
            if partial is not None:
                save_transcript(Path(proposal.run_dir), f"proposer-revision-{round_no}", partial.to_dict())
            result.reason = f"revision failed: {exc.message}"
            break
        if outcome.transcript is not None:
            save_transcript(Path(proposal.run_dir), f"proposer-revision-{round_no}", outcome.transcript)
        result.usage = result.usage + outcome.usage
        withdrawal = outcome.withdrawal
        result.revisions.append(withdrawal)
        message, counts = revision_message(round_no, withdrawal)
        trailers = trailers_for(proposal.evidence_ids, proposal.base, agents.proposer.identity, round_no + 1, retract) | counts
        changed = str(workspace.head().id) != before  # a model's reads committed some writes already
        if workspace.commit(message, trailers, allow_empty=changed) is None:
            result.reason = no_change_reason(round_no, withdrawal)
            break
    head = clean_workspace(repo, proposal.branch).head()
    set_status(
        repo, str(head.id), RunStatus.NEEDS_HUMAN.value, {"branch": proposal.branch, "reason": result.reason, "rounds": len(result.reviews)}
    )
    result.status = RunStatus.NEEDS_HUMAN
    return result
