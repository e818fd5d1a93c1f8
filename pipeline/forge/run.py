"""The forge side of ``kb run`` (``pipeline.loop``'s seam, ``LoopSteps``): the same loop through
pull requests, made of the jobs behind ``kb pr`` (``pipeline.forge.changes``).

- ``start``: main is the forge's default branch first (``kb sync`` without the index), so the
  proposal is made from what the pull request will merge into;
- ``publish``: the proposal, and each revision, is pushed to the same pull request
  (``open_change``: the body, the labels, the gate's status);
- ``review``: ``review_change`` on the exact head (a PR review with line comments, replies in the
  Reviewer's earlier threads, the outdated ones resolved);
- ``merge``: ``merge_change`` with the head that was reviewed, so a push after the review is
  refused (``StaleApprovalError``) and a default branch that moved into a conflict is reported
  (``MergeConflictError``); the loop reviews again, or proposes again from the new base;
- ``leave_for_human``: the pull request stays open, labelled ``needs-human`` (and the status note
  of the local loop is written too).
"""

from __future__ import annotations

from dataclasses import replace

from kb.errors import ConflictError
from kb.repo import Repo
from pipeline.forge.base import Change, Forge
from pipeline.forge.changes import make_remote, merge_change, open_change, review_change, sync_main
from pipeline.merge import MergeResult
from pipeline.records import set_status
from pipeline.review import ReviewResult
from pipeline.roles import Agents

NEEDS_HUMAN = "needs-human"
RECORD_IN_MESSAGE = "the merge commit's message"


class ForgeSteps:
    """The loop's steps on a forge with pull requests (GitHub)."""

    def __init__(self, repo: Repo, forge: Forge) -> None:
        self.repo = repo
        self.forge = forge
        self.change: Change | None = None

    def _current(self) -> Change:
        if self.change is None:
            raise ConflictError("no pull request was opened for this run", hint="run `kb run` again")
        return self.change

    def start(self) -> None:
        sync_main(self.repo, make_remote(self.repo, self.forge), build=False)

    def publish(self, branch: str) -> None:
        self.change = open_change(self.repo, branch, self.forge).change

    def review(self, branch: str, round_no: int, agents: Agents) -> ReviewResult:
        del branch  # the pull request names it
        outcome = review_change(self.repo, str(self._current().number), self.forge, round_no, agents)
        self.change = outcome.change
        return outcome.review

    def merge(self, branch: str, head: str) -> MergeResult:
        outcome = merge_change(self.repo, str(self._current().number), self.forge, build_index=False, expected_head=head)
        return MergeResult(branch, outcome.commit, RECORD_IN_MESSAGE, None)

    def leave_for_human(self, branch: str, head: str | None, reason: str, rounds: int) -> None:
        if head is not None:
            set_status(self.repo, head, NEEDS_HUMAN, {"branch": branch, "reason": reason, "rounds": rounds})
        change = self._current()
        labels = tuple(dict.fromkeys((*change.labels, NEEDS_HUMAN)))
        self.forge.set_labels(change, labels)
        self.change = replace(change, labels=labels)
