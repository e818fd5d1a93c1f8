"""A work branch and its git worktree: where agent edits are applied, confined and committed.

Agents produce data (write this page, replace this text); this module performs it, and only
inside the folders a proposal may touch (``knowledge/`` and ``users/``, or one user's folder).
Evidence, config, CI files, paths with ``..``, absolute paths and symlinks are refused.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pygit2

from kb.clock import today_utc
from kb.errors import ConflictError, FormatError, NotFoundError, PathError
from kb.page import page_id_for_path, parse_page, render_page
from kb.repo import Repo, atomic_write
from kb.scopes import PAGE_FOLDERS

BRANCH_PREFIX = "kb/"
WORKTREES = "worktrees"
WRITABLE = PAGE_FOLDERS
SLUG_RE = re.compile(r"[^a-z0-9]+")


def slugify_branch(text: str) -> str:
    return SLUG_RE.sub("-", text.lower()).strip("-")[:48] or "change"


def confine(root: Path, path: str, allowed: tuple[str, ...]) -> str:
    """The normalised repository path for a write, or PathError if it leaves ``allowed``."""
    if not path or "\x00" in path or "\\" in path:
        raise PathError(f"invalid path {path!r}")
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or any(part in ("", ".") for part in path.split("/")):
        raise PathError(f"path {path!r} must be relative, without '..' or empty parts")
    rel = pure.as_posix()
    if not rel.endswith(".md"):
        raise PathError(f"{rel}: only Markdown pages (*.md) can be written")
    if not rel.startswith(allowed):
        raise PathError(
            f"{rel}: writes are confined to {', '.join(allowed)}", hint="evidence, config and CI files are never written by agents"
        )
    current = root
    for part in pure.parts:
        current = current / part
        if current.is_symlink():
            raise PathError(f"{rel}: {current.relative_to(root).as_posix()} is a symlink; agents never write through symlinks")
    resolved = (root / rel).resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise PathError(f"{rel} resolves outside the work branch")
    return rel


@dataclass
class Workspace:
    """A checked-out work branch under ``.kb/worktrees/<name>``."""

    repo: Repo  # the main repository
    branch: str  # e.g. kb/20250618-alice
    root: Path  # the worktree folder
    allowed: tuple[str, ...] = WRITABLE

    @property
    def git(self) -> pygit2.Repository:
        return pygit2.Repository(str(self.root))

    @property
    def view(self) -> Repo:
        """The worktree as a Repo (for checks and reading)."""
        return Repo(self.root)

    def head(self) -> pygit2.Commit:
        return self.git.head.peel(pygit2.Commit)

    # ---- write tools ---------------------------------------------------------------------

    def read_text(self, path: str) -> str | None:
        rel = confine(self.root, path, WRITABLE)
        file = self.root / rel
        return file.read_text(encoding="utf-8") if file.is_file() else None

    def write_page(self, path: str, content: str) -> str:
        rel = confine(self.root, path, self.allowed)
        if not content.endswith("\n"):
            content += "\n"
        page = parse_page(content, rel)  # FormatError goes back to the model
        if page.id and page.id != page_id_for_path(rel):
            raise FormatError(f"{rel}: the header says id `{page.id}`; it must be `{page_id_for_path(rel)}`")
        existed = (self.root / rel).exists()
        atomic_write(self.root / rel, content.encode("utf-8"))
        return f"{'updated' if existed else 'created'} {rel} ({content.count(chr(10))} lines)"

    def edit_page(self, path: str, old: str, new: str) -> str:
        rel = confine(self.root, path, self.allowed)
        file = self.root / rel
        if not file.is_file():
            raise NotFoundError(f"{rel}: no such page on the work branch")
        text = file.read_text(encoding="utf-8")
        count = text.count(old) if old else 0
        if count != 1:
            raise ConflictError(
                f"{rel}: the old text was found {count} times; it must match exactly once", hint="quote more context so the match is unique"
            )
        updated = text.replace(old, new, 1)
        parse_page(updated, rel)
        atomic_write(file, updated.encode("utf-8"))
        return f"edited {rel}"

    def deprecate_page(self, path: str, reason: str, superseded_by: str | None = None, today: str | None = None) -> str:
        rel = confine(self.root, path, self.allowed)
        file = self.root / rel
        if not file.is_file():
            raise NotFoundError(f"{rel}: no such page on the work branch")
        page = parse_page(file.read_text(encoding="utf-8"), rel)
        meta = dict(page.meta)
        meta["status"] = "deprecated"
        meta["valid_to"] = today or today_utc()
        if superseded_by:
            meta["superseded_by"] = sorted(set(meta.get("superseded_by") or []) | {superseded_by})
        body = page.body.rstrip("\n") + f"\n\n> Deprecated: {reason.strip()}\n"
        atomic_write(file, render_page(meta, body).encode("utf-8"))
        return f"deprecated {rel}"

    def commit(self, message: str, trailers: dict[str, str] | None = None, allow_empty: bool = False) -> str | None:
        """Commit every change under the writable folders; None when nothing changed (unless
        ``allow_empty``: then a commit that only carries the message and trailers)."""
        view = Repo(self.root)
        if view.git.head.name != f"refs/heads/{self.branch}":  # a worktree whose .git is gone opens the main repository
            raise ConflictError(
                f"{self.root} is not the worktree of {self.branch} (its HEAD is {view.git.head.name})",
                hint=f"propose again; `git worktree prune` removes the broken worktree of {self.branch}",
            )
        paths = view.dirty_paths(WRITABLE)
        if not paths and not allow_empty:
            return None
        text = message.rstrip() + "\n"
        if trailers:
            text += "\n" + "".join(f"{k}: {v}\n" for k, v in trailers.items())
        return str(view.commit_worktree_paths(paths, text))


def worktree_name(branch: str) -> str:
    """The git worktree (and folder under ``.kb/worktrees``) of a work branch."""
    return branch.replace("/", "-")


def open_workspace(repo: Repo, branch: str, base: str | None = None, create: bool = True, allowed: tuple[str, ...] = WRITABLE) -> Workspace:
    """The worktree of ``branch`` (created from ``base``, default HEAD, if it does not exist)."""
    if not branch.startswith(BRANCH_PREFIX):
        raise PathError(f"work branches are named {BRANCH_PREFIX}<slug>, not {branch!r}")
    name = worktree_name(branch)
    folder = repo.state_dir / WORKTREES
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    git = repo.git
    existing = git.branches.local.get(branch)
    if existing is None:
        if not create:
            raise NotFoundError(f"no branch {branch}", hint="list work branches with `git branch --list 'kb/*'`")
        base_commit = repo.resolve(base or "HEAD")
        existing = git.branches.local.create(branch, base_commit)
    if name in git.list_worktrees():
        worktree = git.lookup_worktree(name)
        if not Path(worktree.path).exists() or worktree.is_prunable:
            worktree.prune(True)
    if name not in git.list_worktrees():
        if path.exists():
            shutil.rmtree(path)
        git.add_worktree(name, str(path), existing)
    return Workspace(repo, branch, path, allowed)


def remove_workspace(repo: Repo, branch: str) -> None:
    name = worktree_name(branch)
    path = repo.state_dir / WORKTREES / name
    if path.exists():
        shutil.rmtree(path)
    if name in repo.git.list_worktrees():
        repo.git.lookup_worktree(name).prune(True)
