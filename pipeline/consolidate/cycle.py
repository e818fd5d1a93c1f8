"""One consolidation cycle: batches, branches through review and merge, resume.

The plan is pure (``plan.plan_cycle``: a commit in, a plan out). ``run_consolidation`` holds the repository
write lock for the whole run; for each batch still to do it runs the jobs on main's current
head, and when they change anything proposes the change on a branch named from a hash of the
job's inputs, has it reviewed (``pipeline.review``) and merged (``pipeline.merge``), then records
the outcome in the coverage record. A run stops at the caps and the next run resumes from the
record; a cycle is complete when every batch is done and coverage is 100%.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pygit2

from agents.family import check_distinct_families
from agents.llm import Usage
from agents.protocols import AgentIdentity, ProposalTask
from agents.schemas import Comment
from kb.clock import iso_utc, today_utc
from kb.errors import ConflictError, UsageError
from kb.repo import Repo, diff_trees
from pipeline.backend import branch_backend
from pipeline.consolidate.coverage import found_records, record_batch, settle_human
from pipeline.consolidate.forge_route import ForgeRoute
from pipeline.consolidate.model import ModelJobs, model_jobs_for
from pipeline.consolidate.plan import branch_for, plan_cycle, run_jobs
from pipeline.consolidate.proposer import CONSOLIDATION_PROPOSER, ConsolidationProposer
from pipeline.consolidate.record import (
    FINISHED,
    NEEDS_HUMAN,
    Action,
    Batch,
    BatchState,
    Cycle,
    CycleStatus,
    FoundRecord,
    Retired,
    Withdrawal,
    all_cycles,
    commit_record,
    coverage,
    current_cycle,
)
from pipeline.consolidate.result import JobResult
from pipeline.consolidate.status import PlannedBatch, RunReport, RunStatus, content_digest, report_of
from pipeline.consolidate.view import CommitView, Texts, root_of, span_key
from pipeline.forge.base import Forge
from pipeline.merge import merge_branch, merged_as
from pipeline.propose import trailers_for
from pipeline.records import set_status, status_of
from pipeline.review import clean_workspace, review_branch
from pipeline.roles import Agents, make_agents
from pipeline.workspace import open_workspace, remove_workspace


def _known_branches(cycles: list[Cycle]) -> dict[str, BatchState]:
    """Every branch a cycle opened -> its last recorded state."""
    out: dict[str, BatchState] = {}
    for cycle in sorted(cycles, key=lambda c: c.started_at):
        for batch in cycle.batches:
            if batch.branch:
                out[batch.branch] = batch.state
    return out


def _dropped_spans(view: CommitView, changes: dict[str, str], root: str) -> set[str]:
    """Spans cited in ``root`` before the change and by no page after it."""
    texts = Texts(view, dict(changes))
    before: set[str] = set()
    after: set[str] = set()
    for path in set(view.files) | set(changes):
        if root_of(path) != root:
            continue
        old = view.page(path)
        new = texts.page(path)
        for page, into in ((old, before), (new, after)):
            if page is not None:
                into.update(span_key(c.evidence_id, c.start, c.end) for c in page.structure.citations if c.evidence_id)
    return before - after


@dataclass
class Caps:
    max_changes: int
    max_pages: int
    max_diff_lines: int
    max_cost_usd: float
    max_seconds: float


def _diff_lines(repo: Repo, base: pygit2.Commit, branch: str) -> int:
    head = repo.git.branches.local[branch].peel(pygit2.Commit)
    stats = diff_trees(base.tree, head.tree).stats
    return int(stats.insertions + stats.deletions)


def _trailers(
    cycle: Cycle, batch: Batch, jobs: list[tuple[str, JobResult]], base: pygit2.Commit, identity: AgentIdentity, round_no: int
) -> dict[str, str]:
    """The proposal trailers of a batch's commits (evidence its claims cite), with the cycle and job."""
    cited = sorted(
        {span.split("#")[0] for _, r in jobs for key in r.claims if key in cycle.claims and (span := cycle.claims[key].cites or "")}
    )
    return trailers_for(tuple(cited), str(base.id), identity, round_no) | {"Kb-Consolidation": cycle.cycle, "Kb-Job": batch.id}


