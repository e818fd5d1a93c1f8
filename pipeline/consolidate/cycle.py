"""One consolidation cycle: plan, batches, branches through review and merge, coverage, resume.

``plan_cycle`` is pure (a commit in, a plan out). ``run_consolidation`` holds the repository
write lock for the whole run; for each batch still to do it runs the jobs on main's current
head, and when they change anything proposes the change on a branch named from a hash of the
job's inputs, has it reviewed (``pipeline.review``) and merged (``pipeline.merge``), then records
the outcome in the coverage record. A run stops at the caps and the next run resumes from the
record; a cycle is complete when every batch is done and coverage is 100%.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import pygit2

from agents.family import check_distinct_families
from agents.llm import Usage
from agents.protocols import AgentIdentity, ProposalTask
from agents.schemas import Comment
from kb.clock import iso_utc, today_utc
from kb.errors import ConflictError, UsageError
from kb.evidence import ledger_at
from kb.repo import Repo, diff_trees
from pipeline.backend import branch_backend
from pipeline.consolidate.forge_route import ForgeRoute
from pipeline.consolidate.jobs import (
    JobResult,
    current_conflicts,
    merge_duplicates,
    qualify_conflicts,
    regenerate_index,
    regrounding,
    repair_links,
    retire_expired,
    rewrite_l0,
)
from pipeline.consolidate.model import ModelJobs, model_jobs_for
from pipeline.consolidate.proposer import CONSOLIDATION_PROPOSER, ConsolidationProposer
from pipeline.consolidate.record import RECORD_DIR, REPLAY_FILE, Cycle, all_cycles, commit_record, coverage, current_cycle
from pipeline.consolidate.structure import merge_tiny, rewrite_l1, split_oversized
from pipeline.consolidate.view import CommitView, Texts, folder_of, root_of, span_key
from pipeline.forge.base import Forge
from pipeline.merge import merge_branch, merged_as
from pipeline.propose import trailers_for
from pipeline.records import set_status, status_of
from pipeline.review import clean_workspace, review_branch
from pipeline.roles import Agents, make_agents
from pipeline.workspace import BRANCH_PREFIX, open_workspace, remove_workspace

JOBS_VERSION = "1"  # part of every branch name: new job logic may propose again on the same pages
ACTION_RANK = {"pending": 0, "verified": 1, "kept": 2, "changed": 3, "qualified": 4, "disputed": 5, "merged": 6, "retired": 7}


def scope_roots(scope: str, view: CommitView) -> list[str]:
    """``all``, ``knowledge`` or ``users/<id>`` -> the scope roots it names (that have pages)."""
    roots = sorted({root_of(p) for p in view.files})
    if scope == "all":
        return roots
    if scope == "knowledge" or (scope.startswith("users/") and scope.count("/") == 1 and len(scope) > 6):
        if scope not in roots:
            raise UsageError(f"scope {scope!r} has no pages", hint=f"scopes with pages: all, {', '.join(roots)}")
        return [scope]
    raise UsageError(f"invalid scope {scope!r}", hint="use all, knowledge, or users/<id>")


def plan_cycle(repo: Repo, head: pygit2.Commit, scope: str, batch_pages: int, started: str) -> Cycle:
    """The plan and the empty coverage record of a new cycle from ``head``."""
    view = CommitView(repo, head)
    roots = scope_roots(scope, view)
    in_scope = [p for p in sorted(view.files) if root_of(p) in roots]
    folders: dict[str, list[str]] = {}
    for path in in_scope:
        folders.setdefault(folder_of(path), []).append(path)
    batches: list[dict[str, Any]] = []
    for folder, paths in sorted(folders.items()):
        for n in range(0, len(paths), batch_pages):
            chunk = paths[n : n + batch_pages]
            batches.append({"id": f"pages:{folder}:{n // batch_pages + 1}", "kind": "pages", "folder": folder, "pages": chunk})
    for root in roots:
        batches.append({"id": f"duplicates:{root}", "kind": "duplicates", "root": root, "pages": []})
        batches.append({"id": f"conflicts:{root}", "kind": "conflicts", "root": root, "pages": []})
    for batch in batches:
        batch |= {"state": "pending", "branch": None, "commit": None, "found": []}
    pages: dict[str, dict[str, Any]] = {}
    claims: dict[str, dict[str, Any]] = {}
    for path in in_scope:
        pages[path] = {"action": "pending", "commit": None}
        page = view.page(path)
        if page is None:
            continue
        cites = {c.label: c for c in page.structure.citations if c.evidence_id}
        for claim in page.structure.claims:
            for label in claim.labels:
                cite = cites.get(label)
                span = span_key(cite.evidence_id or "", cite.start, cite.end) if cite else ""
                claims[f"{path}#{label}"] = {"action": "pending", "commit": None, "cites": span}
    cycle_id = f"{started[:10]}-{hashlib.sha256((str(head.id) + scope).encode()).hexdigest()[:8]}"
    ledger = ledger_at(repo, head)
    return {
        "cycle": cycle_id,
        "base": str(head.id),
        "scope": scope,
        "started_at": started,
        "finished_at": None,
        "status": "open",
        "evidence_count": len(ledger),
        "batch_pages": batch_pages,
        "batches": batches,
        "pages": pages,
        "claims": claims,
        "retired": [],
        "replay": None,
    }


def run_jobs(
    view: CommitView, batch: dict[str, Any], today: str, model: ModelJobs | None = None, frozen: frozenset[str] = frozenset()
) -> list[tuple[str, JobResult]]:
    """The batch's jobs in order on ``view``, each seeing the texts the ones before it wrote;
    with ``model``, the jobs also ask it what the offline checks cannot decide. ``frozen`` pages
    (withdrawn after a review) are neither read as candidates nor written."""
    texts = Texts(view)
    config = view.repo.config.consolidation
    out: list[tuple[str, JobResult]] = []

    def run(name: str, result: JobResult) -> None:
        texts.edits.update(result.changes)
        out.append((name, result))

    if batch["kind"] == "pages":
        paths = [p for p in batch["pages"] if p in view.files and p not in frozen]
        run("re-verification", regrounding(texts, paths, model))
        run("links", repair_links(texts, paths, view.ids))
        run("retirement", retire_expired(texts, paths, today))
        run("split", split_oversized(texts, paths, config.page_tokens, frozen, view.repo.config.budgets.l1_tokens))
        run("outlines", rewrite_l1(texts, paths))
        run("summaries", rewrite_l0(texts, paths, model=model))
        if f"{batch['folder']}/index.md" in view.files and f"{batch['folder']}/index.md" not in frozen:
            run("index", regenerate_index(texts, batch["folder"]))
    else:
        paths = [p for p in sorted(view.files) if root_of(p) == batch["root"] and p not in frozen]
        if batch["kind"] == "duplicates":
            dedupe = merge_duplicates(texts, paths, today, model)
            run("dedupe", dedupe)
            tiny = merge_tiny(texts, paths, config.tiny_claims, today, frozen)
            run("tiny pages", tiny)
            changed = sorted(set(dedupe.changes) | set(tiny.changes))
            summaries = rewrite_l0(texts, changed, model=model)  # an L0 may name what was merged away
            run("summaries", summaries)
            for folder in sorted({folder_of(p) for p in set(summaries.changes) | set(tiny.changes)}):
                if f"{folder}/index.md" in view.files and f"{folder}/index.md" not in frozen:
                    run("index", regenerate_index(texts, folder))
        else:
            run("conflicts", qualify_conflicts(texts, paths))
    return out


def branch_for(batch: dict[str, Any], view: CommitView, changes: dict[str, str]) -> str:
    """A name from a hash of the job's inputs (the batch, its pages' blobs, what it would write):
    the same inputs give the same branch, so a rerun never opens a second one."""
    digest = hashlib.sha256()
    digest.update(f"{JOBS_VERSION}\n{batch['id']}\n".encode())
    for path in sorted(set(batch["pages"]) | set(changes)):
        digest.update(f"{path} {view.files.get(path, '')}\n".encode())
    for path, text in sorted(changes.items()):
        digest.update(f"{path}\n{text}\n".encode())
    kind = batch["kind"]
    return f"{BRANCH_PREFIX}consolidate-{kind}-{digest.hexdigest()[:12]}"


@dataclass
class RunReport:
    cycle: str
    status: str  # open | complete | nothing-to-do | plan
    covered: int
    total: int
    batches_done: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    needs_human: list[str] = field(default_factory=list)
    found: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""
    plan: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what the jobs could not do (offline: what needs a model)

    @property
    def percent(self) -> float:
        return 100.0 if self.total == 0 else round(100.0 * self.covered / self.total, 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cycle": self.cycle,
            "status": self.status,
            "coverage": {"covered": self.covered, "total": self.total, "percent": self.percent},
            "batches_done": self.batches_done,
            "merged": self.merged,
            "needs_human": self.needs_human,
            "found": self.found,
            "stopped": self.stopped,
            "plan": self.plan,
            "skipped": self.skipped,
        }


def _set_action(entry: dict[str, Any], action: str, commit: str, reason: str = "") -> None:
    if ACTION_RANK[action] >= ACTION_RANK[entry["action"]] or entry["action"] == "pending":
        entry["action"] = action
        entry["commit"] = commit
        if reason:
            entry["reason"] = reason


def _record_batch(cycle: Cycle, batch: dict[str, Any], jobs: list[tuple[str, JobResult]], commit: str, state: str) -> None:
    """What the batch did, into the coverage record (pages and claims it looked at)."""
    batch["state"] = state
    batch["commit"] = commit
    batch["found"] = [
        {"job": name, "kind": f.kind, "path": f.path, "detail": f.detail, "fixed": f.fixed} for name, r in jobs for f in r.found
    ]
    skipped = [f"{name}: {s}" for name, r in jobs for s in r.skipped]
    if skipped:
        batch["skipped"] = skipped
    fixed_ok = state == "done"
    for _, result in jobs:
        for key, (action, reason) in result.claims.items():
            if key in cycle["claims"]:
                _set_action(cycle["claims"][key], action if fixed_ok else "kept", commit, reason)
        for path, action in result.pages.items():
            if path in cycle["pages"]:
                _set_action(cycle["pages"][path], action if fixed_ok else "kept", commit)
    if batch["kind"] == "pages":
        for path in batch["pages"]:
            if path in cycle["pages"]:
                _set_action(cycle["pages"][path], "verified", commit)
            for key, entry in cycle["claims"].items():
                if key.rsplit("#", 1)[0] == path:
                    _set_action(entry, "verified", commit)
    for path, what in (batch.get("withdrawn") or {}).items() if fixed_ok else ():
        # the Reviewer refused the change to this page: it stays as it was; a contradiction on it waits for a person
        action = "disputed" if what["kind"] == "conflict" else "kept"
        reason = f"change withdrawn after review: {what['reason']}" + ("; for a person to decide" if action == "disputed" else "")
        for entry in [cycle["pages"].get(path)] + [e for k, e in cycle["claims"].items() if k.rsplit("#", 1)[0] == path]:
            if entry is not None:
                entry |= {"action": action, "commit": commit, "reason": reason}


def _known_branches(cycles: list[Cycle]) -> dict[str, str]:
    """Every branch a cycle opened -> its last recorded state."""
    out: dict[str, str] = {}
    for cycle in sorted(cycles, key=lambda c: c["started_at"]):
        for batch in cycle["batches"]:
            if batch.get("branch"):
                out[batch["branch"]] = batch["state"]
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
    cycle: Cycle, batch: dict[str, Any], jobs: list[tuple[str, JobResult]], base: pygit2.Commit, identity: AgentIdentity, round_no: int
) -> dict[str, str]:
    """The proposal trailers of a batch's commits (evidence its claims cite), with the cycle and job."""
    cited = sorted(
        {span.split("#")[0] for _, r in jobs for key in r.claims for span in [cycle["claims"].get(key, {}).get("cites", "")] if span}
    )
    return trailers_for(tuple(cited), str(base.id), identity, round_no) | {"Kb-Consolidation": cycle["cycle"], "Kb-Job": batch["id"]}


