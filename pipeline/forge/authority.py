"""On a forge, the approval that counts is the pull request's review by the reviewer identity.

GitHub authenticates who submitted a review and on which commit; so ``ForgeAuthority`` takes the
latest review of ``forge.reviewer_login`` in place of the signed notes (``NotesAuthority``). The
review's body carries kb's review record (base64 JSON in an HTML comment), which must match the
branch, head, base and proposer, and name this repository's Reviewer of another family. The
checks that do not depend on who reviewed stay the same (``pipeline.approval``): provenance, the
allowed signers untouched, the gate and the deterministic Reviewer run again on the head.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import TYPE_CHECKING

import pydantic
import pygit2

from kb.errors import GateError, MalformedReviewError, ReviewBlockedError, ReviewMismatchError, StaleApprovalError
from kb.repo import Repo
from pipeline.approval import check_fields, check_provenance, check_trust_files, recheck, required_reviewer
from pipeline.records import ReviewRecord
from pipeline.workspace import Workspace

if TYPE_CHECKING:
    from pipeline.forge.base import Change, Forge, ForgeReview

MARKER = "kb-review-record"
MARKER_RE = re.compile(r"<!-- kb-review-record ([A-Za-z0-9+/=]+) -->")


def record_marker(record: ReviewRecord) -> str:
    data = json.dumps(record.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return f"<!-- {MARKER} {base64.b64encode(data).decode()} -->"


def record_in(body: str, where: str) -> ReviewRecord:
    """The review record a review's body carries; MalformedReviewError when absent or invalid."""
    found = MARKER_RE.search(body)
    if found is None:
        raise MalformedReviewError(f"the review {where} carries no kb review record", hint="review with `kb pr review N`, which writes it")
    try:
        data = json.loads(base64.b64decode(found.group(1), validate=True))
        return ReviewRecord(**data)
    except (ValueError, binascii.Error, TypeError, pydantic.ValidationError) as exc:
        raise MalformedReviewError(
            f"the review record in the review {where} is not valid: {str(exc).splitlines()[0][:200]}",
            hint="review with `kb pr review N` again",
        ) from None


def reviews_by(reviews: list[ForgeReview], login: str) -> list[ForgeReview]:
    """The verdicts (approve or request changes) of ``login``, oldest first."""
    return [r for r in reviews if r.author == login and r.state in ("APPROVED", "CHANGES_REQUESTED")]


class ForgeAuthority:
    """The pull request's latest verdict by the reviewer identity, on the exact head."""

    def __init__(self, forge: Forge, reviewer_login: str) -> None:
        self.forge = forge
        self.reviewer_login = reviewer_login

    def change_of(self, branch: str, head: str) -> Change:
        changes = self.forge.find_changes(branch)
        if not changes:
            raise GateError(f"no open pull request for {branch}", hint=f"open one with `kb pr open {branch}`")
        change = changes[0]
        if change.head != head:
            raise GateError(
                f"the pull request {change.ref} is at {change.head[:10]}, the branch here at {head[:10]}",
                hint=f"fetch the pull request again (`kb pr merge {change.number}` fetches its head)",
            )
        return change

    def approval(self, repo: Repo, workspace: Workspace, branch: str, base: pygit2.Commit, info: dict[str, str]) -> ReviewRecord:
        head = str(workspace.head().id)
        check_provenance(branch, info)
        check_trust_files(repo, branch, workspace.head(), base)
        change = self.change_of(branch, head)
        if change.author == self.reviewer_login:
            raise GateError(
                f"{change.ref} was opened by the reviewer identity {self.reviewer_login}; nobody approves their own pull request",
                hint="open pull requests with the proposer's token (forge.proposer_token_env)",
            )
        verdicts = reviews_by(self.forge.reviews(change), self.reviewer_login)
        if not verdicts:
            raise GateError(
                f"no review of {change.ref} by {self.reviewer_login} (never reviewed)", hint=f"run `kb pr review {change.number}`"
            )
        last = verdicts[-1]
        if last.commit != head:
            raise StaleApprovalError(
                f"stale approval: {self.reviewer_login} last reviewed {last.commit[:10]}, but {change.ref} moved to {head[:10]}",
                hint=f"run `kb pr review {change.number}` again",
            )
        if last.state == "CHANGES_REQUESTED":
            raise ReviewBlockedError(
                f"the latest review of {change.ref} by {self.reviewer_login} requests changes on {head[:10]}",
                hint=f"revise the branch, push it (`kb pr open {branch}`) and run `kb pr review {change.number}` again",
            )
        record = record_in(last.body, f"of {change.ref} by {self.reviewer_login}")
        check_fields(record, head, branch, str(base.id), info)
        required = required_reviewer(repo)
        if (record.reviewer_model, record.reviewer_family) != (required.model, required.family) or record.verdict != "approve":
            raise ReviewMismatchError(
                f"the approval of {change.ref} records reviewer {record.reviewer_model} ({record.reviewer_family}) and verdict "
                f"{record.verdict}, but this repository's Reviewer is {required.model} ({required.family})",
                hint="review with the configured Reviewer (`kb pr review N`)",
            )
        if not repo.config.models.allow_same_family and record.reviewer_family.lower() == info["Kb-Proposer-Family"].lower():
            raise GateError(
                f"the approval of {change.ref} is by a {record.reviewer_family} reviewer, the proposer's own family",
                hint="review with a model of another family, or set models.allow_same_family: true",
            )
        recheck(repo, workspace, branch, base, info)
        return record
