"""`kb run`: propose, check, review, revise until approved or out of budget, then merge.

A branch that does not converge within the rounds (or the token/cost budget) is left unmerged
and marked ``needs-human`` (a git note on its head), never merged by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.errors import KbError
from kb.repo import Repo
from pipeline.merge import MergeResult, merge_branch
from pipeline.propose import Proposal, propose, select_evidence, trailers_for
from pipeline.records import set_status
from pipeline.review import ReviewResult, clean_workspace, review_branch
from agents.offline.revision import withdraw_flagged
from pipeline.roles import resolve_roles


@dataclass
class RunResult:
    proposal: Proposal
    reviews: list[ReviewResult] = field(default_factory=list)
    merge: MergeResult | None = None
    status: str = "nothing-to-do"  # merged | needs-human | nothing-to-do
    reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict)


def _add_usage(total: dict[str, Any], usage: dict[str, Any]) -> None:
    for key in ("prompt_tokens", "completion_tokens", "cost_usd", "calls"):
        total[key] = total.get(key, 0) + (usage.get(key) or 0)


def _over_budget(repo: Repo, usage: dict[str, Any]) -> str | None:
    loop = repo.config.loop
    tokens = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    if tokens >= loop.max_tokens:
        return f"token budget spent ({tokens} >= {loop.max_tokens})"
    if usage.get("cost_usd", 0) >= loop.max_cost_usd:
        return f"cost budget spent (${usage['cost_usd']:.4f} >= ${loop.max_cost_usd})"
    return None


def feedback_text(review: ReviewResult) -> str:
    """What the Proposer must answer in its revision: gate findings and review comments."""
    lines = [f"Round {review.record.round} verdict: {review.verdict}. {review.summary}"]
    if review.gate.errors:
        lines.append("Gate findings (deterministic checks):")
        lines += [f"- {f.path}:{f.line} [{f.rule}] {f.message}" for f in review.gate.errors]
    if review.comments:
        lines.append("Reviewer comments:")
        lines += [f"- {c.path}:{c.line}: {c.message}" + (f" (evidence {c.evidence})" if c.evidence else "") for c in review.comments]
    return "\n".join(lines)


def run_loop(
    repo: Repo,
    ids: list[str] | None = None,
    since: str | None = None,
    names: dict[str, str] | None = None,
    speakers: dict[str, set[str]] | None = None,
    build_index: bool = True,
    model_proposer=None,  # noqa: ANN001 - injectable for tests
    model_reviewer=None,  # noqa: ANN001
) -> RunResult:
    roles = resolve_roles(repo.config)
    proposal = propose(repo, ids, since, names, speakers, model_proposer=model_proposer)
    result = RunResult(proposal)
    if proposal.head is None:
        result.reason = "no claims to propose"
        return result
    _add_usage(result.usage, proposal.usage)
    max_rounds = repo.config.loop.max_rounds
    for round_no in range(1, max_rounds + 1):
        review = review_branch(repo, proposal.branch, round_no, model_reviewer=model_reviewer)
        result.reviews.append(review)
        _add_usage(result.usage, review.usage)
        if review.verdict == "approve":
            result.merge = merge_branch(repo, proposal.branch, build_index=build_index)
            result.status = "merged"
            return result
        reason = _over_budget(repo, result.usage)
        if round_no == max_rounds or reason:
            result.reason = reason or f"not approved after {max_rounds} round(s)"
            break
        workspace = clean_workspace(repo, proposal.branch)
        entries_trailers = trailers_for([], proposal.base, roles.proposer, round_no + 1)
        entries_trailers["Kb-Evidence"] = ", ".join(proposal.evidence_ids)
        if roles.proposer.offline:
            withdraw_flagged(workspace, review.comments)
        else:
            revise = model_proposer
            if revise is None:
                from pipeline.model_agents import run_model_proposer as revise
            before = str(workspace.head().id)
            try:
                usage = revise(workspace, select_evidence(repo, list(proposal.evidence_ids)), roles.proposer, Path(proposal.run_dir), feedback=feedback_text(review), current_diff=None)
            except KbError as exc:
                result.reason = f"revision failed: {exc.message}"
                break
            _add_usage(result.usage, usage or {})
            if str(workspace.head().id) != before:
                workspace.commit(f"Revise after review round {round_no}", entries_trailers, allow_empty=True)
                continue
        if workspace.commit(f"Revise after review round {round_no}", entries_trailers) is None:
            result.reason = f"round {round_no}: the Proposer made no change in response to the review"
            break
    head = clean_workspace(repo, proposal.branch).head()
    set_status(repo, str(head.id), "needs-human", {"branch": proposal.branch, "reason": result.reason, "rounds": len(result.reviews)})
    result.status = "needs-human"
    return result
