"""The GitHub forge: pull requests, reviews, commit statuses and merges through ``githubkit``.

Two identities (docs/github.md): the Proposer's token opens and updates pull requests, sets
statuses and merges; the Reviewer's token submits reviews (nobody may approve their own pull
request). Tokens come from the environment variables the config names, read when first needed.

Failures become one ``ForgeError`` line quoting GitHub's message and saying what to do; 5xx
answers and rate limits are retried with backoff, honouring ``retry-after`` and
``x-ratelimit-reset`` up to ``forge.max_wait_s`` (githubkit's retry hook, ``RetryPolicy``).
Every answer is parsed into githubkit's typed models, so drift from GitHub's schema shows.

Review threads are GraphQL only on GitHub (REST has no thread and no "resolved"): the threads of a
pull request come from ``reviewThreads``, resolving is the ``resolveReviewThread`` mutation;
replies go through REST (``POST .../pulls/N/comments/ID/replies``). GraphQL names a bot without
REST's ``[bot]`` suffix, so logins are compared without it.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from kb.config import Forge as ForgeConfig
from kb.errors import ConfigError, ForgeError, KbError, StaleApprovalError
from pipeline.approval import ApprovalAuthority
from pipeline.forge.authority import ForgeAuthority
from pipeline.forge.base import (
    Capabilities,
    Change,
    ChecksState,
    ForgeReview,
    Hunk,
    ReviewState,
    ReviewSubmission,
    ReviewThread,
    Role,
    StatusState,
    bare_login,
)
from pipeline.forge.remote import GitRemote

if TYPE_CHECKING:
    from githubkit import GitHub
    from githubkit.exception import GitHubException
    from githubkit.typing import RetryOption

    from kb.repo import Repo

T = TypeVar("T")
HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)

HINTS = {
    401: "the token in ${var} is not valid (expired, revoked or mistyped): set ${var} to a valid token",
    403: "the token in ${var} may not do this: give it (or its GitHub App) the permissions docs/github.md lists",
    404: "check forge.repository ({repository}) and forge.api_url in kb.config.yaml, and that the token in ${var} can see the repository",
    405: "the repository's rules block the merge: the required checks and an approval of the head by the reviewer (kb pr status {ref})",
    409: "the pull request's head moved after the review: run `kb pr review {ref}` on the new head, then merge",
    422: "GitHub refused the request as invalid; the message says which rule",
}
THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated path line
          comments(first: 1) { nodes { databaseId body author { login } } }
        }
      }
    }
  }
}
"""
ENQUEUE_MUTATION = """
mutation($pullRequestId: ID!, $expectedHeadOid: GitObjectID) {
  enqueuePullRequest(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid}) {
    mergeQueueEntry { id position state }
  }
}
"""
QUEUE_POLL_S = 10.0
RESOLVE_MUTATION = """
mutation($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""


class RetryPolicy:
    """githubkit's retry decision: rate limits (waiting what GitHub asks, up to ``max_wait_s``) and
    5xx answers (exponential backoff from ``base_delay_s``), ``max_retries`` times each."""

    def __init__(self, max_retries: int, max_wait_s: float, base_delay_s: float = 1.0) -> None:
        self.max_retries = max_retries
        self.max_wait_s = max_wait_s
        self.base_delay_s = base_delay_s

    def __call__(self, exc: GitHubException, retry_count: int) -> RetryOption:
        from githubkit.exception import RateLimitExceeded, RequestFailed, RequestTimeout
        from githubkit.typing import RetryOption

        if retry_count >= self.max_retries:
            return RetryOption(False)
        if isinstance(exc, RateLimitExceeded):
            wait = exc.retry_after.total_seconds()
            return RetryOption(True, exc.retry_after) if wait <= self.max_wait_s else RetryOption(False)
        if (isinstance(exc, RequestFailed) and exc.response.status_code >= 500) or isinstance(exc, RequestTimeout):
            return RetryOption(True, dt.timedelta(seconds=self.base_delay_s * 2**retry_count))
        return RetryOption(False)


class GitHubForge:
    capabilities = Capabilities(pull_requests=True, labels=True, required_checks=True)

    def __init__(
        self,
        config: ForgeConfig,
        env: Mapping[str, str] | None = None,
        base_delay_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        assert config.repository is not None  # the config's validator requires it for kind github
        self.config = config
        self.owner, self.name = config.repository.split("/", 1)
        self.env = os.environ if env is None else env
        self.retry = RetryPolicy(config.max_retries, config.max_wait_s, base_delay_s)
        self.sleep = sleep
        self._clients: dict[Role, GitHub] = {}  # kept referenced: githubkit refuses a collected client

    @classmethod
    def for_repo(cls, repo: Repo, env: Mapping[str, str] | None) -> GitHubForge:
        if repo.config.forge.repository is None:
            raise ConfigError(
                "the GitHub forge needs forge.repository (owner/name) in kb.config.yaml",
                hint="add a forge: section with kind: github and repository: owner/name (docs/github.md)",
            )
        return cls(repo.config.forge, env)

    def remote(self, root: Path, role: Role) -> GitRemote | None:
        """The git remote ``forge.remote`` (``origin``), as ``git clone`` left it."""
        return GitRemote(root, self.config.remote, self.token(role))

    # ---- plumbing ------------------------------------------------------------------------

    def token_var(self, role: Role) -> str:
        return self.config.proposer_token_env if role == "proposer" else self.config.reviewer_token_env

    def token(self, role: Role) -> str:
        var = self.token_var(role)
        token = self.env.get(var, "").strip()
        if not token:
            raise ForgeError(
                f"no {role} token: the environment variable {var} is not set",
                hint=f"export {var}=<token of the {role} identity> (docs/github.md); forge.{role}_token_env names the variable",
            )
        return token

    def client(self, role: Role) -> GitHub:
        if role not in self._clients:
            from githubkit import GitHub

            self._clients[role] = GitHub(
                self.token(role),
                base_url=self.config.api_url + "/",
                timeout=self.config.timeout_s,
                auto_retry=self.retry,
                http_cache=False,
                user_agent="kb-forge",
            )
        return self._clients[role]

    def call(
        self, role: Role, what: str, fn: Callable[[GitHub], T], ref: str = "", refusals: Mapping[int, type[KbError]] | None = None
    ) -> T:
        """Run one API call as ``role``; GitHub's refusals become one ForgeError line (or the error
        class ``refusals`` names for its status)."""
        from githubkit.exception import GraphQLFailed, RequestError, RequestFailed

        client = self.client(role)
        try:
            return fn(client)
        except GraphQLFailed as exc:
            messages = "; ".join(e.message for e in exc.response.errors or [])[:500] or "no message"
            raise ForgeError(
                f"GitHub's GraphQL API refused to {what}: {messages}",
                hint=f"check that the token in ${self.token_var(role)} may read and write pull requests (docs/github.md)",
            ) from None
        except RequestFailed as exc:
            status = exc.response.status_code
            message = github_message(exc.response.raw_response.text)
            var = self.token_var(role)
            hint = HINTS.get(status, "see GitHub's message").format(var=var, repository=self.config.repository, ref=ref or "N")
            if status in (200, 403, 429) and "rate limit" in message.lower():  # 200: GraphQL says so in its body
                hint = f"GitHub's rate limit for the {role} token: wait until it resets (longer than forge.max_wait_s) and run again"
            error = (refusals or {}).get(status, ForgeError)
            raise error(f"GitHub refused to {what} ({status}): {message}", hint=hint) from None
        except RequestError as exc:
            raise ForgeError(
                f"cannot reach GitHub at {self.config.api_url} to {what}: {exc.exc}", hint="check forge.api_url and the network"
            ) from None

    def graphql(self, g: GitHub, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        """One GraphQL request. GitHub reports a GraphQL rate limit in the body of a 200 answer,
        which githubkit raises after its own retries are done; so it is retried here, with the
        same ``RetryPolicy``."""
        from githubkit.exception import RateLimitExceeded

        attempt = 0
        while True:
            try:
                return g.graphql.request(query, variables)
            except RateLimitExceeded as exc:
                decision = self.retry(exc, attempt)
                if not decision.do_retry:
                    raise
                self.sleep(decision.retry_after.total_seconds() if decision.retry_after else 0.0)
                attempt += 1

    # ---- the interface -------------------------------------------------------------------

    def authority(self) -> ApprovalAuthority:
        if not self.config.reviewer_login:
            raise ConfigError(
                "forge.reviewer_login is not set: kb cannot tell which approvals are the Reviewer's",
                hint="set forge.reviewer_login to the reviewer identity's login (e.g. kb-reviewer[bot]) in kb.config.yaml",
            )
        return ForgeAuthority(self, self.config.reviewer_login)

    def open_change(self, branch: str, title: str, body: str, labels: tuple[str, ...]) -> Change:
        base = self.config.default_branch
        pr = self.call(
            "proposer",
            f"open a pull request for {branch}",
            lambda g: g.rest.pulls.create(self.owner, self.name, title=title, head=branch, base=base, body=body),
        )
        change = to_change(pr.parsed_data)
        self.set_labels(change, labels)
        return replace(change, labels=labels)

    def update_change(self, change: Change, title: str, body: str, labels: tuple[str, ...]) -> Change:
        pr = self.call(
            "proposer",
            f"update pull request {change.ref}",
            lambda g: g.rest.pulls.update(self.owner, self.name, change.number, title=title, body=body),
            change.ref,
        )
        self.set_labels(change, labels)
        return replace(to_change(pr.parsed_data), labels=labels)

    def get_change(self, ref: str) -> Change:
        number = ref.removeprefix("#")
        if not number.isdigit():
            found = self.find_changes(ref, state="all")
            if not found:
                raise ForgeError(f"no pull request for branch {ref} in {self.config.repository}", hint="open one with `kb pr open BRANCH`")
            return found[0]
        pr = self.call(
            "proposer", f"read pull request #{number}", lambda g: g.rest.pulls.get(self.owner, self.name, int(number)), f"#{number}"
        )
        return to_change(pr.parsed_data)

    def find_changes(self, branch: str | None = None, state: Literal["open", "all"] = "open") -> list[Change]:
        head = f"{self.owner}:{branch}" if branch else None

        def listing(g: GitHub) -> list[Change]:
            pages = g.rest.paginate(g.rest.pulls.list, owner=self.owner, repo=self.name, state=state, head=head, per_page=100)
            return [to_change(pr) for pr in pages]

        changes = self.call("proposer", "list pull requests", listing)
        return [c for c in changes if branch is None or c.branch == branch]  # newest first, as GitHub lists them

    def diff_hunks(self, change: Change) -> list[Hunk]:
        def files(g: GitHub) -> list[Hunk]:
            out: list[Hunk] = []
            entries: Any = g.rest.paginate(
                g.rest.pulls.list_files, owner=self.owner, repo=self.name, pull_number=change.number, per_page=100
            )
            for entry in entries:
                out.extend(patch_hunks(entry.filename, entry.patch or ""))
            return out

        return self.call("proposer", f"list the files of {change.ref}", files, change.ref)

    def submit_review(self, change: Change, review: ReviewSubmission) -> None:
        event: Literal["APPROVE", "REQUEST_CHANGES"] = "APPROVE" if review.verdict == "approve" else "REQUEST_CHANGES"
        comments: Any = [{"path": c.path, "line": c.line, "side": "RIGHT", "body": c.body} for c in review.comments]

        def submit(g: GitHub) -> object:
            pulls = g.rest.pulls
            if comments:
                return pulls.create_review(
                    self.owner, self.name, change.number, commit_id=change.head, body=review.body, event=event, comments=comments
                ).parsed_data
            return pulls.create_review(
                self.owner, self.name, change.number, commit_id=change.head, body=review.body, event=event
            ).parsed_data

        self.call("reviewer", f"submit a review on {change.ref}", submit, change.ref)

    def reviews(self, change: Change) -> list[ForgeReview]:
        def listing(g: GitHub) -> list[ForgeReview]:
            pages: Any = g.rest.paginate(
                g.rest.pulls.list_reviews, owner=self.owner, repo=self.name, pull_number=change.number, per_page=100
            )
            return [
                ForgeReview(
                    author=r.user.login if r.user else "",
                    commit=r.commit_id or "",
                    state=review_state(r.state),
                    body=r.body,
                    submitted_at=r.submitted_at.isoformat() if r.submitted_at else "",
                )
                for r in pages
            ]

        return self.call("proposer", f"list the reviews of {change.ref}", listing, change.ref)

    def set_status(self, commit: str, context: str, state: StatusState, description: str) -> None:
        self.call(
            "proposer",
            f"set status {context} on {commit[:10]}",
            lambda g: (
                g.rest.repos.create_commit_status(
                    self.owner, self.name, commit, state=state, context=context, description=description[:140]
                ).parsed_data
            ),
        )

    def checks(self, commit: str) -> ChecksState:
        """The commit statuses and the check runs on ``commit``, every page of each (a workflow with
        many jobs reports more than 100 check runs); a status and a check run of one name: the status."""

        def read(g: GitHub) -> ChecksState:
            states: dict[str, str] = {}
            statuses: Any = g.rest.paginate(
                g.rest.repos.get_combined_status_for_ref,
                map_func=lambda r: r.parsed_data.statuses,
                owner=self.owner,
                repo=self.name,
                ref=commit,
                per_page=100,
            )
            for status in statuses:
                states.setdefault(status.context, status.state)  # the latest of each context
            runs: Any = g.rest.paginate(
                g.rest.checks.list_for_ref,
                map_func=lambda r: r.parsed_data.check_runs,
                owner=self.owner,
                repo=self.name,
                ref=commit,
                per_page=100,
            )
            for run in runs:
                states.setdefault(run.name, run.conclusion or run.status)
            return ChecksState(states)

        return self.call("proposer", f"read the checks of {commit[:10]}", read)

    def branch_rules(self, branch: str) -> tuple[dict[str, Any], list[str]]:
        """The repository's settings (only the allow_* fields are read) and the types of the rules on ``branch``."""

        def read(g: GitHub) -> tuple[Any, list[str]]:
            settings = g.rest.repos.get(self.owner, self.name).json()
            rules: Any = g.rest.paginate(g.rest.repos.get_branch_rules, owner=self.owner, repo=self.name, branch=branch, per_page=100)
            return settings, [str(rule.type) for rule in rules]

        return self.call("proposer", f"read the merge methods of {self.config.repository}", read)

    def merge_method(self, branch: str) -> Literal["merge", "squash"]:
        """The merge method the repository allows (``allow_*_merge`` of the repository, the
        ``required_linear_history`` rule of ``branch``): a merge commit, else a squash, whose message
        is kb's either way. A rebase keeps the branch's own commit messages and would drop kb's merge
        record, so a repository that allows only rebase merges is refused (docs/github.md)."""

        settings, rules = self.branch_rules(branch)
        if settings.get("allow_merge_commit") is not False and "required_linear_history" not in rules:
            return "merge"
        if settings.get("allow_squash_merge") is not False:
            return "squash"
        raise ForgeError(
            f"{self.config.repository} allows no merge method that keeps kb's merge record (merge commits "
            + ("are refused by the linear-history rule" if settings.get("allow_merge_commit") is not False else "and squash merges are off")
            + "; a rebase merge would drop it)",
            hint="allow squash merging in the repository's settings (docs/github.md, merge methods)",
        )

    def set_labels(self, change: Change, labels: tuple[str, ...]) -> None:
        data = {"labels": list(labels)}
        self.call(
            "proposer",
            f"label {change.ref}",
            lambda g: g.rest.issues.set_labels(self.owner, self.name, change.number, data=data).parsed_data,
            change.ref,
        )

    def merge(self, change: Change, expected_head: str, title: str, message: str) -> str:
        if "merge_queue" in self.branch_rules(change.base_branch)[1]:
            return self.merge_through_queue(change, expected_head)
        method = self.merge_method(change.base_branch)
        result = self.call(
            "proposer",
            f"merge {change.ref}",
            lambda g: (
                g.rest.pulls.merge(
                    self.owner,
                    self.name,
                    change.number,
                    sha=expected_head,
                    commit_title=title,
                    commit_message=message,
                    merge_method=method,
                ).parsed_data
            ),
            change.ref,
            refusals={409: StaleApprovalError},  # the head moved after the review: the approval is stale
        )
        return result.sha

    def merge_through_queue(self, change: Change, expected_head: str) -> str:
        """A branch that requires a merge queue: enqueue the pull request (``enqueuePullRequest``,
        refused if the head moved), then wait up to ``forge.checks_wait_s`` for the queue to merge
        it (the required checks run on the queue's ref, on ``merge_group``); still queued then is
        the state "waiting for checks". The merge commit is the queue's: its message is GitHub's,
        not kb's merge record (docs/github.md)."""
        from pipeline.forge.base import ChecksPendingError

        def pull(g: GitHub) -> Any:  # JSON: githubkit's 2026-03-10 model has no merge_commit_sha, 2022-11-28 (the default) has
            return g.rest.pulls.get(self.owner, self.name, change.number).json()

        node = self.call("proposer", f"read pull request {change.ref}", pull, change.ref)["node_id"]
        variables = {"pullRequestId": node, "expectedHeadOid": expected_head}
        self.call("proposer", f"add {change.ref} to the merge queue", lambda g: self.graphql(g, ENQUEUE_MUTATION, variables), change.ref)
        waited, bound = 0.0, self.config.checks_wait_s
        while True:
            pr = self.call("proposer", f"read pull request {change.ref}", pull, change.ref)
            if pr.get("merged_at") and pr.get("merge_commit_sha"):
                return str(pr["merge_commit_sha"])
            if pr.get("state") != "open":
                raise ForgeError(f"{change.ref} was closed while in the merge queue", hint=f"reopen {change.ref} and merge again")
            if waited >= bound:
                raise ChecksPendingError(
                    f"waiting for checks on {change.ref}: it is in the merge queue of {change.base_branch}, "
                    f"not merged after {bound:g}s (the required checks run on the queue's ref)",
                    hint="GitHub merges it when they pass; `kb pr status` shows when, or raise forge.checks_wait_s",
                )
            step = min(QUEUE_POLL_S, bound - waited)
            self.sleep(step)
            waited += step

    def review_threads(self, change: Change) -> list[ReviewThread]:
        def read(g: GitHub) -> list[ReviewThread]:
            threads: list[ReviewThread] = []
            cursor = None
            while True:
                variables = {"owner": self.owner, "name": self.name, "number": change.number, "cursor": cursor}
                data = self.graphql(g, THREADS_QUERY, variables)
                page = ((data.get("repository") or {}).get("pullRequest") or {}).get("reviewThreads") or {}
                threads += [thread for node in page.get("nodes") or [] if (thread := to_thread(node)) is not None]
                info = page.get("pageInfo") or {}
                if not info.get("hasNextPage"):
                    return threads
                cursor = info.get("endCursor")

        return self.call("reviewer", f"read the review threads of {change.ref}", read, change.ref)

    def reply(self, change: Change, thread: ReviewThread, body: str) -> None:
        self.call(
            "reviewer",
            f"reply in a review thread of {change.ref}",
            lambda g: (
                g.rest.pulls.create_reply_for_review_comment(self.owner, self.name, change.number, thread.comment_id, body=body).parsed_data
            ),
            change.ref,
        )

    def resolve(self, thread: ReviewThread) -> None:
        self.call("reviewer", f"resolve review thread {thread.id}", lambda g: self.graphql(g, RESOLVE_MUTATION, {"threadId": thread.id}))