def _propose_batch(
    repo: Repo,
    cycle: Cycle,
    batch: Batch,
    jobs: list[tuple[str, JobResult]],
    branch: str,
    head: pygit2.Commit,
    identity: AgentIdentity = CONSOLIDATION_PROPOSER,
) -> None:
    allowed = (batch.scope_root + "/",)
    workspace = open_workspace(repo, branch, base=str(head.id), allowed=allowed)
    trailers = _trailers(cycle, batch, jobs, head, identity, 1)

    def checkpoint(message: str) -> None:
        workspace.commit(message, trailers)

    proposer = ConsolidationProposer(jobs, checkpoint, identity)
    proposer.propose(ProposalTask((), allowed), branch_backend(workspace, head))


def run_consolidation(
    repo: Repo,
    scope: str = "all",
    batch_pages: int | None = None,
    max_changes: int | None = None,
    plan_only: bool = False,
    today: str | None = None,
    agents: Agents | None = None,
    build_index: bool = True,
    model: ModelJobs | None = None,
    forge: Forge | None = None,
) -> RunReport:
    """Start or resume the repository's cycle and run its batches up to the caps. The jobs ask
    ``model`` (default: the configured Proposer model, none offline) what they cannot decide.
    With ``forge: {kind: github}`` (or ``forge`` given) each branch goes through a pull request."""
    config = repo.config.consolidation
    caps = Caps(max_changes or config.max_changes, config.max_pages, config.max_diff_lines, config.max_cost_usd, config.max_seconds)
    today = today or today_utc()
    merged_any = False
    with repo.write_lock():
        route = None if plan_only else ForgeRoute.for_repo(repo, forge)
        report, merged_any = _run_locked(repo, scope, batch_pages or config.batch_pages, caps, plan_only, today, agents, model, route)
    if build_index and merged_any:
        from kb.retrieval.build import build_index as build

        build(repo)
    return report


def _run_locked(
    repo: Repo,
    scope: str,
    batch_pages: int,
    caps: Caps,
    plan_only: bool,
    today: str,
    agents: Agents | None,
    model: ModelJobs | None,
    route: ForgeRoute | None,
) -> tuple[RunReport, bool]:
    if route is not None:
        route.sync()  # the cycle starts from the forge's default branch
    head = repo.head()
    if head is None:
        raise ConflictError("the repository has no commits yet", hint="run `kb init` first")
    cycle = current_cycle(repo, head)
    if cycle is not None and cycle.status is CycleStatus.OPEN:
        if scope not in ("all", cycle.scope):
            raise UsageError(
                f"cycle {cycle.cycle} (scope {cycle.scope}) is still open: one cycle at a time",
                hint="finish it with `kb consolidate` (see `kb consolidate status`)",
            )
    elif cycle is not None and _nothing_new(repo, cycle, head, scope, batch_pages, today):
        return report_of(cycle, RunStatus.NOTHING_TO_DO), False
    else:
        cycle = plan_cycle(repo, head, scope, batch_pages, iso_utc())
        if not plan_only:
            commit_record(repo, cycle, f"Consolidation {cycle.cycle}: plan, {len(cycle.batches)} batch(es)")
            if route is not None:
                route.publish()
    if plan_only:
        return _plan_report(repo, cycle, head, today), False
    agents = agents or make_agents(repo.config)
    model = model or model_jobs_for(repo.config)
    identity = model.identity if model is not None else CONSOLIDATION_PROPOSER
    check_distinct_families(identity.family, agents.reviewer.identity.family, repo.config.models.allow_same_family)
    run = _Run(repo, cycle, caps, agents, today, _known_branches(all_cycles(repo)), report_of(cycle), model, route)
    for batch in cycle.batches:
        if batch.state in FINISHED:
            continue
        run.report.stopped = run.cap_reached()
        if run.report.stopped:
            break
        run.batch(batch)
    _finish(repo, cycle, route)
    final = report_of(cycle)
    final.batches_done, final.merged, final.needs_human, final.stopped = (
        run.report.batches_done,
        run.report.merged,
        run.report.needs_human,
        run.report.stopped,
    )
    final.found = [f for b in cycle.batches for f in b.found]
    final.skipped = [f"{b.id}: {s}" for b in cycle.batches for s in b.skipped or []]
    return final, bool(run.report.merged)


