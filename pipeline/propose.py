"""`kb propose`: new evidence becomes a small diff on a work branch ``kb/<slug>``.

Evidence is chosen by id, by ``--since REV`` (items added to the ledger after REV), or by
default every item not yet processed (cited by no page and named by no merged proposal).
The Proposer (a configured model or the offline extractive one, behind one protocol) writes
through the branch's backend; the program confines and commits its edits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pygit2

from agents.llm import Usage
from agents.loop import stopped_run
from agents.protocols import AgentIdentity, EvidenceItem, ProposalTask
from kb.clock import compact_utc
from kb.errors import KbError, NotFoundError, UsageError
from kb.evidence import LedgerEntry, ledger_at
from kb.page import parse_page
from kb.repo import Repo, atomic_write, diff_trees
from kb.scopes import PAGE_FOLDERS, folder_for_scope, user_of
from pipeline.backend import branch_backend
from pipeline.records import drop_reviews, parse_trailers, proposal_info, status_of
from pipeline.roles import Agents, make_agents
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
    proposer: AgentIdentity
    run_dir: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    usage: Usage = field(default_factory=Usage)


def processed_evidence(repo: Repo, head: pygit2.Commit) -> set[str]:
    """Evidence cited in a page's `sources` at ``head`` or named by a merged proposal."""
    done: set[str] = set()
    for path, oid in repo.tree_files(head, PAGE_FOLDERS).items():
        if path.endswith(".md"):
            try:
                done.update(parse_page(repo.read_blob(oid), path).meta.get("sources") or [])
            except KbError:  # an unreadable page is the checker's business
                continue
    for commit in repo.git.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL):
        trailers = parse_trailers(commit.message)
        if "Kb-Evidence" in trailers:
            done.update(e.strip() for e in trailers["Kb-Evidence"].split(",") if e.strip())
    return done


def evidence_on_open_branches(repo: Repo) -> set[str]:
    """Evidence named by the proposal trailers of work branches not merged yet."""
    main = repo.head()
    named: set[str] = set()
    if main is None:
        return named
    for name in repo.git.branches.local:
        if not name.startswith(BRANCH_PREFIX):
            continue
        head = repo.git.branches.local[name].peel(pygit2.Commit)
        base = repo.git.merge_base(main.id, head.id)
        trailers = proposal_info(repo, head, base) if base is not None else {}
        named.update(e.strip() for e in trailers.get("Kb-Evidence", "").split(",") if e.strip())
    return named


def select_evidence(repo: Repo, ids: list[str] | None = None, since: str | None = None) -> list[LedgerEntry]:
    head = repo.head()
    entries = [e for e in ledger_at(repo, head) if e.path]  # not the tombstones of forgotten items
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


def evidence_items(repo: Repo, entries: list[LedgerEntry]) -> tuple[EvidenceItem, ...]:
    head = repo.head()
    out = []
    for entry in entries:
        data = repo.read_at(head, entry.path) if head else None
        if data is None:
            raise NotFoundError(f"evidence file {entry.path} is not committed", hint="add evidence with `kb evidence add`")
        out.append(EvidenceItem(entry.id, entry.kind, entry.scope, data.decode("utf-8"), entry.source, entry.date, entry.lines))
    return tuple(out)


def one_user_at_a_time(entries: list[LedgerEntry], chosen: bool) -> tuple[list[LedgerEntry], tuple[str, ...]]:
    """The entries one change may take: shared evidence and one user's (no principal may read
    two users' memories, so no change may touch two). Evidence named explicitly (``chosen``) for
    several users is a UsageError; of unprocessed evidence, the first user's in ledger order is
    taken and a note says whose is left for the next run."""
    users = list(dict.fromkeys(u for e in entries if (u := user_of(e.scope)) is not None))
    if len(users) <= 1:
        return entries, ()
    if chosen:
        raise UsageError(
            f"the evidence belongs to {len(users)} users ({', '.join(users)}): one change may touch one user's memory",
            hint="propose each user's evidence separately",
        )
    taken = [e for e in entries if user_of(e.scope) in (None, users[0])]
    return taken, (f"evidence of {', '.join(users[1:])} is left for the next run (one user per change)",)