def to_thread(node: dict[str, Any]) -> ReviewThread | None:
    """A ``PullRequestReviewThread`` node in the forge's words (None for a thread with no comment left)."""
    comments = (node.get("comments") or {}).get("nodes") or []
    if not comments or comments[0].get("databaseId") is None:
        return None
    first = comments[0]
    return ReviewThread(
        id=str(node["id"]),
        comment_id=int(first["databaseId"]),
        path=str(node.get("path") or ""),
        line=node.get("line"),
        body=str(first.get("body") or ""),
        author=bare_login(str((first.get("author") or {}).get("login") or "")),
        resolved=bool(node.get("isResolved")),
        outdated=bool(node.get("isOutdated")),
    )


def github_message(text: str) -> str:
    """GitHub's error message, with the details of its ``errors`` list (one line)."""
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return text.strip().splitlines()[0][:300] if text.strip() else "no message"
    if not isinstance(data, dict):
        return str(data)[:300]
    message = str(data.get("message", "no message"))
    details = []
    for error in data.get("errors") or []:
        details.append(str(error.get("message") or error.get("code") or error) if isinstance(error, dict) else str(error))
    return (message + (f" ({'; '.join(details)})" if details else "")).replace("\n", " ")[:500]


def review_state(state: str) -> ReviewState:
    known: dict[str, ReviewState] = {
        "APPROVED": "APPROVED",
        "CHANGES_REQUESTED": "CHANGES_REQUESTED",
        "DISMISSED": "DISMISSED",
        "PENDING": "PENDING",
    }
    return known.get(state, "COMMENTED")


def patch_hunks(path: str, patch: str) -> list[Hunk]:
    return [Hunk(path, int(m.group(1)), int(m.group(2) or 1)) for m in HUNK_RE.finditer(patch) if (m.group(2) or "1") != "0"]


def to_change(pr: Any) -> Change:
    """A pull request (githubkit's PullRequest or PullRequestSimple) in the forge's words."""
    state: Literal["open", "closed", "merged"] = "merged" if pr.merged_at else "open" if pr.state == "open" else "closed"
    return Change(
        number=pr.number,
        branch=pr.head.ref,
        head=pr.head.sha,
        base_branch=pr.base.ref,
        state=state,
        title=pr.title,
        body=pr.body or "",
        labels=tuple(label.name for label in pr.labels),
        author=pr.user.login if pr.user else "",
        url=pr.html_url,
        closed_by_person=state == "closed",
    )
