"""`kb run`: propose, check, review, revise until approved or out of budget, then merge.

A branch that does not converge within the rounds (or the token/cost budget) is left unmerged
and marked ``needs-human`` (a git note on its head), never merged by default.

The loop is one; where its steps happen is the seam (``LoopSteps``): ``LocalSteps`` reviews and
merges on this machine (the default), ``pipeline.forge.run.ForgeSteps`` through pull requests
(``kb run --forge github``): each revision is pushed to the same pull request, an approval that a
push made stale is reviewed again, a change that conflicts with a moved default branch is
proposed again from the new base onto the same pull request, and a change that does not converge
leaves its pull request open, labelled ``needs-human``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from agents.llm import Usage, budget_for, check_budget
from agents.loop import stopped_run
from agents.protocols import ProposalTask, Withdrawal
from kb.errors import KbError, MergeConflictError, StaleApprovalError
from kb.repo import Repo
from pipeline.backend import branch_backend
from pipeline.forge.base import Change, Forge
from pipeline.forge.run import ForgeSteps
from pipeline.merge import MergeResult, merge_branch
from pipeline.propose import Proposal, branch_diff, close_open_branch, evidence_items, propose, select_evidence, trailers_for
from pipeline.records import count_trailers, set_status
from pipeline.review import ReviewResult, branch_base, clean_workspace, review_branch
from pipeline.roles import Agents, make_agents
from pipeline.runs import save_transcript
from pipeline.workspace import remove_workspace


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
    change: Change | None = None  # the pull request, on a forge that has them
    events: list[str] = field(default_factory=list)  # what the forge refused on the way (a stale approval, a conflict)


class LoopSteps(Protocol):
    """Where the loop's steps happen: on this machine, or through a forge's pull requests."""

    change: Change | None

    def start(self) -> None: ...

    def publish(self, branch: str) -> None:
        """Offer the branch's head for review (after the proposal and after each revision)."""
        ...

    def review(self, branch: str, round_no: int, agents: Agents) -> ReviewResult: ...

    def merge(self, branch: str, head: str) -> MergeResult:
        """Merge ``head``, the commit that was approved (StaleApprovalError if the branch moved)."""
        ...

    def leave_for_human(self, branch: str, head: str | None, reason: str, rounds: int) -> None: ...


class LocalSteps:
    """Today's loop: the review note, the local merge, the ``needs-human`` status note."""

    change: Change | None = None

    def __init__(self, repo: Repo) -> None:
        self.repo = repo

    def start(self) -> None:
        """Nothing to fetch: main is here."""

    def publish(self, branch: str) -> None:
        del branch  # the branch is where the Reviewer reads it

    def review(self, branch: str, round_no: int, agents: Agents) -> ReviewResult:
        return review_branch(self.repo, branch, round_no, agents)

    def merge(self, branch: str, head: str) -> MergeResult:
        del head  # the loop holds the repository lock: nothing moved the branch since its review
        return merge_branch(self.repo, branch, build_index=False)

    def leave_for_human(self, branch: str, head: str | None, reason: str, rounds: int) -> None:
        if head is not None:
            set_status(self.repo, head, RunStatus.NEEDS_HUMAN.value, {"branch": branch, "reason": reason, "rounds": rounds})


def loop_steps(repo: Repo, forge: Forge | None) -> LoopSteps:
    return ForgeSteps(repo, forge) if forge is not None and forge.capabilities.pull_requests else LocalSteps(repo)


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
    forge: Forge | None = None,
) -> RunResult:
    """The whole loop holds the repository lock (two runs never share evidence, branches or
    main), then rebuilds the index outside it. ``retract``: see ``pipeline.propose.propose``.
    ``forge``: where changes are reviewed and merged (None or the local forge: here)."""
    steps = loop_steps(repo, forge)
    with repo.write_lock():
        try:
            result = _run_locked(repo, ids, since, user_speakers, retract, steps)
        finally:
            close_open_branch(repo)  # merged, left for a human, or failed: no longer being written
    if build_index and result.merge is not None:
        from kb.retrieval.build import build_index as build

        result.merge = replace(result.merge, index=build(repo))
    return result


@dataclass
class _Run:
    """What one run carries from round to round."""

    repo: Repo
    agents: Agents
    steps: LoopSteps
    user_speakers: Mapping[str, tuple[str, ...]] | None
    retract: tuple[str, ...]
    result: RunResult