@dataclass
class _Run:
    """One invocation's pass over the cycle's batches, with its caps."""

    repo: Repo
    cycle: Cycle
    caps: Caps
    agents: Agents
    today: str
    known: dict[str, BatchState]
    report: RunReport
    model: ModelJobs | None = None
    route: ForgeRoute | None = None  # pull requests on the forge, instead of local merges
    started: float = field(default_factory=time.monotonic)
    usage: Usage = field(default_factory=Usage)
    opened: int = 0
    halt: str = ""  # why no further batch may start (the forge has too many open pull requests)
    pages_seen: int = 0

    def cap_reached(self) -> str:
        caps = self.caps
        if self.opened >= caps.max_changes:
            return f"max_changes ({caps.max_changes}) reached"
        if self.pages_seen >= caps.max_pages:
            return f"max_pages ({caps.max_pages}) reached"
        if time.monotonic() - self.started > caps.max_seconds:
            return f"max_seconds ({caps.max_seconds:g}) reached"
        if self.cost_usd() > caps.max_cost_usd:
            return f"max_cost_usd ({caps.max_cost_usd:g}) reached"
        return self.halt

    def cost_usd(self) -> float:
        return self.usage.cost_usd + (self.model.usage.cost_usd if self.model is not None else 0.0)

    def record(self, batch: Batch, what: str) -> None:
        commit_record(self.repo, self.cycle, f"Consolidation {self.cycle.cycle}: {batch.id} {what}")
        if self.route is not None:
            self.route.publish()

    def leave(self, batch: Batch, branch: str, reason: str, found: list[FoundRecord] | None = None) -> None:
        tip = self.repo.git.branches.local[branch].peel(pygit2.Commit)
        set_status(self.repo, str(tip.id), NEEDS_HUMAN, {"branch": branch, "reason": reason, "rounds": 1})
        batch.state = BatchState.NEEDS_HUMAN
        if found is not None:
            batch.found = found
        self.report.needs_human.append(branch)
        self.record(batch, f"left for a person: {reason}")

    def batch(self, batch: Batch) -> None:
        repo, cycle = self.repo, self.cycle
        if batch.state is BatchState.NEEDS_HUMAN and batch.branch:
            self.settle(batch)
            return
        head = repo.head()
        assert head is not None
        view = CommitView(repo, head)
        jobs = run_jobs(view, batch, self.today, self.model)
        changes = {p: t for _, r in jobs for p, t in r.changes.items()}
        changes = {p: t for p, t in changes.items() if view.text(p) != t}
        self.pages_seen += len(batch.pages) or len(view.files)
        if not changes:
            record_batch(cycle, batch, jobs, str(head.id), BatchState.DONE)
            self.report.batches_done.append(batch.id)
            self.record(batch, "verified, no change")
            return
        branch = batch.branch = branch_for(batch, view, changes)
        if self.known.get(branch) in (BatchState.NEEDS_HUMAN, BatchState.DECLINED) and branch not in repo.git.branches.local:
            self.decline(batch, jobs, str(head.id), "declined earlier, not reopened")  # a person closed it: never reopened
            return
        pull = self.route.change(branch) if self.route is not None else None
        if pull is not None and pull.state == "closed":  # a person closed its pull request: never reopened
            self.decline(batch, jobs, str(head.id), f"declined: {pull.ref} was closed by a person, not reopened")
            return
        done = merged_as(repo, branch) if branch not in repo.git.branches.local else None
        if done is None:
            if branch in repo.git.branches.local:  # proposed by a run that was killed: left for a person, or redone
                tip = repo.git.branches.local[branch].peel(pygit2.Commit)
                if status_of(repo, str(tip.id)) is not None:
                    batch.state = BatchState.NEEDS_HUMAN
                    self.report.needs_human.append(branch)
                    return
                remove_workspace(repo, branch)
                repo.git.branches.local.delete(branch)
            self.halt = self.route.full() if self.route is not None else ""
            if self.halt:  # opened in a later run, from the same inputs under the same name
                return
            head = self._retire_dropped(batch, view, changes) or head
            self.opened += 1
            _propose_batch(repo, cycle, batch, jobs, branch, head, self.model.identity if self.model else CONSOLIDATION_PROPOSER)
            if _diff_lines(repo, head, branch) > self.caps.max_diff_lines:
                self.leave(batch, branch, f"diff over max_diff_lines ({self.caps.max_diff_lines})")
                return
            try:
                converged = self.converge(batch, branch, head, jobs)
            except ConflictError as exc:
                if self.route is None:
                    raise
                self.decline(batch, jobs, str(head.id), f"declined: {exc.message}")  # the forge does not reopen what a person closed
                return
            if converged is None:
                return
            commit, jobs = converged
        else:
            commit = done.commit
        self.merged(batch, branch, jobs, commit)

    def merged(self, batch: Batch, branch: str, jobs: list[tuple[str, JobResult]], commit: str) -> None:
        self.report.merged.append(branch)
        record_batch(self.cycle, batch, jobs, commit, BatchState.DONE)
        self.report.batches_done.append(batch.id)
        follow = _follow_up(self.cycle, batch, jobs)
        self.record(batch, "merged" + (f"; the rest of its change follows in {follow.id}" if follow else ""))

    def settle(self, batch: Batch) -> None:
        """A batch left for a person: has the person merged, closed or deleted it yet?"""
        pull = self.route.change(str(batch.branch)) if self.route is not None else None
        settle_human(self.repo, self.cycle, batch, pull.state if pull is not None else None)
        if batch.state is not BatchState.NEEDS_HUMAN:
            self.record(batch, batch.state.value)

    def decline(self, batch: Batch, jobs: list[tuple[str, JobResult]], commit: str, why: str) -> None:
        record_batch(self.cycle, batch, jobs, commit, BatchState.DECLINED)
        batch.found.append(FoundRecord(kind="declined", path="", detail=why, fixed=False))
        self.report.batches_done.append(batch.id)
        self.record(batch, why)

    def converge(
        self, batch: Batch, branch: str, base: pygit2.Commit, jobs: list[tuple[str, JobResult]]
    ) -> tuple[str, list[tuple[str, JobResult]]] | None:
        """Review rounds, like ``kb run``'s: while the Reviewer requests changes (up to
        ``loop.max_rounds``), the consolidation Proposer revises by withdrawing its change to each
        page a comment names (that page stays as it was, recorded as kept, or as disputed for a
        person when the comment is a contradiction on the page). It merges when approved; a
        branch it cannot revise, or still refused after the last round, is left for a person.
        Returns the merge commit and the jobs as finally run, or None."""
        max_rounds = self.repo.config.loop.max_rounds
        withdrawn: dict[str, Withdrawal] = {}
        round_no = 1
        while True:
            review = self.route.review(branch) if self.route is not None else review_branch(self.repo, branch, round_no, self.agents)
            self.usage = self.usage + review.usage
            if review.verdict == "approve":
                break
            found = [FoundRecord(kind="review", path=c.path, detail=c.message, fixed=False) for c in review.comments]
            if round_no >= max_rounds:
                self.leave(batch, branch, f"not approved after {round_no} review round(s): {review.summary}", found)
                return None
            revised = self.withdraw(batch, branch, base, review.comments, round_no, withdrawn)
            if revised is None:
                where = ", ".join(sorted({c.path or "(no page)" for c in review.comments})) or "(no comment)"
                self.leave(batch, branch, f"the Reviewer's requests name no page this change touched ({where}): {review.summary}", found)
                return None
            jobs = revised
            round_no += 1
        batch.rounds = round_no
        if withdrawn:
            batch.withdrawn = withdrawn
        if self.route is not None:
            return self.route.merge(branch), jobs
        return merge_branch(self.repo, branch, build_index=False).commit, jobs

    def withdraw(
        self,
        batch: Batch,
        branch: str,
        base: pygit2.Commit,
        comments: tuple[Comment, ...],
        round_no: int,
        withdrawn: dict[str, Withdrawal],
    ) -> list[tuple[str, JobResult]] | None:
        """The revision: every page a comment names that the branch changed is withdrawn (it
        stays as at ``base``), and the batch's jobs run again without those pages, so what
        depends on them (an index entry, a merge into them) is redone or left out; the branch
        becomes that change, in one commit. ``withdrawn`` gains the pages (path -> the comment's
        kind and message). Returns the jobs as run again, or None when no comment names a page
        the branch changed."""
        workspace = clean_workspace(self.repo, branch)
        changed = {d.new_file.path for d in diff_trees(base.tree, workspace.head().tree).deltas}
        named = {
            c.path: Withdrawal(kind=c.kind, reason=c.message) for c in reversed(comments) if c.path in changed and c.path not in withdrawn
        }
        if not named:
            return None
        withdrawn |= named
        jobs = run_jobs(CommitView(self.repo, base), batch, self.today, self.model, frozenset(withdrawn))
        view = CommitView(self.repo, base)
        new = {p: t for _, r in jobs for p, t in r.changes.items()}
        for path in sorted(changed | set(new)):
            text = new.get(path) or view.text(path)
            if text is not None and workspace.read_text(path) != text:
                workspace.write_page(path, text)
        lines = "\n".join(f"- {path}: {what.reason[:200]}" for path, what in sorted(named.items()))
        message = f"Revise after review round {round_no}: withdraw the change to {len(named)} page(s)\n\n{lines}"
        workspace.commit(message, self.trailers(batch, jobs, base, round_no + 1), allow_empty=True)
        return jobs

    def trailers(self, batch: Batch, jobs: list[tuple[str, JobResult]], base: pygit2.Commit, round_no: int) -> dict[str, str]:
        return _trailers(self.cycle, batch, jobs, base, self.model.identity if self.model else CONSOLIDATION_PROPOSER, round_no)

    def _retire_dropped(self, batch: Batch, view: CommitView, changes: dict[str, str]) -> pygit2.Commit | None:
        """Spans the change would leave uncited are listed as retired, with the reason, before the
        branch is opened (the conservation rule reads the record on the branch)."""
        dropped = _dropped_spans(view, changes, batch.scope_root)
        if not dropped:
            return None
        self.cycle.retired += [Retired(span=s, reason=f"no longer cited after {batch.id}", batch=batch.id) for s in sorted(dropped)]
        self.record(batch, f"retires {len(dropped)} span(s)")
        return self.repo.head()


