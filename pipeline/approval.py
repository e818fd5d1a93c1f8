"""Whether a work branch's head is approved, in a way a note written by hand cannot fake.

``merge_branch`` asks an ``ApprovalAuthority`` for the review that approves the exact head. The one
built in, ``NotesAuthority``, decides from the review notes (``pipeline.records``) and refuses,
each with its own exit code (kb.errors, docs/review.md):

- a branch without the proposer's trailers (``ProvenanceError``, 16): with no proposer family, the
  cross-family rule would pass any reviewer;
- a branch that changes ``reviewers/allowed_signers`` (``SignatureError``, 14);
- a note that is not valid JSON or does not match the review record's schema
  (``MalformedReviewError``, 11);
- a note whose branch, head, base or proposer differ from the commit it annotates, or whose
  reviewer on the head is not this repository's Reviewer (``ReviewMismatchError``, 15);
- a review not signed by an allowed signer of main (``SignatureError``, 14);
- a head on which the latest verdict of a reviewer is request_changes (``ReviewBlockedError``, 13);
  the latest verdict per reviewer decides, by the signed time, not any approval in the note;
- no approval of the head by the Reviewer of another family, or only a stale one (``GateError``, 11);
- the checks failing on the head (``GateError``, 11);
- the built-in deterministic Reviewer, run again (it costs nothing), not approving
  (``DeterministicReviewError``, 17).

On a forge (issue 14), the authority is the pull request's review by the reviewer identity: a
``ForgeAuthority`` implementing ``ApprovalAuthority`` replaces the notes there; the deterministic
checks stay the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import pygit2

from agents.offline.reviewer import OfflineReviewer
from agents.protocols import AgentIdentity
from agents.reviewer import GATE
from ci.gate import run_gate
from kb.errors import (
    DeterministicReviewError,
    GateError,
    ProvenanceError,
    ReviewBlockedError,
    ReviewMismatchError,
    SignatureError,
)
from kb.repo import Repo
from kb.signing import SIGNERS_FILE, AllowedSigner, allowed_signers, verify
from pipeline.backend import branch_backend
from pipeline.records import ReviewRecord, proposal_info, reviews_of, trailer_ids
from pipeline.review import review_task
from pipeline.roles import identity_of
from pipeline.workspace import Workspace

PROVENANCE_TRAILERS = ("Kb-Proposer-Model", "Kb-Proposer-Family")


class ApprovalAuthority(Protocol):
    """Who says a head may merge. Returns the approving review; raises a GateError otherwise."""

    def approval(self, repo: Repo, workspace: Workspace, branch: str, base: pygit2.Commit, info: dict[str, str]) -> ReviewRecord: ...


def required_reviewer(repo: Repo) -> AgentIdentity:
    """The Reviewer of this repository (main's config): the configured model, or the offline one."""
    role = repo.config.models.reviewer
    return OfflineReviewer.identity if role is None else identity_of(role)


def check_provenance(branch: str, info: dict[str, str]) -> None:
    missing = [name for name in PROVENANCE_TRAILERS if not info.get(name, "").strip() or info[name].strip() == "unknown"]
    if missing:
        raise ProvenanceError(f"{branch} has no proposer provenance: no commit on it carries {' and '.join(missing)}")


def check_trust_files(repo: Repo, branch: str, head: pygit2.Commit, base: pygit2.Commit) -> None:
    if repo.read_at(head, SIGNERS_FILE) != repo.read_at(base, SIGNERS_FILE):
        raise SignatureError(
            f"{branch} changes {SIGNERS_FILE}; who may sign reviews changes only on main",
            hint=f"drop the change to {SIGNERS_FILE} from the branch (`kb keygen` on main allows a key)",
        )


def branch_commits(repo: Repo, head: pygit2.Commit, base: pygit2.Commit) -> list[pygit2.Commit]:
    """The commits of the branch, newest first, down to (not including) ``base``."""
    out = []
    for commit in repo.git.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL):
        if commit.id == base.id:
            break
        out.append(commit)
    return out


def check_fields(record: ReviewRecord, commit: str, branch: str, base: str, info: dict[str, str]) -> None:
    """The note's fields against the commit it annotates: a note copied or edited does not match."""
    expected = {
        "head": commit,
        "branch": branch,
        "base": base,
        "proposer_model": info.get("Kb-Proposer-Model", ""),
        "proposer_family": info.get("Kb-Proposer-Family", ""),
    }
    for name, value in expected.items():
        found = getattr(record, name)
        if found != value:
            raise ReviewMismatchError(
                f"the review note on {commit[:10]} says {name} {found[:40]!r}, but the commit it annotates has {value[:40]!r}",
                hint=f"a note copied from another commit or edited is not a review: remove it and run `kb review {branch}`",
            )


def check_signature(record: ReviewRecord, commit: str, signers: list[AllowedSigner]) -> None:
    if not record.signature:
        raise SignatureError(
            f"the {record.verdict} of {commit[:10]} by {record.reviewer_model} is not signed",
            hint=f"only `kb review` writes reviews; run it on {record.branch}",
        )
    try:
        key = verify(record.signature, record.payload())
    except SignatureError as exc:
        raise SignatureError(f"the {record.verdict} of {commit[:10]} by {record.reviewer_model}: {exc.message}") from None
    if not any(s.allows(record.signer, key) for s in signers):
        raise SignatureError(
            f"the {record.verdict} of {commit[:10]} is signed by {record.signer!r} with a key that is not an allowed signer in {SIGNERS_FILE}",
            hint=f"review with an allowed key (`kb keygen` on main allows this machine's), then run `kb review {record.branch}`",
        )