def _run_locked(
    repo: Repo,
    ids: list[str] | None,
    since: str | None,
    user_speakers: Mapping[str, tuple[str, ...]] | None,
    retract: tuple[str, ...],
    steps: LoopSteps,
) -> RunResult:
    steps.start()  # on a forge, main is synced first: the config, rules and prompts are the default branch's
    agents = make_agents(repo.config)
    proposal = propose(repo, ids, since, user_speakers, agents, for_run=True, retract=retract)
    result = RunResult(proposal)
    if proposal.head is None:
        result.reason = "no claims to propose"
        return result
    result.usage = result.usage + proposal.usage
    steps.publish(proposal.branch)
    run = _Run(repo, agents, steps, user_speakers, retract, result)
    max_rounds = repo.config.loop.max_rounds
    for round_no in range(1, max_rounds + 1):
        review = steps.review(result.proposal.branch, round_no, agents)
        result.reviews.append(review)
        result.usage = result.usage + review.usage
        if review.verdict == "approve":
            try:
                result.merge = steps.merge(result.proposal.branch, review.head)
            except StaleApprovalError as exc:  # a push after the review: review the new head
                result.events.append(f"round {round_no}: the approval of {review.head[:10]} is stale, refused: {exc.message}")
                result.reason = f"{exc.message}; no round left to review it again (loop.max_rounds {max_rounds})"
                continue
            except MergeConflictError as exc:  # the default branch moved into a conflict: propose again from it
                result.events.append(f"round {round_no}: {exc.message}; proposed again from the new base")
                result.reason = f"{exc.message}; no round left to review the new proposal (loop.max_rounds {max_rounds})"
                if not _propose_again(run):
                    break
                continue
            result.status = RunStatus.MERGED
            result.change = steps.change
            return result
        spent = check_budget(budget_for(repo.config.loop), result.usage, round_no)
        if spent:
            result.reason = spent if round_no < max_rounds else f"not approved after {max_rounds} round(s)"
            break
        if not _revise(run, review, round_no):
            break
    branch = result.proposal.branch
    head = str(clean_workspace(repo, branch).head().id) if branch in repo.git.branches.local else None
    steps.leave_for_human(branch, head, result.reason, len(result.reviews))
    result.status = RunStatus.NEEDS_HUMAN
    result.change = steps.change
    return result


def _revise(run: _Run, review: ReviewResult, round_no: int) -> bool:
    """The Proposer's answer to a review, committed and published; False (with the reason) when
    it failed or changed nothing."""
    repo, result, proposal = run.repo, run.result, run.result.proposal
    workspace = clean_workspace(repo, proposal.branch)
    base = branch_base(repo, workspace.head())
    entries = select_evidence(repo, list(proposal.evidence_ids))
    task = ProposalTask(
        evidence_items(repo, entries),
        workspace.allowed,
        dict(run.user_speakers or {}),
        feedback=feedback_text(review),
        comments=review.comments,
        current_diff=branch_diff(workspace, proposal.base),
    )
    before = str(workspace.head().id)
    backend = branch_backend(workspace, base)
    try:
        outcome = run.agents.proposer.propose(task, backend)
    except KbError as exc:
        partial = stopped_run(exc)
        if partial is not None:
            save_transcript(Path(proposal.run_dir), f"proposer-revision-{round_no}", partial.to_dict())
        result.reason = f"revision failed: {exc.message}"
        return False
    if outcome.transcript is not None:
        save_transcript(Path(proposal.run_dir), f"proposer-revision-{round_no}", outcome.transcript)
    result.usage = result.usage + outcome.usage
    withdrawal = outcome.withdrawal
    result.revisions.append(withdrawal)
    message, counts = revision_message(round_no, withdrawal)
    trailers = trailers_for(proposal.evidence_ids, proposal.base, run.agents.proposer.identity, round_no + 1, run.retract) | counts
    changed = str(workspace.head().id) != before  # a model's reads committed some writes already
    if workspace.commit(message, trailers, allow_empty=changed) is None:
        result.reason = no_change_reason(round_no, withdrawal)
        return False
    run.steps.publish(proposal.branch)
    return True


def _propose_again(run: _Run) -> bool:
    """The same evidence proposed again from the new main onto the same branch name (so, on a
    forge, the same pull request: the push replaces its head); False when nothing is left to write."""
    repo, result = run.repo, run.result
    old = result.proposal
    remove_workspace(repo, old.branch)
    repo.git.branches.local.delete(old.branch)
    again = propose(repo, list(old.evidence_ids), None, run.user_speakers, run.agents, for_run=True, retract=run.retract, branch=old.branch)
    result.usage = result.usage + again.usage
    if again.head is None:
        result.reason = f"proposed again from the new base: {'; '.join(again.notes) or 'nothing left to write'}"
        return False
    result.proposal = again
    run.steps.publish(again.branch)
    return True
