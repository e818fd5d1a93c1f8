"""`kb propose`: new evidence becomes a small diff on a work branch ``kb/<slug>``.

Evidence is chosen by id, by ``--since REV`` (items added to the ledger after REV), or by
default every item not yet processed (cited by no page and named by no merged proposal).
The Proposer is a configured model (agents with tools, through litellm) or the offline
extractive one; either way the program applies its edits to the branch's worktree and commits.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pygit2

from agents.offline.extractive import EvidenceInput
from agents.offline.proposer import Plan, plan_documents, plan_user_memory
from kb.errors import KbError, NotFoundError, UsageError
from kb.evidence import LedgerEntry, ledger_at
from kb.page import parse_page
from kb.repo import Repo
from pipeline.records import parse_trailers
from pipeline.roles import Role, resolve_roles
from pipeline.runs import new_run_dir, save_transcript
from pipeline.workspace import BRANCH_PREFIX, Workspace, open_workspace, remove_workspace, slugify_branch


@dataclass(frozen=True)
class Proposal:
    branch: str
    base: str
    head: str | None  # None when nothing was written (branch removed)
    evidence_ids: tuple[str, ...]
    files: tuple[str, ...]
    claims: int
    closed: int
    proposer: Role
    run_dir: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    usage: dict[str, Any] = field(default_factory=dict)


def processed_evidence(repo: Repo, head: pygit2.Commit) -> set[str]:
    """Evidence cited in a page's `sources` at ``head`` or named by a merged proposal."""
    done: set[str] = set()
    for path, oid in repo.tree_files(head, ("knowledge/", "users/")).items():
        if path.endswith(".md"):
            try:
                done.update(parse_page(repo.read_blob(oid), path).meta.get("sources") or [])
            except Exception:  # noqa: BLE001 - an unreadable page is the checker's business
                continue
    for commit in repo.git.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL):
        trailers = parse_trailers(commit.message)
        if "Kb-Evidence" in trailers:
            done.update(e.strip() for e in trailers["Kb-Evidence"].split(",") if e.strip())
    return done


def select_evidence(repo: Repo, ids: list[str] | None = None, since: str | None = None) -> list[LedgerEntry]:
    head = repo.head()
    entries = ledger_at(repo, head)
    if ids:
        by_id = {e.id: e for e in entries}
        chosen = []
        for ident in ids:
            matches = [e for e in entries if e.id.startswith(ident)] if ident not in by_id else [by_id[ident]]
            if len(matches) != 1:
                raise NotFoundError(f"unknown evidence id {ident!r}", hint="list ids with `kb evidence list`")
            chosen.append(matches[0])
        return chosen
    if since:
        before = {e.id for e in ledger_at(repo, repo.resolve(since))}
        return [e for e in entries if e.id not in before]
    done = processed_evidence(repo, head) if head else set()
    return [e for e in entries if e.id not in done]


def evidence_inputs(repo: Repo, entries: list[LedgerEntry]) -> list[EvidenceInput]:
    head = repo.head()
    out = []
    for entry in entries:
        data = repo.read_at(head, entry.path) if head else None
        if data is None:
            raise NotFoundError(f"evidence file {entry.path} is not committed", hint="add evidence with `kb evidence add`")
        date = entry.date
        out.append(EvidenceInput(entry.id, entry.kind, entry.scope, data.decode("utf-8"), entry.source, date))
    return out


def allowed_prefixes(entries: list[LedgerEntry]) -> tuple[str, ...]:
    prefixes = set()
    for entry in entries:
        prefixes.add("knowledge/" if entry.scope == "system" else f"users/{entry.scope.split(':', 1)[1]}/")
    if "knowledge/" in prefixes:
        prefixes.add("knowledge/")
    return tuple(sorted(prefixes))