def _propose_batch(
    repo: Repo,
    cycle: Cycle,
    batch: dict[str, Any],
    jobs: list[tuple[str, JobResult]],
    branch: str,
    head: pygit2.Commit,
    identity: AgentIdentity = CONSOLIDATION_PROPOSER,
) -> None:
    root = batch.get("root") or root_of(batch["folder"] + "/x")
    allowed = (root + "/",)
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


def _report(cycle: Cycle, status: str | None = None) -> RunReport:
    covered, total = coverage(cycle)
    return RunReport(cycle["cycle"], status or cycle["status"], covered, total)


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
    if cycle is not None and cycle["status"] == "open":
        if scope not in ("all", cycle["scope"]):
            raise UsageError(
                f"cycle {cycle['cycle']} (scope {cycle['scope']}) is still open: one cycle at a time",
                hint="finish it with `kb consolidate` (see `kb consolidate status`)",
            )
    elif cycle is not None and _nothing_new(repo, cycle, head, scope, batch_pages, today):
        return _report(cycle, "nothing-to-do"), False
    else:
        cycle = plan_cycle(repo, head, scope, batch_pages, iso_utc())
        if not plan_only:
            commit_record(repo, cycle, f"Consolidation {cycle['cycle']}: plan, {len(cycle['batches'])} batch(es)")
            if route is not None:
                route.publish()
    if plan_only:
        return _plan_report(repo, cycle, head, today), False
    agents = agents or make_agents(repo.config)
    model = model or model_jobs_for(repo.config)
    identity = model.identity if model is not None else CONSOLIDATION_PROPOSER
    check_distinct_families(identity.family, agents.reviewer.identity.family, repo.config.models.allow_same_family)
    run = _Run(repo, cycle, caps, agents, today, _known_branches(all_cycles(repo)), _report(cycle), model, route)
    for batch in cycle["batches"]:
        if batch["state"] in ("done", "declined"):
            continue
        run.report.stopped = run.cap_reached()
        if run.report.stopped:
            break
        run.batch(batch)
    _finish(repo, cycle, route)
    final = _report(cycle)
    final.batches_done, final.merged, final.needs_human, final.stopped = (
        run.report.batches_done,
        run.report.merged,
        run.report.needs_human,
        run.report.stopped,
    )
    final.found = [f for b in cycle["batches"] for f in b["found"]]
    final.skipped = [f"{b['id']}: {s}" for b in cycle["batches"] for s in b.get("skipped", [])]
    return final, bool(run.report.merged)


