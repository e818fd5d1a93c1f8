"""Every pull request, not only kb's: the ``kb/gate`` status on any head, and a path onto the
default branch for a person's evidence-only pull request (docs/github.md, "People's pull requests").

- ``gate_pull``: the gate on the pull request's exact head, judged by the default branch's
  config and rules (main is synced first; the head is fetched from ``refs/pull/N/head`` as data,
  never run), as a pull request (``run_gate(pull_request=True)``: an edit of the config, the
  signers or the workflows is refused whoever made it); its result is the ``kb/gate`` status. A
  pull request that only adds evidence (new items and lines appended to the ledger) and passes
  is approved by the reviewer identity: evidence is not knowledge, the gate's evidence rules
  (append-only, hashes, secrets, privacy) are its whole review, and the Proposer reads it after
  the merge like any evidence on the default branch.
- ``merge_evidence``: what ``kb pr merge`` does with such a pull request: once the required
  checks passed on the head, the reviewer's approval is of that head and the gate passes again
  there, merge it through the forge with the evidence ids in the commit's trailers. Nothing else
  a person opens is merged by kb: a person merges it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pygit2

from ci.gate import GateReport, run_gate
from kb.errors import ConflictError, ForgeError, FormatError, GateError, StaleApprovalError, UsageError
from kb.evidence import EVIDENCE_DIR, LEDGER_PATH, parse_ledger
from kb.repo import Repo
from pipeline.forge.authority import reviews_by
from pipeline.forge.base import Change, Forge, ReviewSubmission
from pipeline.forge.body import changed_paths
from pipeline.forge.changes import GATE_CONTEXT, MergeOutcome, is_kb_made, make_forge, make_remote, merge_change, sync_main, wait_for_checks
from pipeline.forge.remote import GitRemote
from pipeline.review import branch_base
from pipeline.workspace import BRANCH_PREFIX, open_workspace, remove_workspace

if TYPE_CHECKING:
    from kb.retrieval.build import BuildResult

EVIDENCE_APPROVAL = "Evidence only: the gate passed on this head (append-only ledger, hashes, secrets, privacy)."


@dataclass(frozen=True)
class GateOutcome:
    change: Change
    ok: bool
    errors: int
    evidence: tuple[str, ...]  # the evidence ids an evidence-only pull request adds; () otherwise
    approved: bool  # the reviewer approved it now (an evidence-only pull request that passed)


def pull_branch(change: Change) -> str:
    """The local work branch a pull request's head is fetched into, to be gated in a worktree."""
    return f"{BRANCH_PREFIX}pull-{change.number}"


def added_evidence(repo: Repo, base: pygit2.Commit, head: pygit2.Commit) -> tuple[str, ...] | None:
    """The evidence ids ``base..head`` adds when it only adds evidence (new files under
    ``evidence/`` and lines appended to the ledger); None when it touches anything else."""
    paths = changed_paths(base, head)
    if not paths or any(p != LEDGER_PATH and not p.startswith(EVIDENCE_DIR + "/") for p in paths):
        return None
    old, new = repo.read_at(base, LEDGER_PATH) or b"", repo.read_at(head, LEDGER_PATH) or b""
    if not new.startswith(old):
        return None
    try:
        entries = parse_ledger(new[len(old) :].decode("utf-8"))
    except (FormatError, UnicodeDecodeError):
        return None
    return tuple(e.id for e in entries) or None


def _gate_head(repo: Repo, remote: GitRemote | None, change: Change) -> tuple[pygit2.Commit, pygit2.Commit, GateReport]:
    """The pull request's head fetched (as data) into a worktree, gated against the synced default
    branch; the worktree and the local branch are removed afterwards."""
    sync_main(repo, remote, build=False)  # the config and rules that judge it are the default branch's
    branch = pull_branch(change)
    with repo.write_lock():
        remove_workspace(repo, branch)
        if remote is not None:
            remote.fetch_ref(f"refs/pull/{change.number}/head", f"refs/heads/{branch}")
        local = repo.git.branches.local.get(branch)
        if local is None or str(local.peel().id) != change.head:
            raise ConflictError(
                f"{change.ref} moved while it was being fetched (now not at {change.head[:10]})", hint="run the command again"
            )
        head = local.peel(pygit2.Commit)
        try:
            workspace = open_workspace(repo, branch, create=False)
            base = branch_base(repo, head)
            gate = run_gate(workspace.view, base, full=True, pull_request=True)
        finally:
            remove_workspace(repo, branch)
            repo.git.branches.local[branch].delete()
    return base, head, gate


