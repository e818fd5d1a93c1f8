"""`kb review BRANCH`: the gate, then the Reviewer, on the exact head commit of a work branch.

The verdict and comments are recorded as a git note on that commit (pipeline.records), so an
approval is bound to what was reviewed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pygit2

from agents.schemas import Comment
from kb.errors import ConflictError
from kb.repo import Repo
from ci.gate import GateReport, run_gate
from agents.offline.reviewer import review_offline
from pipeline.records import ReviewRecord, add_review, proposal_info
from pipeline.roles import Role, resolve_roles
from pipeline.runs import new_run_dir, save_transcript
from pipeline.workspace import WRITABLE, Workspace, open_workspace


@dataclass(frozen=True)
class ReviewResult:
    branch: str
    head: str
    base: str
    verdict: str
    summary: str
    comments: list[Comment]
    gate: GateReport
    record: ReviewRecord
    usage: dict[str, Any] = field(default_factory=dict)


def branch_base(repo: Repo, head: pygit2.Commit) -> pygit2.Commit:
    main = repo.head()
    assert main is not None
    base_id = repo.git.merge_base(main.id, head.id)
    return repo.git[base_id].peel(pygit2.Commit)


def clean_workspace(repo: Repo, branch: str) -> Workspace:
    workspace = open_workspace(repo, branch, create=False)
    dirty = workspace.view.dirty_paths(WRITABLE)
    if dirty:
        raise ConflictError(f"{branch} has uncommitted changes ({dirty[0]})", hint="commit or discard them in the branch's worktree first")
    return workspace


def review_branch(repo: Repo, branch: str, round_no: int = 1, model_reviewer=None) -> ReviewResult:  # noqa: ANN001
    roles = resolve_roles(repo.config)
    workspace = clean_workspace(repo, branch)
    head = workspace.head()
    base = branch_base(repo, head)
    gate = run_gate(workspace.view, base)
    info = proposal_info(repo, head, base.id)
    run_dir = new_run_dir(repo, "review")
    usage: dict[str, Any] = {}
    reviewer = roles.reviewer
    if not gate.ok and not reviewer.offline:
        # The gate's findings go back to the Proposer first: no model tokens on typos.
        verdict, summary = "request_changes", f"Deterministic gate: {len(gate.errors)} error(s); the model reviewer was not called."
        comments = [Comment(path=f.path, line=f.line, message=f"[{f.rule}] {f.message}") for f in gate.errors]
        reviewer = Role("kb-gate/deterministic", "kb-deterministic", None)
        save_transcript(run_dir, "reviewer", {"agent": reviewer.model, "head": str(head.id), "gate": gate.text(), "verdict": verdict})
    elif reviewer.offline:
        outcome = review_offline(repo, base, head, gate)
        verdict, summary, comments = outcome.verdict, outcome.summary, outcome.comments
        save_transcript(run_dir, "reviewer", {"agent": roles.reviewer.model, "head": str(head.id), "gate": gate.text(), "verdict": verdict, "comments": [c.model_dump() for c in comments]})
    else:
        if model_reviewer is None:
            from pipeline.model_agents import run_model_reviewer as model_reviewer
        verdict, summary, comments, usage = model_reviewer(repo, workspace, base, head, gate, info, roles.reviewer, run_dir)
    record = ReviewRecord(
        branch=branch,
        head=str(head.id),
        base=str(base.id),
        round=round_no,
        verdict=verdict,
        reviewer_model=reviewer.model,
        reviewer_family=reviewer.family,
        proposer_model=info.get("Kb-Proposer-Model", "unknown"),
        proposer_family=info.get("Kb-Proposer-Family", "unknown"),
        at=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        summary=summary,
        gate_errors=len(gate.errors),
        comments=[c.model_dump() for c in comments],
        usage=usage,
    )
    add_review(repo, record)
    return ReviewResult(branch, str(head.id), str(base.id), verdict, summary, comments, gate, record, usage)
