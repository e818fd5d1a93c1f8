"""Configured models as Proposer and Reviewer: the tool backend over a work branch, and the
glue that runs the agents (agents.proposer / agents.reviewer) and keeps their transcripts.

The backend reads the branch's head commit (the Proposer's writes are committed as they are
made, so it sees them) and the serving index of the main branch for `search`; every read is
scoped to the proposal's principal. Writes go through the Workspace, which confines them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from agents.llm import Budget
from agents.schemas import Comment
from kb.retrieval.reading import grep, read_page, read_section
from kb.errors import IndexMissingError, KbError, NotFoundError
from kb.evidence import LedgerEntry, ledger_at
from kb.page import page_id_for_path, parse_page
from kb.scopes import scope_for_path
from kb.scopes import parse_principal
from kb.repo import Repo
from ci.gate import GateReport, run_gate
from pipeline.roles import Role, client_for
from pipeline.runs import save_transcript
from pipeline.workspace import Workspace

MAX_EVIDENCE_LINES = 200
MAX_LIST = 200


@dataclass
class BranchBackend:
    """The agents' tools (agents.backend.WriteBackend) on one work branch."""

    repo: Repo  # main repository (serving index, notes)
    workspace: Workspace
    base: pygit2.Commit
    principal: str

    @property
    def scopes(self) -> tuple[str, ...]:
        return parse_principal(self.principal)

    def _head(self) -> str:
        return str(self.workspace.head().id)

    # ---- read tools ----------------------------------------------------------------------

    def search(self, query: str, k: int = 8, include_evidence: bool = True) -> str:
        from kb.retrieval.search import search

        try:
            hits = search(self.repo, query, self.principal, k=k, include_evidence=include_evidence)
        except IndexMissingError:
            return "no search index is built yet on the main branch; use list_pages and grep_docs"
        if not hits:
            return "no results"
        out = []
        for h in hits:
            where = f"{h.id}#L{h.line_start}-L{h.line_end}" if h.kind == "evidence" else f"{h.id}#{h.anchor} (lines {h.line_start}-{h.line_end})"
            snippet = " ".join(h.text.split())[:300]
            out.append(f"- [{h.kind}] {where}: {h.title} | {h.summary}\n  {snippet}")
        return "\n".join(out)

    def read_doc(self, page_id: str) -> str:
        view = read_page(self.workspace.view, page_id, self.principal, self._head(), level="L1")
        outline = "\n".join(f"  {'#' * o.level} {o.title}  (#{o.anchor}, lines {o.line}-{o.end_line}, {o.tokens} tokens)" for o in view.outline)
        more = f"\n(more: read_section with cursor {view.next_cursor})" if view.next_cursor else ""
        return f"{view.id}: {view.title}\nstatus {view.status}, valid {view.valid_from or '-'}..{view.valid_to or '-'}\nL0: {view.summary}\nsections:\n{outline}\nL1 (lines {view.line_start}-{view.line_end}):\n{view.text}{more}"

    def read_section(self, page_id: str, anchor: str, cursor: int | None = None) -> str:
        view = read_section(self.workspace.view, page_id, anchor, self.principal, self._head(), cursor=str(cursor) if cursor else None)
        numbered = "\n".join(f"{view.line_start + i}: {line}" for i, line in enumerate(view.text.splitlines()))
        more = f"\n(more: cursor {view.next_cursor})" if view.next_cursor else ""
        return f"{view.id}#{view.anchor} lines {view.line_start}-{view.line_end}:\n{numbered}{more}"

    def grep_docs(self, pattern: str, page_id: str | None = None, regex: bool = False) -> str:
        result = grep(self.workspace.view, pattern, self.principal, self._head(), page_id, regex, ignore_case=True)
        if not result.hits:
            return "no matches"
        lines = [f"{h.page}#{h.anchor} L{h.line}: {h.text.strip()[:200]}" for h in result.hits]
        return "\n".join(lines) + ("\n(more matches not shown)" if result.truncated else "")

    def _ledger(self) -> list[LedgerEntry]:
        return ledger_at(self.repo, self.workspace.head())

    def read_evidence(self, evidence_id: str, start: int | None = None, end: int | None = None) -> str:
        entry = next((e for e in self._ledger() if e.id == evidence_id), None)
        if entry is None or entry.scope not in self.scopes:
            raise NotFoundError(f"unknown evidence id {evidence_id!r}")
        data = self.repo.read_at(self.workspace.head(), entry.path)
        lines = (data or b"").decode("utf-8").splitlines()
        first = max(1, start or 1)
        last = min(len(lines), end or len(lines), first + MAX_EVIDENCE_LINES - 1)
        if first > len(lines):
            raise NotFoundError(f"{evidence_id} has {len(lines)} lines; L{first} does not exist")
        body = "\n".join(f"L{n}: {lines[n - 1]}" for n in range(first, last + 1))
        more = f"\n(lines {last + 1}-{len(lines)} not shown: call again with start={last + 1})" if last < len(lines) else ""
        return f"{entry.id} ({entry.kind}, {entry.scope}, {entry.lines} lines, source {entry.source}):\n{body}{more}"

    def list_pages(self, prefix: str | None = None) -> str:
        files = self.repo.tree_files(self.workspace.head(), ("knowledge/", "users/"))
        rows = []
        for path in sorted(files):
            if not path.endswith(".md") or scope_for_path(path) not in self.scopes or (prefix and not path.startswith(prefix)):
                continue
            try:
                summary = parse_page(self.repo.read_blob(files[path]), path).summary
            except KbError:
                summary = "(unreadable page)"
            rows.append(f"- {page_id_for_path(path)}: {summary}")
            if len(rows) >= MAX_LIST:
                rows.append("(more pages not shown: give a prefix)")
                break
        return "\n".join(rows) or "no pages"

    def run_checks(self) -> str:
        return run_gate(self.workspace.view, self.base).text()

    # ---- write tools (committed at once, so reads see them) ------------------------------

    def _commit(self, what: str) -> None:
        self.workspace.commit(f"wip: {what}")

    def write_page(self, path: str, content: str) -> str:
        result = self.workspace.write_page(path, content)
        self._commit(result)
        return result

    def edit_page(self, path: str, old: str, new: str) -> str:
        result = self.workspace.edit_page(path, old, new)
        self._commit(result)
        return result

    def deprecate_page(self, path: str, reason: str, superseded_by: str | None = None) -> str:
        result = self.workspace.deprecate_page(path, reason, superseded_by)
        self._commit(result)
        return result