def gate_pull(repo: Repo, ref: str, forge: Forge | None = None, approve: bool = True) -> GateOutcome:
    """The gate's status on any pull request; an evidence-only one that passes is approved unless
    ``approve`` is False (the workflow passes False for a fork's pull request: evidence from
    outside the repository's writers waits for a person)."""
    forge = forge or make_forge(repo)
    if not forge.capabilities.pull_requests:
        raise UsageError(
            "kb pr gate needs a forge with pull requests (forge.kind github)", hint="locally, run `kb check --gate --base main`"
        )
    change = forge.get_change(ref)
    if change.state != "open":
        raise ConflictError(f"{change.ref} is {change.state}", hint="only an open pull request is gated")
    remote = make_remote(repo, forge, "reviewer")
    base, head, gate = _gate_head(repo, remote, change)
    errors = len(gate.errors)
    forge.set_status(
        change.head, GATE_CONTEXT, "success" if gate.ok else "failure", "gate passed" if gate.ok else f"gate: {errors} error(s)"
    )
    evidence = added_evidence(repo, base, head) or ()
    approved = False
    login = repo.config.forge.reviewer_login
    if approve and gate.ok and evidence and login and change.author != login:
        mine = reviews_by(forge.reviews(change), login)
        if not (mine and mine[-1].state == "APPROVED" and mine[-1].commit == change.head):
            body = f"{EVIDENCE_APPROVAL}\n\nEvidence: {', '.join(evidence)}\n"
            forge.submit_review(change, ReviewSubmission("approve", body))
            approved = True
    return GateOutcome(change, gate.ok, errors, evidence, approved)


@dataclass(frozen=True)
class EvidenceMerge:
    change: Change
    commit: str
    evidence: tuple[str, ...]
    index: BuildResult | None = None


def merge_evidence(
    repo: Repo, change: Change, forge: Forge, build_index: bool = True, sleep: Callable[[float], None] = time.sleep
) -> EvidenceMerge:
    """Merge a person's pull request if it only adds evidence that passes the gate (else refused)."""
    remote = make_remote(repo, forge)
    base, head, gate = _gate_head(repo, remote, change)
    evidence = added_evidence(repo, base, head)
    if evidence is None:
        raise refuse_persons_pull(change)
    if not gate.ok:
        raise GateError(
            f"{change.ref} adds evidence that the gate refuses at {change.head[:10]} ({len(gate.errors)} error(s))",
            hint=f"`kb pr gate {change.number}` says why; fix the branch",
        )
    wait_for_checks(repo, forge, change, sleep)
    login = repo.config.forge.reviewer_login or ""
    mine = reviews_by(forge.reviews(change), login)
    if not (mine and mine[-1].state == "APPROVED"):
        raise GateError(f"{change.ref} has no approval by {login or 'the reviewer'}", hint=f"gate it first (`kb pr gate {change.number}`)")
    if mine[-1].commit != change.head:
        raise StaleApprovalError(
            f"{change.ref} moved to {change.head[:10]} after its approval of {mine[-1].commit[:10]}",
            hint=f"gate the new head (`kb pr gate {change.number}`), then merge",
        )
    title = f"Evidence from {change.ref}: {len(evidence)} item(s)"
    message = (
        f"Kb-Evidence: {', '.join(evidence)}\nKb-Intake: {change.ref} by {change.author}\nKb-Head: {change.head}\nKb-Base: {base.id}\n"
    )
    commit = forge.merge(change, change.head, title, message)
    return EvidenceMerge(change, commit, evidence, sync_main(repo, remote, build=build_index))


def merge_pull(
    repo: Repo, ref: str, forge: Forge | None = None, build_index: bool = True, sleep: Callable[[float], None] = time.sleep
) -> MergeOutcome:
    """``kb pr merge``: kb's own pull request as ``merge_change`` merges it, a person's only when it
    adds evidence that passed (``merge_evidence``)."""
    forge = forge or make_forge(repo)
    change = forge.get_change(ref) if forge.capabilities.pull_requests else None
    if change is not None and change.state == "open" and not is_kb_made(change, forge):
        done = merge_evidence(repo, change, forge, build_index, sleep)
        return MergeOutcome(done.change, done.commit, done.index)
    return merge_change(repo, ref, forge, build_index=build_index, sleep=sleep, known=change)


def refuse_persons_pull(change: Change) -> ForgeError:
    return ForgeError(
        f"{change.ref} ({change.branch}) was not made by kb and does not only add evidence: kb merges only its own pull requests and evidence",
        hint=f"a person reviews and merges it; `kb pr gate {change.number}` sets its kb/gate status",
    )
