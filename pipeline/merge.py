"""`kb merge BRANCH`: the merge gate, the merge commit with its audit trail, the index rebuild.

Refuses a branch that touches anything a change may not (judged from the trees here, not from a
check report: ``ci.rules.scope``), and unless the checks pass on the branch head and a Reviewer of
another family (than the Proposer) approved that exact commit in a signed review that matches it
(``pipeline.approval``, which runs the gate).
The merge commit's trailers and ``reviews/<...>.json`` record evidence, base, models, families,
rounds and verdicts, so git alone tells the story.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import pygit2

from agents.protocols import AgentIdentity
from ci.rules import scope
from kb.clock import iso_utc, utc_now
from kb.errors import ConflictError, GateError, SignatureError
from kb.progress import report
from kb.repo import FILEMODE_BLOB, Repo
from kb.signing import SIGNERS_FILE
from pipeline.approval import approved_review, check_provenance
from pipeline.records import ReviewRecord, parse_trailers, proposal_info, reviews_of
from pipeline.review import branch_base, clean_workspace
from pipeline.workspace import WRITABLE, worktree_name

if TYPE_CHECKING:
    from kb.retrieval.build import BuildResult


@dataclass(frozen=True)
class MergeResult:
    branch: str
    commit: str
    record_path: str
    index: BuildResult | None  # None with --no-index
    already: bool = False  # merged before (by an earlier run of this merge); nothing done now


@dataclass(frozen=True)
class MergeRecord:
    """What ``reviews/<year>/<slug>.json`` holds; the merge commit's trailers repeat it."""

    branch: str
    head: str
    base: str
    evidence: list[str]
    proposer: AgentIdentity
    reviewer: AgentIdentity
    rounds: int
    reviews: list[ReviewRecord]  # every review on the branch, by round then time
    merged_at: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def message(self, record_path: str) -> str:
        verdicts = ", ".join(f"r{r.round}:{r.verdict}" for r in self.reviews)
        return (
            f"Merge {self.branch}\n\n"
            f"Kb-Evidence: {', '.join(self.evidence)}\n"
            f"Kb-Base: {self.base}\n"
            f"Kb-Head: {self.head}\n"
            f"Kb-Proposer-Model: {self.proposer.model}\n"
            f"Kb-Proposer-Family: {self.proposer.family}\n"
            f"Kb-Reviewer-Model: {self.reviewer.model}\n"
            f"Kb-Reviewer-Family: {self.reviewer.family}\n"
            f"Kb-Rounds: {self.rounds}\n"
            f"Kb-Verdicts: {verdicts}\n"
            f"Kb-Review-Record: {record_path}\n"
        )


def _branch_reviews(repo: Repo, head: pygit2.Commit, base: pygit2.Commit) -> list[ReviewRecord]:
    """Every review of every commit on the branch, by round then time."""
    reviews: list[ReviewRecord] = []
    for commit in repo.git.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL):
        if commit.id == base.id:
            break
        reviews.extend(reviews_of(repo, str(commit.id)))
    return sorted(reviews, key=lambda r: (r.round, r.at))


def _merge_record(
    repo: Repo, branch: str, head: pygit2.Commit, base: pygit2.Commit, info: dict[str, str], approval: ReviewRecord, now: dt.datetime
) -> MergeRecord:
    reviews = _branch_reviews(repo, head, base)
    return MergeRecord(
        branch=branch,
        head=str(head.id),
        base=str(base.id),
        evidence=[e.strip() for e in info.get("Kb-Evidence", "").split(",") if e.strip()],
        proposer=AgentIdentity(info.get("Kb-Proposer-Model", "unknown"), info.get("Kb-Proposer-Family", "unknown")),
        reviewer=AgentIdentity(approval.reviewer_model, approval.reviewer_family),
        rounds=max((r.round for r in reviews), default=1),
        reviews=reviews,
        merged_at=iso_utc(now),
    )