def _follow_up(cycle: Cycle, batch: Batch, jobs: list[tuple[str, JobResult]]) -> Batch | None:
    """A batch whose change was cut to fit a review (a split moving only the sections that fit)
    is followed, right after it, by a batch over the same pages: it runs on the merged result and
    proposes the next part. Recorded in the plan, so a killed run resumes with it."""
    if not any(result.again for _, result in jobs):
        return None
    stem, _, n = batch.id.partition("+")
    follow = batch.model_copy(
        update={
            "id": f"{stem}+{int(n or 1) + 1}",
            "state": BatchState.PENDING,
            "branch": None,
            "commit": None,
            "found": [],
            "skipped": None,
        }
    )
    follow.rounds = follow.withdrawn = None
    cycle.batches.insert(cycle.batches.index(batch) + 1, follow)
    return follow


def _nothing_new(repo: Repo, cycle: Cycle, head: pygit2.Commit, scope: str, batch_pages: int, today: str) -> bool:
    """True when the last cycle is complete, covered ``scope``, nothing but the record changed
    since it ended, and its jobs would change nothing today (a fact may have expired meanwhile):
    a new cycle would only re-record the same coverage, so none is started and nothing is written."""
    if cycle.status is not CycleStatus.COMPLETE or cycle.scope not in ("all", scope):
        return False
    if cycle.content != content_digest(repo, head):
        return False
    view = CommitView(repo, head)
    fresh = plan_cycle(repo, head, scope, batch_pages, cycle.started_at)
    for batch in fresh.batches:
        for _, result in run_jobs(view, batch, today):
            if any(view.text(p) != t for p, t in result.changes.items()):
                return False
    return True