def verified_reviews(
    repo: Repo, branch: str, commits: Iterable[pygit2.Commit], base: pygit2.Commit, signers: list[AllowedSigner]
) -> dict[str, list[ReviewRecord]]:
    """Every review of every commit of the branch, validated, matched to its commit and verified."""
    out: dict[str, list[ReviewRecord]] = {}
    for commit in commits:
        records = reviews_of(repo, str(commit.id))
        if records:
            info = proposal_info(repo, commit, base.id)
            for record in records:
                check_fields(record, str(commit.id), branch, str(base.id), info)
                check_signature(record, str(commit.id), signers)
            out[str(commit.id)] = records
    return out


def latest_verdicts(records: list[ReviewRecord]) -> dict[tuple[str, str], ReviewRecord]:
    """Each reviewer's latest review (by its signed time; the note's order breaks ties)."""
    latest: dict[tuple[str, str], ReviewRecord] = {}
    for record in sorted(records, key=lambda r: r.when()):  # stable: equal times keep the note's order
        latest[(record.reviewer_model, record.reviewer_family)] = record
    return latest


def decide(records: list[ReviewRecord], head: str, required: AgentIdentity, proposer_family: str, allow_same: bool) -> ReviewRecord | None:
    """The approving review of ``head`` by the required Reviewer, or None when there is none."""
    allowed = {(required.model, required.family), (GATE.model, GATE.family)}
    for record in records:
        if (record.reviewer_model, record.reviewer_family) not in allowed or (
            record.reviewer_model == GATE.model and record.verdict != "request_changes"
        ):
            raise ReviewMismatchError(
                f"the {record.verdict} of {head[:10]} names reviewer {record.reviewer_model} ({record.reviewer_family}), "
                f"but this repository's Reviewer is {required.model} ({required.family})",
                hint="review with the configured Reviewer (`kb review BRANCH`), or change models.reviewer in kb.config.yaml on main",
            )
    latest = latest_verdicts(records)
    blocking = [r for r in latest.values() if r.verdict == "request_changes"]
    if blocking:
        last = blocking[-1]
        raise ReviewBlockedError(
            f"the latest verdict of {last.reviewer_model} on {head[:10]} is request_changes ({last.at}); an earlier approval does not count",
            hint=f"revise the branch and run `kb review {last.branch}` again",
        )
    approval = latest.get((required.model, required.family))
    if approval is None:
        return None
    if not allow_same and approval.reviewer_family.lower() == proposer_family.lower():
        raise GateError(
            f"the approval of {head[:10]} is by a {approval.reviewer_family} reviewer, the proposer's own family",
            hint="review with a model of another family, or set models.allow_same_family: true",
        )
    return approval


def no_approval(branch: str, head: str, by_commit: dict[str, list[ReviewRecord]]) -> GateError:
    for commit, records in by_commit.items():
        if commit != head and any(r.verdict == "approve" for r in records):
            return GateError(
                f"stale approval: {commit[:10]} was approved, but the branch moved to {head[:10]} after the review",
                hint=f"run `kb review {branch}` again",
            )
    on_head = by_commit.get(head, [])
    last = on_head[-1].verdict if on_head else None
    return GateError(
        f"no approval for {head[:10]}" + (f" (last verdict: {last})" if last else " (never reviewed)"),
        hint=f"run `kb review {branch}` first",
    )


def recheck(repo: Repo, workspace: Workspace, branch: str, base: pygit2.Commit, info: dict[str, str]) -> None:
    """The gate and the deterministic Reviewer on the head, again: whatever the notes say."""
    head = workspace.head()
    gate = run_gate(workspace.view, base)
    if not gate.ok:
        first = gate.errors[0]
        raise GateError(
            f"checks fail on {branch}: {len(gate.errors)} error(s), first {first.path}:{first.line} [{first.rule}] {first.message}",
            hint=f"fix the branch and review it again (`kb check` in {workspace.root})",
        )
    evidence = trailer_ids(info, "Kb-Evidence")
    task = review_task(repo, branch, base, head, gate, evidence, trailer_ids(info, "Kb-Reprocess"))
    outcome = OfflineReviewer().review(task, branch_backend(workspace, base))
    if outcome.verdict != "approve":
        problem = outcome.comments[0]
        raise DeterministicReviewError(
            f"the deterministic Reviewer does not approve {str(head.id)[:10]}: {problem.path}:{problem.line}: {problem.message}",
            hint=f"fix the branch (`kb review {branch}` lists every problem); no approval overrides it",
        )


class NotesAuthority:
    """The local authority: signed review notes on the exact head, checked against main."""

    def approval(self, repo: Repo, workspace: Workspace, branch: str, base: pygit2.Commit, info: dict[str, str]) -> ReviewRecord:
        head = workspace.head()
        check_provenance(branch, info)
        check_trust_files(repo, branch, head, base)
        signers = allowed_signers(repo)
        by_commit = verified_reviews(repo, branch, branch_commits(repo, head, base), base, signers)
        approval = decide(
            by_commit.get(str(head.id), []),
            str(head.id),
            required_reviewer(repo),
            info["Kb-Proposer-Family"],
            repo.config.models.allow_same_family,
        )
        if approval is None:
            raise no_approval(branch, str(head.id), by_commit)
        recheck(repo, workspace, branch, base, info)
        return approval


def approved_review(repo: Repo, workspace: Workspace, branch: str, base: pygit2.Commit, info: dict[str, str]) -> ReviewRecord:
    """The review that approves the branch head for merging; a GateError (or subclass) says why not."""
    authority: ApprovalAuthority = NotesAuthority()
    return authority.approval(repo, workspace, branch, base, info)
