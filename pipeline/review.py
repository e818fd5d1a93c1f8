"""`kb review BRANCH`: the gate, then the Reviewer, on the exact head commit of a work branch.

The verdict and comments are recorded as a git note on that commit (pipeline.records), so an
approval is bound to what was reviewed, and signed with the reviewing process's key, so that a
note written by hand is not a review (docs/review.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from agents.llm import Usage
from agents.loop import stopped_run
from agents.protocols import GateFinding, ReviewTask
from agents.schemas import Comment, VerdictName
from ci.gate import GateReport, run_gate
from kb.clock import iso_utc
from kb.errors import ConflictError, KbError
from kb.repo import Repo, diff_trees
from kb.scopes import KNOWLEDGE_DIR, PAGE_FOLDERS, folder_for_scope, scope_for_path
from pipeline.backend import branch_backend
from pipeline.records import (
    KEPT_TRAILER,
    WITHDRAWN_TRAILER,
    ReviewRecord,
    ReviewSigner,
    add_review,
    parse_counts,
    proposal_info,
    trailer_ids,
)
from pipeline.roles import Agents, make_agents
from pipeline.runs import new_run_dir, save_transcript
from pipeline.workspace import WRITABLE, Workspace, open_workspace


@dataclass(frozen=True)
class ReviewResult:
    branch: str
    head: str
    base: str
    verdict: VerdictName
    summary: str
    comments: tuple[Comment, ...]
    gate: GateReport
    record: ReviewRecord
    usage: Usage


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


def review_task(
    repo: Repo,
    branch: str,
    base: pygit2.Commit,
    head: pygit2.Commit,
    gate: GateReport,
    evidence_ids: tuple[str, ...],
    reprocessed: tuple[str, ...] = (),
) -> ReviewTask:
    """What the Reviewer gets: the diff, the gate's findings and each changed page before and after."""
    diff = diff_trees(base.tree, head.tree)
    changed = tuple(sorted({p for d in diff.deltas for p in (d.old_file.path, d.new_file.path)}))

    def text_at(commit: pygit2.Commit, path: str) -> str | None:
        data = repo.read_at(commit, path) if path.startswith(PAGE_FOLDERS) else None
        return data.decode("utf-8", errors="replace") if data is not None else None

    findings = tuple(GateFinding(f.path, f.line, f.rule, f.message) for f in gate.errors)
    return ReviewTask(
        branch=branch,
        head=str(head.id),
        base=str(base.id),
        diff=diff.patch or "",
        changed_files=changed,
        evidence_ids=evidence_ids,
        gate_findings=findings,
        gate_text=gate.text() if findings else "",
        before={p: text_at(base, p) for p in changed},
        after={p: text_at(head, p) for p in changed},
        reprocessed=reprocessed,
    )


def review_branch(repo: Repo, branch: str, round_no: int = 1, agents: Agents | None = None) -> ReviewResult:
    """Review the head of ``branch`` and record the verdict (holding the repository lock)."""
    with repo.write_lock():
        return _review_branch(repo, branch, round_no, agents)


def _review_branch(repo: Repo, branch: str, round_no: int, agents: Agents | None) -> ReviewResult:
    agents = agents or make_agents(repo.config)
    signer = ReviewSigner(repo)  # before any model call: a review nobody can sign would not count
    workspace = clean_workspace(repo, branch)
    head = workspace.head()
    base = branch_base(repo, head)
    gate = run_gate(workspace.view, base)
    info = proposal_info(repo, head, base.id)
    evidence = trailer_ids(info, "Kb-Evidence")
    task = review_task(repo, branch, base, head, gate, evidence, trailer_ids(info, "Kb-Reprocess"))
    folders = tuple(sorted({folder_for_scope(s) for p in task.changed_files if (s := scope_for_path(p))})) or (KNOWLEDGE_DIR,)
    backend = branch_backend(workspace, base, folders)  # a change no one principal may read is refused here
    run_dir = new_run_dir(repo, "review")
    try:
        outcome = agents.reviewer.review(task, backend)
    except KbError as exc:
        partial = stopped_run(exc)
        if partial is not None:
            save_transcript(run_dir, "reviewer", partial.to_dict())
        raise
    save_transcript(
        run_dir,
        "reviewer",
        (outcome.transcript or {"agent": outcome.reviewer.model})
        | {"head": task.head, "verdict": outcome.verdict, "comments": [c.model_dump() for c in outcome.comments]},
    )
    record = ReviewRecord(
        branch=branch,
        head=task.head,
        base=task.base,
        round=round_no,
        verdict=outcome.verdict,
        reviewer_model=outcome.reviewer.model,
        reviewer_family=outcome.reviewer.family,
        proposer_model=info.get("Kb-Proposer-Model", "unknown"),
        proposer_family=info.get("Kb-Proposer-Family", "unknown"),
        at=iso_utc(),
        summary=outcome.summary,
        gate_errors=len(gate.errors),
        comments=[c.model_dump() for c in outcome.comments],
        usage=outcome.usage.to_dict(),
        withdrawn=parse_counts(info.get(WITHDRAWN_TRAILER, "")),
        kept_flagged=parse_counts(info.get(KEPT_TRAILER, "")),
    )
    record = signer.sign(record)
    add_review(repo, record)
    return ReviewResult(branch, task.head, task.base, outcome.verdict, outcome.summary, outcome.comments, gate, record, outcome.usage)
