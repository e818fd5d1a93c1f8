"""The forge interface, owned by kb: the few things the change loop asks of a forge, in its words.

A *change* is a work branch offered for merging: on GitHub a pull request, locally the branch
itself. The interface says nothing about HTTP, git or GitHub's JSON; ``pipeline.forge.github``
translates, ``pipeline.forge.local`` keeps today's behaviour. Git pushes and fetches are not
here (``pipeline.forge.remote``): a forge is the review and merge authority, not the transport;
it only names the remote (``Forge.remote``).

What a forge offers beyond the interface is a value, ``Capabilities``, never its name: the jobs
ask ``forge.capabilities.labels``, not which forge it is, so a new forge is a module that says
what it offers plus its line in the table of forges (``pipeline.forge.kinds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import pygit2

from kb.errors import ForgeError
from pipeline.approval import ApprovalAuthority
from pipeline.forge.remote import GitRemote

if TYPE_CHECKING:
    from kb.repo import Repo

ChangeState = Literal["open", "closed", "merged"]
ReviewState = Literal["APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED", "PENDING"]
StatusState = Literal["success", "failure", "pending", "error"]
Role = Literal["proposer", "reviewer"]
KB_LABEL = "kb"


@dataclass(frozen=True)
class Capabilities:
    """What a forge offers, which the change jobs ask instead of its name.

    - ``pull_requests``: a change is a numbered request that outlives its branch (closed and merged
      ones stay listed), so a change a person closed is never reopened, ``forge.max_open_prs``
      counts the open ones, and ``kb run`` goes through it (``ForgeSteps``) instead of reviewing
      and merging on this machine (``LocalSteps``);
    - ``labels``: changes carry labels, and only those labelled ``kb`` are kb's (without labels,
      every ``kb/`` branch is);
    - ``required_checks``: the forge runs checks on a change's head, and a merge waits until
      ``forge.required_checks`` are green there.
    """

    pull_requests: bool = False
    labels: bool = False
    required_checks: bool = False


@dataclass(frozen=True)
class Change:
    """A work branch offered for merging. ``number`` is the pull request's (0 on the local forge,
    where the branch names the change)."""

    number: int
    branch: str
    head: str  # the exact commit under review
    base_branch: str
    state: ChangeState
    title: str = ""
    body: str = ""
    labels: tuple[str, ...] = ()
    author: str = ""
    url: str = ""
    closed_by_person: bool = False  # closed without merging (not by kb)

    @property
    def ref(self) -> str:
        return f"#{self.number}" if self.number else self.branch


@dataclass(frozen=True)
class Hunk:
    """Lines of the new side of one file that a diff shows (where a line comment may be anchored)."""

    path: str
    start: int
    count: int

    def holds(self, path: str, line: int) -> bool:
        return path == self.path and self.start <= line < self.start + self.count


@dataclass(frozen=True)
class LineComment:
    path: str
    line: int
    body: str


@dataclass(frozen=True)
class ForgeReview:
    """A review as the forge keeps it: who, on which commit, what verdict, and its body."""

    author: str
    commit: str
    state: ReviewState
    body: str
    submitted_at: str = ""


@dataclass(frozen=True)
class ReviewThread:
    """A thread of line comments on a change: its first comment (the one replies go to), where it
    is, and whether the forge has marked it resolved or outdated (its line changed since)."""

    id: str  # the forge's id of the thread (GitHub: the GraphQL node id resolveReviewThread takes)
    comment_id: int  # the first comment's id (GitHub: the REST id replies are posted to)
    path: str
    line: int | None  # None when outdated (GitHub no longer places it on the current diff)
    body: str
    author: str  # as ``bare_login`` gives it
    resolved: bool = False
    outdated: bool = False


@dataclass(frozen=True)
class ReviewSubmission:
    verdict: Literal["approve", "request_changes"]
    body: str
    comments: tuple[LineComment, ...] = ()


@dataclass(frozen=True)
class ChecksState:
    """The required checks on a commit: each context's state (missing ones are absent)."""

    states: dict[str, str] = field(default_factory=dict)

    def missing_or_failing(self, required: tuple[str, ...]) -> list[str]:
        return [f"{name} ({self.states.get(name, 'missing')})" for name in required if self.states.get(name) not in PASSED]

    def failing(self, required: tuple[str, ...]) -> list[str]:
        """The required checks that finished and failed (a status ``failure`` or ``error``, a check run's
        conclusion ``failure``, ``cancelled``, ``timed_out``, ...): merging them is refused."""
        return [f"{name} ({self.states[name]})" for name in required if self.states.get(name, "pending") not in PASSED | WAITING]

    def pending(self, required: tuple[str, ...]) -> list[str]:
        """The required checks not reported yet, or still queued or running: worth waiting for."""
        return [f"{name} ({self.states.get(name, 'missing')})" for name in required if self.states.get(name, "pending") in WAITING]