def allowed_prefixes(entries: list[LedgerEntry]) -> tuple[str, ...]:
    return tuple(sorted({folder_for_scope(e.scope) for e in entries}))


def branch_name(entries: list[LedgerEntry]) -> str:
    scopes = sorted({user_of(e.scope) or e.scope for e in entries})
    label = scopes[0] if len(scopes) == 1 else f"{len(scopes)}-scopes"
    return BRANCH_PREFIX + slugify_branch(f"{compact_utc()[:15].replace('T', '-')}-{label}-{entries[0].id[3:9]}")


def trailers_for(
    evidence_ids: tuple[str, ...], base: str, proposer: AgentIdentity, round_no: int, reprocess: tuple[str, ...] = ()
) -> dict[str, str]:
    trailers = {
        "Kb-Evidence": ", ".join(evidence_ids),
        "Kb-Base": base,
        "Kb-Proposer-Model": proposer.model,
        "Kb-Proposer-Family": proposer.family,
        "Kb-Round": str(round_no),
    }
    if reprocess:
        trailers["Kb-Reprocess"] = ", ".join(reprocess)
    return trailers


def branch_diff(workspace: Workspace, base: str) -> str:
    """The change on the branch so far, against ``base``, as a unified diff."""
    git = workspace.repo.git
    return diff_trees(git[base].peel(pygit2.Commit).tree, workspace.head().tree).patch or ""


def _drop_branch(repo: Repo, branch: str) -> None:
    """Remove a work branch, its worktree and the review notes of its own commits."""
    head = repo.git.branches.local[branch].peel(pygit2.Commit)
    main = repo.head()
    stop = repo.git.merge_base(main.id, head.id) if main is not None else None
    for commit in repo.git.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL):
        if commit.id == stop:
            break
        drop_reviews(repo, str(commit.id))
    remove_workspace(repo, branch)
    repo.git.branches.local.delete(branch)


def unused_branch(repo: Repo, branch: str) -> str:
    """``branch``, or ``branch-2``, ``-3``... if a branch of that name exists already (two
    proposals from the same evidence within one second)."""
    name, n = branch, 1
    while name in repo.git.branches.local:
        n += 1
        name = f"{branch}-{n}"
    return name


def propose(
    repo: Repo,
    ids: list[str] | None = None,
    since: str | None = None,
    user_speakers: Mapping[str, tuple[str, ...]] | None = None,
    agents: Agents | None = None,
    for_run: bool = False,
    retract: tuple[str, ...] = (),
    branch: str | None = None,
) -> Proposal:
    """Create a work branch with the Proposer's change for the selected evidence (holding the
    repository lock). The branch is named in ``.kb/open-branch.json`` while it is written (and,
    ``for_run``, until the run that asked for it closes it with ``close_open_branch``): a branch
    whose writer was killed is dropped by the next proposal, so its evidence is proposed again.

    ``retract``: evidence ids (among those selected) proposed again from scratch: before the
    Proposer runs, the branch drops the claims, facts and footnotes that cite them from the pages
    it may write (``kb memory ingest --reprocess``), so the new claims replace the old ones in
    one reviewed change.

    ``branch``: the name to write on (a name no local branch has), instead of a new one: ``kb run``
    proposing the same evidence again from a moved base, onto the same pull request."""
    with repo.write_lock():
        drop_abandoned_branch(repo)
        try:
            return _propose(repo, ids, since, user_speakers, agents, retract, branch)
        finally:
            if not for_run:
                close_open_branch(repo)


OPEN_BRANCH = "open-branch.json"


def close_open_branch(repo: Repo) -> None:
    (repo.state_dir / OPEN_BRANCH).unlink(missing_ok=True)