def budget_of(repo: Repo) -> Budget:
    loop = repo.config.loop
    return Budget(max_rounds=loop.max_rounds, max_tokens=loop.max_tokens, max_cost_usd=loop.max_cost_usd)


def principal_for(prefixes: tuple[str, ...]) -> str:
    users = [p.split("/")[1] for p in prefixes if p.startswith("users/")]
    return f"user:{users[0]}" if len(users) == 1 and "knowledge/" not in prefixes else "system" if not users else f"user:{users[0]}"


def _usage(run: Any) -> dict[str, Any]:
    u = run.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "cost_usd": u.cost_usd, "calls": u.calls}


def _save(run_dir: Path, name: str, run: Any) -> None:
    import json

    save_transcript(run_dir, name, json.loads(run.to_json()))


def run_model_proposer(workspace: Workspace, entries: list[LedgerEntry], role: Role, run_dir: Path, feedback: str | None = None, current_diff: str | None = None) -> dict[str, Any]:
    """Run the configured Proposer on the branch; returns its usage. The transcript is saved
    even when the run fails (and the error is raised again)."""
    from agents.loop import stopped_run
    from agents.proposer import EvidenceBrief, ProposalTask, propose_with_model

    repo = workspace.repo
    base = repo.git[repo.git.merge_base(repo.head().id, workspace.head().id)].peel(pygit2.Commit)
    backend = BranchBackend(repo, workspace, base, principal_for(workspace.allowed))
    briefs = []
    for e in entries:
        data = repo.read_at(workspace.head(), e.path) or b""
        preview = "\n".join(f"L{n}: {line}" for n, line in enumerate(data.decode("utf-8").splitlines()[:12], 1))
        briefs.append(EvidenceBrief(e.id, e.scope, preview, e.kind, e.lines))
    task = ProposalTask(tuple(briefs), workspace.allowed, feedback=feedback, current_diff=current_diff)
    name = "proposer" if feedback is None else f"proposer-revision-{len(list(run_dir.glob('proposer*')))}"
    try:
        run = propose_with_model(client_for(role), backend, task, budget_of(repo))
    except KbError as exc:
        partial = stopped_run(exc)
        if partial is not None:
            _save(run_dir, name, partial)
        raise
    _save(run_dir, name, run)
    return _usage(run)


def branch_diff(repo: Repo, base: pygit2.Commit, head: pygit2.Commit) -> str:
    diff = repo.git.diff(base.tree, head.tree, context_lines=3)
    return diff.patch or ""


def run_model_reviewer(repo: Repo, workspace: Workspace, base: pygit2.Commit, head: pygit2.Commit, gate: GateReport, info: dict[str, str], role: Role, run_dir: Path) -> tuple[str, str, list[Comment], dict[str, Any]]:
    from agents.loop import stopped_run
    from agents.reviewer import ReviewTask, review_with_model

    diff = repo.git.diff(base.tree, head.tree)
    changed = tuple(sorted(d.new_file.path for d in diff.deltas))
    evidence = tuple(e.strip() for e in info.get("Kb-Evidence", "").split(",") if e.strip())
    prefixes = tuple(sorted({"knowledge/" if p.startswith("knowledge/") else "/".join(p.split("/")[:2]) + "/" for p in changed if p.startswith(("knowledge/", "users/"))}))
    backend = BranchBackend(repo, workspace, base, principal_for(prefixes or ("knowledge/",)))
    task = ReviewTask(diff.patch or "", changed, gate.text(), evidence, workspace.branch, str(head.id))
    try:
        run = review_with_model(client_for(role), backend, task, budget_of(repo))
    except KbError as exc:
        partial = stopped_run(exc)
        if partial is not None:
            _save(run_dir, "reviewer", partial)
        raise
    _save(run_dir, "reviewer", run)
    verdict = run.result
    return verdict.verdict, verdict.summary, list(run.comments), _usage(run)