def check_touched(repo: Repo, branch: str, base: pygit2.Commit, head: pygit2.Commit) -> None:
    """What the branch touched, judged again from the base and head trees (``ci.rules.scope``),
    whatever a check report or a review said: a change to the signers is a SignatureError (14),
    any other path the change may not touch a GateError (11)."""
    errors = [f for f in scope.check_trees(repo, base, head, assume_kb=True) if f.severity == "error"]
    if not errors:
        return
    signers = [f for f in errors if f.path == SIGNERS_FILE]
    if signers:
        raise SignatureError(
            f"{branch} changes {SIGNERS_FILE}; who may sign reviews changes only on main",
            hint=f"drop the change to {SIGNERS_FILE} from the branch (`kb keygen` on main allows a key)",
        )
    first = errors[0]
    more = f" and {len(errors) - 1} more path(s)" if len(errors) > 1 else ""
    raise GateError(f"{branch} touches what it may not{more}: {first.path} [{first.rule}] {first.message}", hint=first.hint)


def _merge_index(repo: Repo, branch: str, main: pygit2.Commit, head: pygit2.Commit) -> pygit2.Index:
    """The merged index of main and the branch head; refuses a dirty main or a conflict."""
    dirty = repo.dirty_paths(WRITABLE)
    if dirty:
        raise ConflictError(f"the main working tree has uncommitted changes ({dirty[0]})", hint="commit or discard them before merging")
    index = repo.git.merge_commits(main, head)
    if index.conflicts:
        conflicted = sorted({(c[0] or c[1] or c[2]).path for c in index.conflicts})
        raise ConflictError(
            f"{branch} conflicts with {repo.git.head.shorthand} in {', '.join(conflicted[:3])}", hint="propose again from the current main"
        )
    return index


def _commit_merge(
    repo: Repo, branch: str, index: pygit2.Index, record: MergeRecord, record_path: str, parents: list[pygit2.Oid]
) -> pygit2.Oid:
    """Write the record into the merged index, commit it, move main (and its working tree) there
    and drop the work branch: journaled by ``Repo.move_head``, so a kill is finished by the next
    writer."""
    data = json.dumps(record.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    index.add(pygit2.IndexEntry(record_path, repo.git.create_blob(data.encode("utf-8")), FILEMODE_BLOB))
    tree = index.write_tree(repo.git)
    sig = repo.signature()
    commit_id = repo.git.create_commit(None, sig, sig, record.message(record_path), tree, parents)
    repo.move_head(commit_id, drop_branch=branch, drop_worktree=worktree_name(branch))
    return commit_id


def merged_as(repo: Repo, branch: str) -> MergeResult | None:
    """The merge of ``branch`` on main's first-parent line, if it was merged already (a rerun of
    a ``kb merge`` whose first run was killed after moving main)."""
    commit = repo.head()
    while commit is not None:
        if commit.message.startswith(f"Merge {branch}\n"):
            record = parse_trailers(commit.message).get("Kb-Review-Record", "")
            return MergeResult(branch, str(commit.id), record, None, already=True)
        commit = commit.parents[0] if commit.parents else None
    return None


def merge_branch(repo: Repo, branch: str, build_index: bool = True, now: dt.datetime | None = None) -> MergeResult:
    """Merge ``branch`` holding the repository lock, then rebuild the index (outside the lock, so
    other writers need not wait for the embedder)."""
    with repo.write_lock():
        result = _merge_locked(repo, branch, now)
    if build_index:
        from kb.retrieval.build import build_index as build

        result = replace(result, index=build(repo, progress=report))
    return result


def _merge_locked(repo: Repo, branch: str, now: dt.datetime | None) -> MergeResult:
    if branch not in repo.git.branches.local:
        done = merged_as(repo, branch)
        if done is not None:
            return done
    workspace = clean_workspace(repo, branch)
    head = workspace.head()
    base = branch_base(repo, head)
    info = proposal_info(repo, head, base.id)
    check_provenance(branch, info)
    check_touched(repo, branch, base, head)
    approval = approved_review(repo, workspace, branch, base, info)  # runs the gate on the head, once
    main = repo.head()
    assert main is not None
    index = _merge_index(repo, branch, main, head)
    now = now or utc_now()
    record_path = f"reviews/{now:%Y}/{branch.removeprefix('kb/')}.json"
    record = _merge_record(repo, branch, head, base, info, approval, now)
    commit_id = _commit_merge(repo, branch, index, record, record_path, [main.id, head.id])
    return MergeResult(branch, str(commit_id), record_path, None)