@dataclass
class _Run:
    """One invocation's pass over the cycle's batches, with its caps."""

    repo: Repo
    cycle: Cycle
    caps: Caps
    agents: Agents
    today: str
    known: dict[str, str]
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

    def record(self, batch: dict[str, Any], what: str) -> None:
        commit_record(self.repo, self.cycle, f"Consolidation {self.cycle['cycle']}: {batch['id']} {what}")
        if self.route is not None:
            self.route.publish()

    def leave(self, batch: dict[str, Any], branch: str, reason: str, found: list[dict[str, Any]] | None = None) -> None:
        tip = self.repo.git.branches.local[branch].peel(pygit2.Commit)
        set_status(self.repo, str(tip.id), "needs-human", {"branch": branch, "reason": reason, "rounds": 1})
        batch["state"] = "needs-human"
        if found is not None:
            batch["found"] = found
        self.report.needs_human.append(branch)
        self.record(batch, f"left for a person: {reason}")

    def batch(self, batch: dict[str, Any]) -> None:
        repo, cycle = self.repo, self.cycle
        if batch["state"] == "needs-human" and batch["branch"]:
            self.settle(batch)
            return
        head = repo.head()
        assert head is not None
        view = CommitView(repo, head)
        jobs = run_jobs(view, batch, self.today, self.model)
        changes = {p: t for _, r in jobs for p, t in r.changes.items()}
        changes = {p: t for p, t in changes.items() if view.text(p) != t}
        self.pages_seen += len(batch["pages"]) or len(view.files)
        if not changes:
            _record_batch(cycle, batch, jobs, str(head.id), "done")
            self.report.batches_done.append(batch["id"])
            self.record(batch, "verified, no change")
            return
        branch = batch["branch"] = branch_for(batch, view, changes)
        if self.known.get(branch) in ("needs-human", "declined") and branch not in repo.git.branches.local:
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
                    batch["state"] = "needs-human"
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
        self.report.merged.append(branch)
        _record_batch(cycle, batch, jobs, commit, "done")
        self.report.batches_done.append(batch["id"])
        self.record(batch, "merged")

    def settle(self, batch: dict[str, Any]) -> None:
        """A batch left for a person: has the person merged, closed or deleted it yet?"""
        pull = self.route.change(batch["branch"]) if self.route is not None else None
        _settle_human(self.repo, self.cycle, batch, pull.state if pull is not None else None)
        if batch["state"] != "needs-human":
            self.record(batch, batch["state"])

    def decline(self, batch: dict[str, Any], jobs: list[tuple[str, JobResult]], commit: str, why: str) -> None:
        _record_batch(self.cycle, batch, jobs, commit, "declined")
        batch["found"].append({"kind": "declined", "path": "", "detail": why, "fixed": False})
        self.report.batches_done.append(batch["id"])
        self.record(batch, why)

    def converge(
        self, batch: dict[str, Any], branch: str, base: pygit2.Commit, jobs: list[tuple[str, JobResult]]
    ) -> tuple[str, list[tuple[str, JobResult]]] | None:
        """Review rounds, like ``kb run``'s: while the Reviewer requests changes (up to
        ``loop.max_rounds``), the consolidation Proposer revises by withdrawing its change to each
        page a comment names (that page stays as it was, recorded as kept, or as disputed for a
        person when the comment is a contradiction on the page). It merges when approved; a
        branch it cannot revise, or still refused after the last round, is left for a person.
        Returns the merge commit and the jobs as finally run, or None."""
        max_rounds = self.repo.config.loop.max_rounds
        withdrawn: dict[str, dict[str, str]] = {}
        round_no = 1
        while True:
            review = self.route.review(branch) if self.route is not None else review_branch(self.repo, branch, round_no, self.agents)
            self.usage = self.usage + review.usage
            if review.verdict == "approve":
                break
            found = [{"kind": "review", "path": c.path, "detail": c.message, "fixed": False} for c in review.comments]
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
        batch["rounds"] = round_no
        if withdrawn:
            batch["withdrawn"] = withdrawn
        if self.route is not None:
            return self.route.merge(branch), jobs
        return merge_branch(self.repo, branch, build_index=False).commit, jobs

    def withdraw(
        self,
        batch: dict[str, Any],
        branch: str,
        base: pygit2.Commit,
        comments: tuple[Comment, ...],
        round_no: int,
        withdrawn: dict[str, dict[str, str]],
    ) -> list[tuple[str, JobResult]] | None:
        """The revision: every page a comment names that the branch changed is withdrawn (it
        stays as at ``base``), and the batch's jobs run again without those pages, so what
        depends on them (an index entry, a merge into them) is redone or left out; the branch
        becomes that change, in one commit. ``withdrawn`` gains the pages (path -> the comment's
        kind and message). Returns the jobs as run again, or None when no comment names a page
        the branch changed."""
        workspace = clean_workspace(self.repo, branch)
        changed = {d.new_file.path for d in diff_trees(base.tree, workspace.head().tree).deltas}
        named = {c.path: {"kind": c.kind, "reason": c.message} for c in reversed(comments) if c.path in changed and c.path not in withdrawn}
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
        lines = "\n".join(f"- {path}: {what['reason'][:200]}" for path, what in sorted(named.items()))
        message = f"Revise after review round {round_no}: withdraw the change to {len(named)} page(s)\n\n{lines}"
        workspace.commit(message, self.trailers(batch, jobs, base, round_no + 1), allow_empty=True)
        return jobs

    def trailers(self, batch: dict[str, Any], jobs: list[tuple[str, JobResult]], base: pygit2.Commit, round_no: int) -> dict[str, str]:
        return _trailers(self.cycle, batch, jobs, base, self.model.identity if self.model else CONSOLIDATION_PROPOSER, round_no)

    def _retire_dropped(self, batch: dict[str, Any], view: CommitView, changes: dict[str, str]) -> pygit2.Commit | None:
        """Spans the change would leave uncited are listed as retired, with the reason, before the
        branch is opened (the conservation rule reads the record on the branch)."""
        root = batch.get("root") or root_of(batch["folder"] + "/x")
        dropped = _dropped_spans(view, changes, root)
        if not dropped:
            return None
        self.cycle["retired"] += [
            {"span": s, "reason": f"no longer cited after {batch['id']}", "batch": batch["id"]} for s in sorted(dropped)
        ]
        self.record(batch, f"retires {len(dropped)} span(s)")
        return self.repo.head()