def _finish(repo: Repo, cycle: Cycle, route: ForgeRoute | None = None) -> None:
    if cycle.status is not CycleStatus.OPEN or any(b.state not in FINISHED for b in cycle.batches):
        return
    for entry in list(cycle.pages.values()) + list(cycle.claims.values()):
        if entry.action is Action.PENDING:  # a page no batch reached (removed meanwhile by another change)
            entry.action = Action.KEPT
            entry.reason = "not present when its batch ran"
    cycle.status = CycleStatus.COMPLETE
    cycle.finished_at = iso_utc()
    from pipeline.consolidate.replay import replay_score

    head = repo.head()
    assert head is not None
    cycle.replay = replay_score(repo, head)
    cycle.content = content_digest(repo, head)
    covered, total = coverage(cycle)
    percent = 100.0 if not total else round(100.0 * covered / total, 1)
    commit_record(repo, cycle, f"Consolidation {cycle.cycle}: complete, coverage {percent:g}% ({covered}/{total} checked)")
    if route is not None:
        route.publish()


def _plan_report(repo: Repo, cycle: Cycle, head: pygit2.Commit, today: str) -> RunReport:
    """What the cycle would do now: each batch still to do, with what its jobs would find and skip
    (the offline jobs: a plan spends nothing on a model)."""
    report = report_of(cycle, RunStatus.PLAN)
    view = CommitView(repo, head)
    for batch in cycle.batches:
        if batch.state in FINISHED:
            continue
        jobs = run_jobs(view, batch, today)
        changes = sorted({p for _, r in jobs for p in r.changes})
        skipped = [f"{name}: {line}" for name, r in jobs for line in r.skipped]
        report.plan.append(PlannedBatch(batch.id, len(batch.pages), changes, found_records(jobs), skipped))
    return report