def plan_offline(workspace: Workspace, inputs: list[EvidenceInput], names: dict[str, str] | None = None, speakers: dict[str, set[str]] | None = None) -> list[Plan]:
    def read(path: str) -> str | None:
        return workspace.read_text(path)

    plans = []
    system = [i for i in inputs if i.scope == "system"]
    if system:
        plans.append(plan_documents(system, read))
    users = sorted({i.scope.split(":", 1)[1] for i in inputs if i.scope.startswith("user:")})
    for user in users:
        mine = [i for i in inputs if i.scope == f"user:{user}"]
        plans.append(plan_user_memory(user, mine, read, (names or {}).get(user), (speakers or {}).get(user)))
    return plans


def branch_name(entries: list[LedgerEntry], now: dt.datetime) -> str:
    scopes = sorted({e.scope.replace("user:", "") for e in entries})
    label = scopes[0] if len(scopes) == 1 else f"{len(scopes)}-scopes"
    return BRANCH_PREFIX + slugify_branch(f"{now:%Y%m%d-%H%M%S}-{label}-{entries[0].id[3:9]}")


def trailers_for(entries: list[LedgerEntry], base: str, proposer: Role, round_no: int) -> dict[str, str]:
    return {
        "Kb-Evidence": ", ".join(e.id for e in entries),
        "Kb-Base": base,
        "Kb-Proposer-Model": proposer.model,
        "Kb-Proposer-Family": proposer.family,
        "Kb-Round": str(round_no),
    }


def propose(
    repo: Repo,
    ids: list[str] | None = None,
    since: str | None = None,
    names: dict[str, str] | None = None,
    speakers: dict[str, set[str]] | None = None,
    model_proposer=None,  # noqa: ANN001 - callable(workspace, entries, role, run_dir) for a configured model
) -> Proposal:
    """Create a work branch with the Proposer's change for the selected evidence."""
    roles = resolve_roles(repo.config)
    entries = select_evidence(repo, ids, since)
    if not entries:
        raise UsageError("no new evidence to propose from", hint="add evidence with `kb evidence add`, or name items with --evidence")
    head = repo.head()
    assert head is not None
    now = dt.datetime.now(dt.timezone.utc)
    branch = branch_name(entries, now)
    workspace = open_workspace(repo, branch, base=str(head.id), allowed=allowed_prefixes(entries))
    run_dir = new_run_dir(repo, "propose")
    claims = closed = 0
    notes: list[str] = []
    usage: dict[str, Any] = {}
    if roles.proposer.offline:
        inputs = evidence_inputs(repo, entries)
        for plan in plan_offline(workspace, inputs, names, speakers):
            for path, text in sorted(plan.writes.items()):
                workspace.write_page(path, text)
            claims += plan.claims
            closed += plan.closed
        save_transcript(run_dir, "proposer", {"agent": roles.proposer.model, "evidence": [e.id for e in entries], "claims": claims, "closed": closed, "files": sorted(workspace.view.dirty_paths(("knowledge/", "users/")))})
    else:
        if model_proposer is None:
            from pipeline.model_agents import run_model_proposer as model_proposer
        try:
            usage = model_proposer(workspace, entries, roles.proposer, run_dir, feedback=None) or {}
        except KbError:
            if workspace.head().id == head.id:  # nothing written: leave no empty branch behind
                remove_workspace(repo, branch)
                repo.git.branches.local.delete(branch)
            raise
    files = tuple(sorted(d.new_file.path for d in repo.git.diff(head.tree, workspace.head().tree).deltas) + list(workspace.view.dirty_paths(("knowledge/", "users/"))))
    title = f"Propose knowledge from {len(entries)} evidence item(s)"
    commit = workspace.commit(title + f"\n\n{claims} new claim(s), {closed} closed.", trailers_for(entries, str(head.id), roles.proposer, 1), allow_empty=bool(files))
    if commit is None:
        remove_workspace(repo, branch)
        repo.git.branches.local.delete(branch)
        return Proposal(branch, str(head.id), None, tuple(e.id for e in entries), (), 0, 0, roles.proposer, str(run_dir), tuple(notes) + ("nothing to write: no claims could be extracted",))
    return Proposal(branch, str(head.id), commit, tuple(e.id for e in entries), tuple(sorted(set(files))), claims, closed, roles.proposer, str(run_dir), tuple(notes), usage)
