"""The Proposer's backend on a work branch: the read tools of ``agents.read_tools`` over the
branch's worktree, plus writes confined by the ``Workspace``.

Writes land in the worktree at once and are committed before the next read (``before_read``),
so a model reading its own pages sees them; a built-in agent that only writes ends with one
commit, made by the pipeline with the proposal's trailers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pygit2

from agents.read_tools import RepoReader
from ci.gate import run_gate
from kb.errors import PathError
from kb.scopes import principal_for_folders
from pipeline.workspace import Workspace


@dataclass
class BranchBackend(RepoReader):
    workspace: Workspace
    pending: list[str] = field(default_factory=list)

    def before_read(self) -> None:
        if self.pending:
            self.workspace.commit(f"wip: {'; '.join(self.pending[:3])}" + (" ..." if len(self.pending) > 3 else ""))
            self.pending.clear()

    def page_text(self, path: str) -> str | None:
        try:
            return self.workspace.read_text(path) if path.startswith(self.workspace.allowed) else None
        except PathError:
            return None

    def write_page(self, path: str, content: str) -> str:
        result = self.workspace.write_page(path, content)
        self.pending.append(result)
        return result

    def edit_page(self, path: str, old: str, new: str) -> str:
        result = self.workspace.edit_page(path, old, new)
        self.pending.append(result)
        return result

    def deprecate_page(self, path: str, reason: str, superseded_by: str | None = None) -> str:
        result = self.workspace.deprecate_page(path, reason, superseded_by)
        self.pending.append(result)
        return result


def branch_backend(workspace: Workspace, base: pygit2.Commit, folders: tuple[str, ...] | None = None) -> BranchBackend:
    """Tools on ``workspace``'s branch, scoped to the principal of the folders it may touch
    (``folders``, default the workspace's own), with ``run_checks`` as the gate since ``base``."""
    repo = workspace.repo
    principal = principal_for_folders(folders or workspace.allowed)
    return BranchBackend(repo, workspace.view, principal, lambda: run_gate(workspace.view, base).text(), workspace)
