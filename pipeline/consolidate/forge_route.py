"""Consolidation branches through the forge (``forge: {kind: github}``) instead of a local merge.

Each batch's branch is offered as a pull request with the same jobs as ``kb pr open|review|merge``
(``pipeline.forge.changes``): the same body, labels and gate status; the Reviewer's verdict
posted as the pull request's review; merged by the forge once approved with the checks green.
Branch names come from a hash of the job's inputs, so a rerun with the same inputs updates the
same pull request, and a pull request a person closed is never reopened.

The coverage record is bookkeeping, not knowledge, and main changes only by merged pull requests
(a protected branch refuses kb's pushes, and kb's Apps are never on a bypass list): through a
forge the record is committed on ``refs/kb/consolidation`` (``pipeline.consolidate.record``),
fetched from the forge when the run starts (``sync``) and pushed there, fast-forward only, after
every batch (``publish``). Local main is never ahead of the forge's default branch, so the pull
requests' merges arrive by ``kb sync``'s fast-forward.
"""

from __future__ import annotations

from dataclasses import dataclass

from kb.repo import Repo
from pipeline.consolidate.record import RECORD_REF, start_record_ref
from pipeline.forge.base import KB_LABEL, Change, Forge
from pipeline.forge.changes import make_forge, make_remote, merge_change, open_change, review_change, sync_main
from pipeline.forge.remote import GitRemote
from pipeline.review import ReviewResult


@dataclass
class ForgeRoute:
    repo: Repo
    forge: Forge
    remote: GitRemote | None

    @classmethod
    def for_repo(cls, repo: Repo, forge: Forge | None = None) -> ForgeRoute | None:
        """The route when the configured forge has pull requests; None for local merges."""
        forge = forge or make_forge(repo)
        if not forge.capabilities.pull_requests:
            return None
        return cls(repo, forge, make_remote(repo, forge))

    def sync(self) -> None:
        """Main moved to the forge's default branch (fast-forward only), the record ref fetched from
        the forge; without one anywhere yet, started from the record main holds."""
        sync_main(self.repo, self.remote, build=False)
        start_record_ref(self.repo)  # the run holds the write lock

    def publish(self) -> None:
        """The record's commits pushed to the forge's ``refs/kb/consolidation`` (fast-forward only);
        main is never pushed."""
        if self.remote is not None:
            self.remote.push_ref(RECORD_REF)

    def change(self, branch: str) -> Change | None:
        """The newest pull request of ``branch``, whatever its state."""
        changes = self.forge.find_changes(branch=branch, state="all")
        return changes[0] if changes else None

    def full(self) -> str:
        """Why no further pull request may be opened now (``forge.max_open_prs`` kb pull requests
        are open), or ""."""
        limit = self.repo.config.forge.max_open_prs
        open_kb = [c for c in self.forge.find_changes(state="open") if KB_LABEL in c.labels]
        return f"forge.max_open_prs ({limit}) kb pull requests are open" if len(open_kb) >= limit else ""

    def review(self, branch: str) -> ReviewResult:
        """Open the branch's pull request (or update it: one per branch) and review it there.
        Raises ConflictError when a person closed a pull request for it: kb does not reopen it."""
        opened = open_change(self.repo, branch, self.forge)
        return review_change(self.repo, str(opened.change.number), self.forge).review

    def merge(self, branch: str) -> str:
        change = self.change(branch)
        assert change is not None and change.state == "open", f"{branch} has no open pull request"
        return merge_change(self.repo, str(change.number), self.forge, build_index=False).commit