PASSED = frozenset({"success", "neutral", "skipped"})  # what GitHub counts as a passed required check
WAITING = frozenset({"pending", "queued", "in_progress", "waiting", "requested", "expected"})


class ChecksPendingError(ForgeError):
    """The required checks on a change's head were still pending (or not reported) when the wait
    (``forge.checks_wait_s``) ended: a state, not a failure; merging again later may succeed."""

    exit_code = 19


class Forge(Protocol):
    """The narrow interface the change jobs use (``pipeline.forge.changes``)."""

    capabilities: Capabilities

    def remote(self, root: Path, role: Role) -> GitRemote | None:
        """Where work branches are pushed and the default branch is fetched from, as ``role``
        (its token on the pushes); None when changes stay in this repository and merge here."""
        ...

    def authority(self) -> ApprovalAuthority:
        """Who says a head may merge (the notes locally, the pull request's review on GitHub)."""
        ...

    def open_change(self, branch: str, title: str, body: str, labels: tuple[str, ...]) -> Change: ...

    def update_change(self, change: Change, title: str, body: str, labels: tuple[str, ...]) -> Change: ...

    def get_change(self, ref: str) -> Change:
        """A change by its number (``12``, ``#12``) or, where the forge allows, its branch."""
        ...

    def find_changes(self, branch: str | None = None, state: Literal["open", "all"] = "open") -> list[Change]: ...

    def diff_hunks(self, change: Change) -> list[Hunk]: ...

    def submit_review(self, change: Change, review: ReviewSubmission) -> None: ...

    def reviews(self, change: Change) -> list[ForgeReview]: ...

    def review_threads(self, change: Change) -> list[ReviewThread]:
        """The threads of line comments on ``change``, oldest first."""
        ...

    def reply(self, change: Change, thread: ReviewThread, body: str) -> None:
        """Answer in ``thread`` (as the Reviewer) instead of opening a new one."""
        ...

    def resolve(self, thread: ReviewThread) -> None:
        """Mark ``thread`` resolved (as the Reviewer)."""
        ...

    def set_status(self, commit: str, context: str, state: StatusState, description: str) -> None: ...

    def checks(self, commit: str) -> ChecksState: ...

    def set_labels(self, change: Change, labels: tuple[str, ...]) -> None: ...

    def merge(self, change: Change, expected_head: str, title: str, message: str) -> str:
        """Merge ``change`` only if its head is still ``expected_head``; the merge commit's id."""
        ...


class ForgeClass(Protocol):
    """A kind of forge in the table (``pipeline.forge.kinds``): the class, made for a repository."""

    def for_repo(self, repo: Repo, env: Mapping[str, str] | None) -> Forge:
        """The forge of ``repo`` (its ``forge:`` config; tokens from ``env``, default the environment)."""
        ...


def bare_login(login: str) -> str:
    """A login as GitHub's two APIs agree on it: GraphQL names a bot ``kb-reviewer``, REST ``kb-reviewer[bot]``."""
    return login.removesuffix("[bot]")


def hunks_of(diff: pygit2.Diff) -> list[Hunk]:
    """The new-side line ranges of a diff's hunks (context lines included, as GitHub counts them)."""
    out = []
    for patch in diff:
        if patch is None or patch.delta.new_file.path is None:
            continue
        for hunk in patch.hunks:
            if hunk.new_lines:
                out.append(Hunk(patch.delta.new_file.path, hunk.new_start, hunk.new_lines))
    return out


def branch_diff_hunks(base: pygit2.Commit, head: pygit2.Commit) -> list[Hunk]:
    from kb.repo import diff_trees

    return hunks_of(diff_trees(base.tree, head.tree))