def drop_abandoned_branch(repo: Repo) -> str | None:
    """Drop the work branch a killed ``propose`` or ``run`` was writing, unless it was marked for a
    human; its name, or None. Call it holding the repository lock: whoever named the branch in the
    journal is gone."""
    journal = repo.state_dir / OPEN_BRANCH
    try:
        branch = json.loads(journal.read_text(encoding="utf-8"))["branch"]
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        branch = None
    dropped = None
    if isinstance(branch, str) and branch in repo.git.branches.local:
        head = repo.git.branches.local[branch].peel(pygit2.Commit)
        if status_of(repo, str(head.id)) is None:
            _drop_branch(repo, branch)
            dropped = branch
    journal.unlink(missing_ok=True)
    return dropped


def retract_claims(workspace: Workspace, evidence_ids: set[str]) -> list[str]:
    """Drop what cites ``evidence_ids`` from the pages the branch may write; the pages changed."""
    from pipeline.forget import drop_claims

    changed = []
    for path in sorted(workspace.view.tree_files(workspace.head(), workspace.allowed)):
        text = workspace.read_text(path) if path.endswith(".md") else None
        if text is None:
            continue
        kept = drop_claims(text, evidence_ids)
        if kept != text:
            workspace.write_page(path, kept)
            changed.append(path)
    return changed


def _propose(
    repo: Repo,
    ids: list[str] | None,
    since: str | None,
    user_speakers: Mapping[str, tuple[str, ...]] | None,
    agents: Agents | None,
    retract: tuple[str, ...] = (),
    name: str | None = None,
) -> Proposal:
    agents = agents or make_agents(repo.config)
    entries = select_evidence(repo, ids, since)
    entries, later = one_user_at_a_time(entries, chosen=bool(ids))
    head = repo.head()
    if not entries or head is None:  # nothing new is not a failure: `kb evidence add f && kb run` stays green
        base = str(head.id) if head is not None else ""
        note = "no new evidence: every item in the ledger has been proposed (add evidence with `kb evidence add`)"
        return Proposal("", base, None, (), (), 0, 0, agents.proposer.identity, "", (note,))
    branch = name or unused_branch(repo, branch_name(entries))
    atomic_write(repo.state_dir / OPEN_BRANCH, json.dumps({"branch": branch}).encode())
    workspace = open_workspace(repo, branch, base=str(head.id), allowed=allowed_prefixes(entries))
    if retract:
        retract_claims(workspace, set(retract))
    run_dir = new_run_dir(repo, "propose")
    task = ProposalTask(evidence_items(repo, entries), workspace.allowed, dict(user_speakers or {}))
    proposer = agents.proposer
    try:
        outcome = proposer.propose(task, branch_backend(workspace, head))
    except KbError as exc:
        partial = stopped_run(exc)
        if partial is not None:
            save_transcript(run_dir, "proposer", partial.to_dict())
        if workspace.head().id == head.id:  # nothing committed: leave no empty branch behind
            _drop_branch(repo, branch)
        raise
    if outcome.transcript is not None:
        save_transcript(run_dir, "proposer", outcome.transcript)
    evidence_ids = tuple(e.id for e in entries)
    message = f"Propose knowledge from {len(entries)} evidence item(s)\n\n{outcome.claims} new claim(s), {outcome.closed} closed."
    changed = sorted(
        {d.new_file.path for d in diff_trees(head.tree, workspace.head().tree).deltas} | set(workspace.view.dirty_paths(PAGE_FOLDERS))
    )
    trailers = trailers_for(evidence_ids, str(head.id), proposer.identity, 1, retract)
    commit = workspace.commit(message, trailers, allow_empty=bool(changed))
    if commit is None:
        _drop_branch(repo, branch)
        return Proposal(
            branch,
            str(head.id),
            None,
            evidence_ids,
            (),
            0,
            0,
            proposer.identity,
            str(run_dir),
            ("nothing to write: no claims could be extracted", *later),
        )
    return Proposal(
        branch,
        str(head.id),
        commit,
        evidence_ids,
        tuple(changed),
        outcome.claims,
        outcome.closed,
        proposer.identity,
        str(run_dir),
        later,
        outcome.usage,
    )