def _settle_human(repo: Repo, cycle: Cycle, batch: dict[str, Any], pull_state: str | None = None) -> None:
    """A branch left for a person: merged by them (done), deleted by them or its pull request
    closed (declined: its pages and claims are kept as they are, and the branch is never
    reopened), or still open (``pull_state``: its pull request's state, on a forge)."""
    branch = batch["branch"]
    if pull_state == "open" or (pull_state is None and branch in repo.git.branches.local):
        return
    done = merged_as(repo, branch)
    batch["state"] = "done" if done is not None else "declined"
    commit = done.commit if done is not None else str(batch.get("commit") or cycle["base"])
    batch["commit"] = commit
    paths = set(batch["pages"]) or {p for p in cycle["pages"] if root_of(p) == batch.get("root")}
    for path in paths & set(cycle["pages"]):
        _set_action(cycle["pages"][path], "changed" if done is not None else "kept", commit)
    for key, entry in cycle["claims"].items():
        if key.rsplit("#", 1)[0] in paths:
            _set_action(entry, "kept", commit)


def content_digest(repo: Repo, commit: pygit2.Commit) -> str:
    """A hash of everything in ``commit``'s tree except the consolidation record itself (the
    replay cases kept beside it count)."""
    entries = sorted((e.name, str(e.id)) for e in commit.tree if e.name != RECORD_DIR)
    entries.append((REPLAY_FILE, hashlib.sha256(repo.read_at(commit, REPLAY_FILE) or b"").hexdigest()))
    return hashlib.sha256(repr(entries).encode()).hexdigest()


