"""The jobs behind ``kb pr open|review|merge|list|status`` and ``kb sync``, on any forge.

- ``open_change``: push the work branch and open (or update) its change, with a body a person can
  review from (``pipeline.forge.body``), scope labels and the gate's status. Idempotent: a second
  run updates the same pull request; a pull request a person closed is not reopened for the same
  evidence; at most ``forge.max_open_prs`` kb pull requests are open at once.
- ``review_change``: the gate and the Reviewer on the change's exact head (``kb review``, so the
  signed note is kept in git too), then one forge review: approve or request changes, line
  comments anchored inside the diff's hunks, the rest in the body with the signed record. On a
  re-review it answers in its own open threads whose comment still applies (a reply, not the same
  comment again) and resolves those whose comment it no longer makes (``plan_review``).
- ``merge_change``: only when the required checks passed on the head (waiting up to
  ``forge.checks_wait_s`` for pending ones, then "waiting for checks": ``ChecksPendingError``, its
  own exit code; a failed one is refused at once) and the forge's authority
  finds an approval of that exact head by the Reviewer of another family; the expected head goes
  with the merge, so a push after the review is refused (GitHub answers 409). The merge commit
  carries the trailers of a local merge and the merge record. A change that no longer merges with
  the moved default branch is refused (``MergeConflictError``: ``kb run`` proposes it again from
  the new base); given the head that was reviewed, a change that moved since is refused
  (``StaleApprovalError``).
- ``sync``: fetch the default branch, move main to it (fast-forward only), rebuild the index.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pygit2

from agents.protocols import AgentIdentity
from agents.schemas import Comment
from ci.gate import run_gate
from ci.rules.conservation import RECORD_REF
from kb.clock import iso_utc, utc_now
from kb.errors import ConflictError, ForgeError, GateError, MergeConflictError, NotFoundError, StaleApprovalError, UsageError
from kb.repo import Repo
from pipeline.approval import check_provenance
from pipeline.forge.authority import record_in, record_marker, reviews_by
from pipeline.forge.base import (
    KB_LABEL,
    Change,
    ChecksPendingError,
    ChecksState,
    Forge,
    Hunk,
    LineComment,
    ReviewSubmission,
    ReviewThread,
    bare_login,
)
from pipeline.forge.body import inputs_key, inputs_of, labels_for, render_body, title_for
from pipeline.forge.remote import GitRemote
from pipeline.merge import MergeRecord
from pipeline.records import proposal_info
from pipeline.review import ReviewResult, branch_base, clean_workspace, review_branch
from pipeline.roles import Agents
from pipeline.workspace import BRANCH_PREFIX, remove_workspace, worktree_name

if TYPE_CHECKING:
    from kb.retrieval.build import BuildResult

GATE_CONTEXT = "kb/gate"
CHECKS_POLL_S = 10.0  # how often a merge reads the required checks while it waits for them


def make_forge(repo: Repo, kind: str | None = None, env: Mapping[str, str] | None = None) -> Forge:
    """The forge ``kind`` names (default ``forge.kind`` of main's kb.config.yaml), from the table of
    forges (``pipeline.forge.kinds``)."""
    from pipeline.forge.kinds import FORGES

    name = kind or repo.config.forge.kind
    forge_class = FORGES.get(name)
    if forge_class is None:
        raise UsageError(f"unknown forge {name!r}", hint=f"use one of: {', '.join(FORGES)} (e.g. --forge {next(iter(FORGES))})")
    return forge_class.for_repo(repo, env)


def make_remote(repo: Repo, forge: Forge, role: str = "proposer") -> GitRemote | None:
    """The git remote of a forge that has one (None locally); pushes carry the role's token."""
    return forge.remote(repo.root, "proposer" if role == "proposer" else "reviewer")


# ---- open --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenResult:
    change: Change
    action: str  # opened | updated
    gate_ok: bool
    gate_errors: int


def is_kb_made(change: Change, forge: Forge) -> bool:
    return change.branch.startswith(BRANCH_PREFIX) and (not forge.capabilities.labels or KB_LABEL in change.labels)


def _kb_made(change: Change, forge: Forge) -> None:
    if not is_kb_made(change, forge):
        raise ForgeError(
            f"{change.ref} ({change.branch}) was not made by kb: kb reviews and merges only its own pull requests",
            hint=f"kb pull requests come from {BRANCH_PREFIX}* branches with the `{KB_LABEL}` label (`kb pr open BRANCH`)",
        )


def _refuse_closed(existing: list[Change], branch: str, key: str) -> None:
    for change in existing:
        if change.state == "merged" and change.branch == branch:
            raise ConflictError(f"{change.ref} for {branch} is already merged", hint="propose again from the new evidence (`kb run`)")
        if change.state == "closed" and (change.branch == branch or inputs_of(change.body) == key):
            raise ConflictError(
                f"{change.ref} for the same evidence was closed without merging by a person; kb does not reopen it",
                hint=f"reopen {change.ref} on the forge yourself, or propose from other evidence",
            )


def open_change(repo: Repo, branch: str, forge: Forge | None = None) -> OpenResult:
    forge = forge or make_forge(repo)
    workspace = clean_workspace(repo, branch)
    head = workspace.head()
    base = branch_base(repo, head)
    info = proposal_info(repo, head, base.id)
    check_provenance(branch, info)
    if head.id == base.id:
        raise ConflictError(f"{branch} has no commits of its own", hint="propose a change first (`kb propose`)")
    gate = run_gate(workspace.view, base)
    body = render_body(repo, branch, base, head, info, gate)
    evidence = tuple(e.strip() for e in info.get("Kb-Evidence", "").split(",") if e.strip())
    from pipeline.forge.body import changed_paths

    paths = changed_paths(base, head)
    pages = [p for p in paths if p.endswith(".md")]
    title, labels = title_for(branch, evidence, pages), labels_for(paths)
    known = forge.find_changes(state="all") if forge.capabilities.pull_requests else []
    _refuse_closed(known, branch, inputs_key(evidence))
    current = [c for c in known if c.branch == branch and c.state == "open"]
    if not current:
        open_kb = [c for c in known if c.state == "open" and KB_LABEL in c.labels]
        limit = repo.config.forge.max_open_prs
        if len(open_kb) >= limit:
            raise ConflictError(
                f"{len(open_kb)} kb pull requests are open already (forge.max_open_prs is {limit})",
                hint="review and merge or close some (`kb pr list`), or raise forge.max_open_prs",
            )
    remote = make_remote(repo, forge)
    if remote is not None:
        remote.push_branch(branch)
    if current:
        change = forge.update_change(current[0], title, body, labels)
        action = "updated"
    else:
        change = forge.open_change(branch, title, body, labels)
        action = "opened"
    _gate_status(forge, str(head.id), gate.ok, len(gate.errors))
    return OpenResult(change, action, gate.ok, len(gate.errors))


def _gate_status(forge: Forge, commit: str, ok: bool, errors: int) -> None:
    if ok:
        forge.set_status(commit, GATE_CONTEXT, "success", "gate passed")
    else:
        forge.set_status(commit, GATE_CONTEXT, "failure", f"gate: {errors} error(s)")


# ---- fetching a change -------------------------------------------------------------------


def _open_kb_change(forge: Forge, ref: str, known: Change | None = None) -> Change:
    change = known or forge.get_change(ref)
    _kb_made(change, forge)
    if change.state != "open":
        raise ConflictError(
            f"{change.ref} is {change.state}" + (" (closed without merging by a person)" if change.closed_by_person else ""),
            hint="nothing to do; propose again for new evidence (`kb run`)",
        )
    return change


def _fetch_change(repo: Repo, remote: GitRemote | None, change: Change) -> None:
    """Make the local branch the change's exact head (a fresh worktree if it moved)."""
    if remote is None:
        return
    local = repo.git.branches.local.get(change.branch)
    if local is not None and str(local.peel().id) == change.head:
        return
    if local is not None and worktree_name(change.branch) in repo.git.list_worktrees():
        clean_workspace(repo, change.branch)  # refuses uncommitted work in the worktree
        remove_workspace(repo, change.branch)
    remote.fetch_branch(change.branch, f"refs/heads/{change.branch}")
    fetched = repo.git.branches.local.get(change.branch)
    if fetched is None or str(fetched.peel().id) != change.head:
        raise ConflictError(f"{change.ref} moved while it was being fetched (now not at {change.head[:10]})", hint="run the command again")


# ---- review ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewOutcome:
    change: Change
    review: ReviewResult
    anchored: int
    in_body: int
    replied: int = 0  # answers in the Reviewer's own threads whose comment still applies
    resolved: int = 0  # its threads whose comment it no longer makes


@dataclass(frozen=True)
class ReviewPlan:
    """What one review posts: the review itself, the replies in earlier threads, the threads to resolve."""

    submission: ReviewSubmission
    replies: tuple[tuple[ReviewThread, str], ...]
    resolve: tuple[ReviewThread, ...]
    in_body: int


def review_body(review: ReviewResult, unanchored: list[str], replied: int = 0, resolved: int = 0) -> str:
    lines = [f"**{review.verdict.replace('_', ' ')}** by {review.record.reviewer_model} ({review.record.reviewer_family})", ""]
    lines.append(review.summary or "(no summary)")
    if review.gate.errors:
        lines += ["", f"Gate: {len(review.gate.errors)} error(s)"]
        lines += [f"- `{f.path}:{f.line}` [{f.rule}] {f.message}" for f in review.gate.errors[:20]]
    if unanchored:
        lines += ["", "Comments outside the diff:"]
        lines += [f"- {text}" for text in unanchored]
    if replied or resolved:
        lines += ["", f"Earlier threads: {replied} still apply (answered there), {resolved} resolved."]
    lines += ["", record_marker(review.record)]
    return "\n".join(lines) + "\n"


def comment_text(message: str, evidence: str, fault: str) -> str:
    where = f" (evidence `{evidence}`)" if evidence else ""
    kind = f"[{fault}] " if fault and fault != "other" else ""
    return f"{kind}{message}{where}"


def plan_review(review: ReviewResult, hunks: list[Hunk], threads: list[ReviewThread], reviewer_login: str | None) -> ReviewPlan:
    """Decide what one review posts. A comment the Reviewer made before, in a thread of its own
    still open on the same file, is answered there; a new one is anchored on its line when the
    diff shows it, otherwise it goes into the body (GitHub rejects the whole review otherwise).
    The Reviewer's open threads whose comment it no longer makes (fixed, or outdated and not
    raised again) are resolved. Without ``forge.reviewer_login`` no thread is known to be its own."""
    mine = [t for t in threads if not t.resolved and reviewer_login and t.author == bare_login(reviewer_login)]
    anchored: list[LineComment] = []
    unanchored: list[str] = []
    replies: list[tuple[ReviewThread, str]] = []
    for comment in review.comments:
        text = comment_text(comment.message, comment.evidence or "", comment.fault or "")
        thread = next((t for t in mine if t.path == comment.path and t.body == text and all(t is not r for r, _ in replies)), None)
        if thread is not None:
            replies.append((thread, _still_applies(review.head, comment, thread)))
        elif comment.path and comment.line and any(h.holds(comment.path, comment.line) for h in hunks):
            anchored.append(LineComment(comment.path, comment.line, text))
        else:
            unanchored.append(f"`{comment.path}:{comment.line}`: {text}" if comment.path else text)
    answered = {id(t) for t, _ in replies}
    resolve = tuple(t for t in mine if id(t) not in answered)
    body = review_body(review, unanchored, len(replies), len(resolve))
    return ReviewPlan(ReviewSubmission(review.verdict, body, tuple(anchored)), tuple(replies), resolve, len(unanchored))


def _still_applies(head: str, comment: Comment, thread: ReviewThread) -> str:
    where = f", now at line {comment.line}" if comment.line else ""
    moved = " (the line this thread was on has changed since)" if thread.outdated else ""
    return f"Still applies at {head[:10]}{where}{moved}."


def review_change(repo: Repo, ref: str, forge: Forge | None = None, round_no: int = 1, agents: Agents | None = None) -> ReviewOutcome:
    forge = forge or make_forge(repo)
    change = _open_kb_change(forge, ref)
    remote = make_remote(repo, forge, "reviewer")
    if remote is not None:
        sync_main(repo, remote, build=False)  # the Reviewer's config, prompts and rules come from the base branch
        remote.fetch_notes()
    _fetch_change(repo, remote, change)
    result = review_branch(repo, change.branch, round_no, agents)
    if result.head != change.head:
        raise ConflictError(f"reviewed {result.head[:10]}, but {change.ref} is at {change.head[:10]}", hint="run the command again")
    threads = forge.review_threads(change)
    plan = plan_review(result, forge.diff_hunks(change), threads, repo.config.forge.reviewer_login)
    forge.submit_review(change, plan.submission)
    for thread, text in plan.replies:
        forge.reply(change, thread, text)
    for thread in plan.resolve:
        forge.resolve(thread)
    gate = result.gate
    forge.set_status(
        change.head, GATE_CONTEXT, "success" if gate.ok else "failure", "gate passed" if gate.ok else f"gate: {len(gate.errors)} error(s)"
    )
    if remote is not None:
        remote.push_notes()
    return ReviewOutcome(change, result, len(plan.submission.comments), plan.in_body, len(plan.replies), len(plan.resolve))


# ---- merge -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MergeOutcome:
    change: Change
    commit: str
    index: BuildResult | None = None


def merge_message(record: MergeRecord) -> tuple[str, str]:
    """The merge commit's title and message: the merge record, then the trailers of a local merge."""
    text = record.message("commit-message")
    title, _, trailers = text.partition("\n\n")
    data = json.dumps(record.to_json(), indent=2, sort_keys=True, ensure_ascii=False)
    return title, f"Kb-Merge-Record (JSON):\n{data}\n\n{trailers}"


def _merge_record(repo: Repo, forge: Forge, change: Change, base: str, info: dict[str, str], approval_login: str) -> MergeRecord:
    approval = None
    records = []
    history = [r for r in forge.reviews(change) if r.author == approval_login and r.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED")]
    for review in history:  # a dismissed approval (a push after it) is part of the story too
        try:
            records.append(record_in(review.body, f"of {change.ref}"))
        except GateError:
            continue  # a verdict without kb's record (a person's): not part of kb's story
    approval = records[-1]
    evidence = [e.strip() for e in info.get("Kb-Evidence", "").split(",") if e.strip()]
    del repo
    return MergeRecord(
        branch=change.branch,
        head=change.head,
        base=base,
        evidence=evidence,
        proposer=AgentIdentity(info.get("Kb-Proposer-Model", "unknown"), info.get("Kb-Proposer-Family", "unknown")),
        reviewer=AgentIdentity(approval.reviewer_model, approval.reviewer_family),
        rounds=max((r.round for r in records), default=1),
        reviews=sorted(records, key=lambda r: (r.round, r.at)),
        merged_at=iso_utc(utc_now()),
    )


def required_checks(repo: Repo, forge: Forge) -> tuple[str, ...]:
    return repo.config.forge.required_checks if forge.capabilities.required_checks else ()


def wait_for_checks(repo: Repo, forge: Forge, change: Change, sleep: Callable[[float], None] = time.sleep) -> None:
    """Return once the required checks passed on the change's head, polling every ``CHECKS_POLL_S``
    up to ``forge.checks_wait_s``: a failed one is refused at once (``GateError``), one still pending
    or not reported when the wait ends is the state "waiting for checks" (``ChecksPendingError``)."""
    required = required_checks(repo, forge)
    waited, bound = 0.0, repo.config.forge.checks_wait_s
    while True:
        checks = forge.checks(change.head)
        failing = checks.failing(required)
        if failing:
            raise GateError(
                f"a required check failed on {change.ref} at {change.head[:10]}: {', '.join(failing)}",
                hint=f"fix the branch (the check's log says why); `kb pr status {change.number}` shows the checks",
            )
        pending = checks.pending(required)
        if not pending:
            return
        if waited >= bound:
            raise ChecksPendingError(
                f"waiting for checks on {change.ref} at {change.head[:10]} after {bound:g}s: {', '.join(pending)}",
                hint=f"merge again when CI has finished (`kb pr merge {change.number}`), or raise forge.checks_wait_s",
            )
        step = min(CHECKS_POLL_S, bound - waited)
        sleep(step)
        waited += step


def merge_change(
    repo: Repo,
    ref: str,
    forge: Forge | None = None,
    build_index: bool = True,
    expected_head: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    known: Change | None = None,
) -> MergeOutcome:
    """Merge a change; ``expected_head``: the head that was reviewed (``kb run``), refused if it
    moved; ``known``: the change as just read from the forge (not read again)."""
    forge = forge or make_forge(repo)
    change = _open_kb_change(forge, ref, known)
    if expected_head is not None and change.head != expected_head:
        raise StaleApprovalError(
            f"{change.ref} moved to {change.head[:10]} after the review of {expected_head[:10]}: that approval is stale",
            hint=f"review the new head (`kb pr review {change.number}`), then merge",
        )
    remote = make_remote(repo, forge)
    if remote is None:  # the change is a branch here: the local merge (its own checks and record)
        commit = forge.merge(change, change.head, "", "")
        return MergeOutcome(change, commit, _build(repo) if build_index else None)
    wait_for_checks(repo, forge, change, sleep)
    sync_main(repo, remote, build=False)
    with repo.write_lock():
        _fetch_change(repo, remote, change)
        workspace = clean_workspace(repo, change.branch)
        _refuse_conflict(repo, change, workspace.head())
        base = branch_base(repo, workspace.head())
        info = proposal_info(repo, workspace.head(), base.id)
        forge.authority().approval(repo, workspace, change.branch, base, info)
        login = repo.config.forge.reviewer_login or ""
        title, message = merge_message(_merge_record(repo, forge, change, str(base.id), info, login))
    commit = forge.merge(change, change.head, title, message)
    remote.delete_branch(change.branch)
    with repo.write_lock():
        remove_workspace(repo, change.branch)
        local = repo.git.branches.local.get(change.branch)
        if local is not None:
            local.delete()
    result = sync_main(repo, remote, build=build_index)
    return MergeOutcome(change, commit, result)


def _refuse_conflict(repo: Repo, change: Change, head: pygit2.Commit) -> None:
    """A change the default branch (synced just before) moved away from, so that it no longer merges."""
    main = repo.head()
    assert main is not None
    index = repo.git.merge_commits(main, head)
    if index.conflicts:
        paths = sorted({(c[0] or c[1] or c[2]).path for c in index.conflicts})
        raise MergeConflictError(
            f"{change.ref} ({change.branch}) conflicts with {change.base_branch}, which moved since it was proposed, in {', '.join(paths[:3])}",
            hint=f"close {change.ref} and propose its evidence again from the new base (`kb run --evidence ID`); "
            "`kb run` does this itself, onto the same pull request",
        )


# ---- list, status, sync ------------------------------------------------------------------


@dataclass(frozen=True)
class ChangeStatus:
    change: Change
    checks: ChecksState
    review: str  # the reviewer's latest verdict on the head, or what is missing
    required: tuple[str, ...] = field(default_factory=tuple)


def change_status(repo: Repo, change: Change, forge: Forge) -> ChangeStatus:
    checks = forge.checks(change.head)
    login = repo.config.forge.reviewer_login
    reviews = forge.reviews(change)
    verdicts = reviews_by(reviews, login) if login else [r for r in reviews if r.state in ("APPROVED", "CHANGES_REQUESTED")]
    if not verdicts:
        review = "not reviewed"
    elif verdicts[-1].commit != change.head:
        review = f"stale ({verdicts[-1].state.lower()} of {verdicts[-1].commit[:10]})"
    else:
        review = verdicts[-1].state.lower()
    return ChangeStatus(change, checks, review, required_checks(repo, forge))


def list_changes(repo: Repo, forge: Forge | None = None) -> list[ChangeStatus]:
    forge = forge or make_forge(repo)
    changes = [
        c for c in forge.find_changes() if c.branch.startswith(BRANCH_PREFIX) and (not forge.capabilities.labels or KB_LABEL in c.labels)
    ]
    return [change_status(repo, c, forge) for c in changes]


def status_of_change(repo: Repo, ref: str, forge: Forge | None = None) -> ChangeStatus:
    forge = forge or make_forge(repo)
    return change_status(repo, forge.get_change(ref), forge)


def _build(repo: Repo) -> BuildResult:
    from kb.progress import report
    from kb.retrieval.build import build_index

    return build_index(repo, progress=report)


def sync_main(repo: Repo, remote: GitRemote | None, build: bool = True) -> BuildResult | None:
    """Fetch the default branch and move main to it (fast-forward only); then rebuild the index."""
    if remote is not None:
        default = repo.config.forge.default_branch
        tracking = f"refs/remotes/{remote.name}/{default}"
        remote.fetch_branch(default, tracking)
        remote.fetch_ref_if_any(RECORD_REF)  # the consolidation record, which the gate reads
        target = repo.git.references.get(tracking)
        if target is None:
            raise NotFoundError(f"the remote has no branch {default}", hint="set forge.default_branch in kb.config.yaml")
        new = target.peel().id
        with repo.write_lock():
            head = repo.head()
            assert head is not None
            if head.id != new:
                if not repo.git.descendant_of(new, head.id):
                    raise ConflictError(
                        f"the local {repo.git.head.shorthand} has commits that {remote.name}/{default} does not ({str(head.id)[:10]})",
                        hint=f"push them through a pull request, or reset to {remote.name}/{default}",
                    )
                repo.move_head(new)
                if "config" in vars(repo):
                    del repo.config  # main's kb.config.yaml may have changed: read it again (a cached_property)
    return _build(repo) if build else None


def sync(repo: Repo, build: bool = True) -> BuildResult | None:
    forge = make_forge(repo)
    return sync_main(repo, make_remote(repo, forge), build)
