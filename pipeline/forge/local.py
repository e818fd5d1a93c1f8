"""The local forge: today's behaviour behind the forge interface.

A change is the work branch itself (no number); its reviews are the signed notes ``kb review``
writes (``refs/notes/kb-reviews``), so submitting a review adds nothing; statuses are notes on
``refs/notes/kb-checks``; a merge is ``pipeline.merge`` on this machine, refused when the branch
moved away from the head that was expected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from kb.errors import ConflictError, NotFoundError
from kb.repo import Repo
from pipeline.approval import ApprovalAuthority, NotesAuthority
from pipeline.forge.base import (
    Capabilities,
    Change,
    ChecksState,
    ForgeReview,
    Hunk,
    ReviewSubmission,
    ReviewThread,
    Role,
    StatusState,
    branch_diff_hunks,
)
from pipeline.forge.remote import GitRemote
from pipeline.records import reviews_of
from pipeline.review import branch_base
from pipeline.workspace import BRANCH_PREFIX

CHECKS_REF = "refs/notes/kb-checks"


class LocalForge:
    capabilities = Capabilities()  # no numbered requests, no labels, no checks run by a service

    def __init__(self, repo: Repo) -> None:
        self.repo = repo

    @classmethod
    def for_repo(cls, repo: Repo, env: Mapping[str, str] | None) -> LocalForge:
        del env  # no tokens: nothing leaves this machine
        return cls(repo)

    def remote(self, root: Path, role: Role) -> GitRemote | None:
        """None: the branch is the change, and it merges here."""
        del root, role
        return None

    def authority(self) -> ApprovalAuthority:
        return NotesAuthority()

    def _change(self, branch: str, title: str = "", body: str = "", labels: tuple[str, ...] = ()) -> Change:
        ref = self.repo.git.branches.local.get(branch)
        if ref is None:
            raise NotFoundError(f"no branch {branch}", hint="list work branches with `kb pr list`")
        main = self.repo.git.head.shorthand
        return Change(0, branch, str(ref.peel().id), main, "open", title, body, labels)

    def open_change(self, branch: str, title: str, body: str, labels: tuple[str, ...]) -> Change:
        return self._change(branch, title, body, labels)

    def update_change(self, change: Change, title: str, body: str, labels: tuple[str, ...]) -> Change:
        return self._change(change.branch, title, body, labels)

    def get_change(self, ref: str) -> Change:
        return self._change(ref)

    def find_changes(self, branch: str | None = None, state: Literal["open", "all"] = "open") -> list[Change]:
        del state  # a merged local branch is deleted: every branch left is open
        names = sorted(b for b in self.repo.git.branches.local if b.startswith(BRANCH_PREFIX) and (branch is None or b == branch))
        return [self._change(name) for name in names]

    def diff_hunks(self, change: Change) -> list[Hunk]:
        head = self.repo.resolve(change.head)
        return branch_diff_hunks(branch_base(self.repo, head), head)

    def submit_review(self, change: Change, review: ReviewSubmission) -> None:
        """Nothing to add: the signed note ``kb review`` wrote on the head is the local review."""
        del change, review

    def reviews(self, change: Change) -> list[ForgeReview]:
        return [
            ForgeReview(
                r.signer or r.reviewer_model, r.head, "APPROVED" if r.verdict == "approve" else "CHANGES_REQUESTED", r.summary, r.at
            )
            for r in reviews_of(self.repo, change.head)
        ]

    def review_threads(self, change: Change) -> list[ReviewThread]:
        """None: a local review's comments live in its note, whole, one note per head."""
        del change
        return []

    def reply(self, change: Change, thread: ReviewThread, body: str) -> None:
        del change, thread, body  # no threads locally (``review_threads``)

    def resolve(self, thread: ReviewThread) -> None:
        del thread  # no threads locally (``review_threads``)

    def set_status(self, commit: str, context: str, state: StatusState, description: str) -> None:
        records = {**self._statuses(commit), context: {"state": state, "description": description}}
        sig = self.repo.signature()
        self.repo.git.create_note(json.dumps(records, sort_keys=True, indent=2) + "\n", sig, sig, commit, CHECKS_REF, True)

    def _statuses(self, commit: str) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.repo.git.lookup_note(commit, CHECKS_REF).message)
        except (KeyError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def checks(self, commit: str) -> ChecksState:
        return ChecksState(
            {context: str(entry.get("state")) for context, entry in self._statuses(commit).items() if isinstance(entry, dict)}
        )

    def set_labels(self, change: Change, labels: tuple[str, ...]) -> None:
        """Labels have no local home; ``needs-human`` is the status note ``kb run`` writes."""
        del change, labels

    def merge(self, change: Change, expected_head: str, title: str, message: str) -> str:
        from pipeline.merge import merge_branch

        del title, message  # the local merge writes its own message and record file
        current = self._change(change.branch)
        if current.head != expected_head:
            raise ConflictError(
                f"{change.branch} moved to {current.head[:10]} after the review of {expected_head[:10]}",
                hint=f"review the new head (`kb pr review {change.branch}`), then merge",
            )
        return merge_branch(self.repo, change.branch, build_index=False).commit