def _nothing_new(repo: Repo, cycle: Cycle, head: pygit2.Commit, scope: str, batch_pages: int, today: str) -> bool:
    """True when the last cycle is complete, covered ``scope``, nothing but the record changed
    since it ended, and its jobs would change nothing today (a fact may have expired meanwhile):
    a new cycle would only re-record the same coverage, so none is started and nothing is written."""
    if cycle["status"] != "complete" or cycle["scope"] not in ("all", scope):
        return False
    if cycle.get("content") != content_digest(repo, head):
        return False
    view = CommitView(repo, head)
    fresh = plan_cycle(repo, head, scope, batch_pages, cycle["started_at"])
    for batch in fresh["batches"]:
        for _, result in run_jobs(view, batch, today):
            if any(view.text(p) != t for p, t in result.changes.items()):
                return False
    return True


def _finish(repo: Repo, cycle: Cycle, route: ForgeRoute | None = None) -> None:
    if cycle["status"] != "open" or any(b["state"] not in ("done", "declined") for b in cycle["batches"]):
        return
    for entry in list(cycle["pages"].values()) + list(cycle["claims"].values()):
        if entry["action"] == "pending":  # a page no batch reached (removed meanwhile by another change)
            entry["action"] = "kept"
            entry["reason"] = "not present when its batch ran"
    cycle["status"] = "complete"
    cycle["finished_at"] = iso_utc()
    from pipeline.consolidate.replay import replay_score

    head = repo.head()
    assert head is not None
    cycle["replay"] = replay_score(repo, head)
    cycle["content"] = content_digest(repo, head)
    commit_record(repo, cycle, f"Consolidation {cycle['cycle']}: complete, coverage 100%")
    if route is not None:
        route.publish()


def _plan_report(repo: Repo, cycle: Cycle, head: pygit2.Commit, today: str) -> RunReport:
    """What the cycle would do now: each batch still to do, with what its jobs would find and skip
    (the offline jobs: a plan spends nothing on a model)."""
    report = _report(cycle, "plan")
    view = CommitView(repo, head)
    for batch in cycle["batches"]:
        if batch["state"] in ("done", "declined"):
            continue
        jobs = run_jobs(view, batch, today)
        changes = sorted({p for _, r in jobs for p in r.changes})
        found = [{"job": name, "kind": f.kind, "path": f.path, "detail": f.detail, "fixed": f.fixed} for name, r in jobs for f in r.found]
        skipped = [f"{name}: {line}" for name, r in jobs for line in r.skipped]
        report.plan.append(
            {"batch": batch["id"], "pages": len(batch["pages"]), "would_change": changes, "found": found, "skipped": skipped}
        )
    return report


def cycle_status(repo: Repo) -> dict[str, Any]:
    head = repo.head()
    cycle = current_cycle(repo, head) if head is not None else None
    if cycle is None:
        return {"cycle": None, "status": "none"}
    covered, total = coverage(cycle)
    actions: dict[str, int] = {}
    for entry in list(cycle["pages"].values()) + list(cycle["claims"].values()):
        actions[entry["action"]] = actions.get(entry["action"], 0) + 1
    states: dict[str, int] = {}
    for batch in cycle["batches"]:
        states[batch["state"]] = states.get(batch["state"], 0) + 1
    return {
        "cycle": cycle["cycle"],
        "status": cycle["status"],
        "scope": cycle["scope"],
        "base": cycle["base"],
        "started_at": cycle["started_at"],
        "finished_at": cycle["finished_at"],
        "coverage": {"covered": covered, "total": total, "percent": 100.0 if not total else round(100.0 * covered / total, 1)},
        "actions": dict(sorted(actions.items())),
        "batches": dict(sorted(states.items())),
        "waiting": [b["branch"] for b in cycle["batches"] if b["state"] == "needs-human"],
        "disputed": sorted({k.rsplit("#", 1)[0] for k, e in cycle["claims"].items() if e["action"] == "disputed"}),
        "retired": len(cycle["retired"]),
    }


def needed(repo: Repo, now: dt.datetime | None = None) -> list[str]:
    """The ``consolidation.if_needed`` thresholds passed at HEAD (empty: no cycle needed)."""
    head = repo.head()
    if head is None:
        return []
    limits = repo.config.consolidation.if_needed
    cycle = current_cycle(repo, head)
    if cycle is None:
        return ["no cycle has run yet"]
    if cycle["status"] == "open":
        return [f"cycle {cycle['cycle']} is open"]
    reasons = []
    new = len(ledger_at(repo, head)) - int(cycle.get("evidence_count", 0))
    if limits.new_evidence and new >= limits.new_evidence:
        reasons.append(f"{new} new evidence item(s) since the last cycle (threshold {limits.new_evidence})")
    view = CommitView(repo, head)
    conflicts = len(current_conflicts(view.pages()))
    if limits.open_conflicts and conflicts >= limits.open_conflicts:
        reasons.append(f"{conflicts} open conflict(s) (threshold {limits.open_conflicts})")
    from pipeline.consolidate.replay import replay_score

    before = cycle.get("replay")
    score = replay_score(repo, head)
    if before is not None and score is not None and before - score > limits.replay_drop:
        reasons.append(f"replay score fell from {before:.2f} to {score:.2f}")
    started = dt.datetime.fromisoformat(cycle["started_at"].replace("Z", "+00:00"))
    days = ((now or dt.datetime.now(dt.UTC)) - started).days
    if limits.days and days >= limits.days:
        reasons.append(f"{days} day(s) since the last cycle (threshold {limits.days})")
    return reasons
