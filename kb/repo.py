"""Repository access: finding the knowledge repository, reading commits, writing commits.

The one seam to git (pygit2, libgit2 bundled: no git binary needed). Commits are built from
git objects (a parent tree plus changed blobs), so a branch can be written without a working
tree, and a working-tree commit touches exactly the paths it names.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pygit2

from kb.config import CONFIG_FILE, Config, load_config
from kb.errors import ConflictError, NotARepositoryError, NotFoundError, PathError

STATE_DIR = ".kb"
FILEMODE_BLOB = pygit2.enums.FileMode.BLOB


def diff_trees(old: pygit2.Tree, new: pygit2.Tree) -> pygit2.Diff:
    """``git diff old new``: three lines of context, hunks merged only when they touch.

    What ``Repository.diff`` does for two trees (its stubs accept commits, not trees); the
    low-level default would merge hunks up to three lines apart.
    """
    return old.diff_to_tree(new, context_lines=3, interhunk_lines=0)


def find_root(start: Path | None = None, explicit: Path | None = None) -> Path:
    """The repository root: ``explicit`` if given, else the nearest ancestor with a config."""
    if explicit is not None:
        root = explicit.expanduser().resolve()
        if not (root / CONFIG_FILE).is_file():
            raise NotARepositoryError(f"{root} is not a kb repository (no {CONFIG_FILE})")
        return root
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / CONFIG_FILE).is_file():
            return candidate
    raise NotARepositoryError(f"not inside a kb repository (no {CONFIG_FILE} in {here} or its parents)")


@dataclass
class Repo:
    """An open knowledge repository."""

    root: Path

    @cached_property
    def git(self) -> pygit2.Repository:
        try:
            return pygit2.Repository(str(self.root))
        except pygit2.GitError:
            raise NotARepositoryError(
                f"{self.root} has {CONFIG_FILE} but is not a git repository", hint="run `git init` there, or `kb init` in a new folder"
            ) from None

    @cached_property
    def config(self) -> Config:
        return load_config(self.root)

    @property
    def state_dir(self) -> Path:
        path = self.root / STATE_DIR
        path.mkdir(exist_ok=True)
        return path

    # ---- paths -------------------------------------------------------------------------

    def relpath(self, path: Path | str) -> str:
        """Repository-relative POSIX path of ``path``; outside the repository is a PathError."""
        absolute = Path(path)
        if not absolute.is_absolute():
            absolute = Path.cwd() / absolute
        resolved = absolute.resolve()
        try:
            return resolved.relative_to(self.root).as_posix()
        except ValueError:
            raise PathError(f"{path} is outside the repository {self.root}", hint="give a path inside the repository") from None

    # ---- reading commits ---------------------------------------------------------------

    def head(self) -> pygit2.Commit | None:
        if self.git.head_is_unborn:
            return None
        return self.git.head.peel(pygit2.Commit)

    def resolve(self, rev: str) -> pygit2.Commit:
        try:
            obj = self.git.revparse_single(rev)
            return obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            raise NotFoundError(f"unknown commit or branch `{rev}`", hint="check `git log --oneline` or `git branch`") from None

    def tree_files(self, commit: pygit2.Commit, prefixes: tuple[str, ...] = ()) -> dict[str, pygit2.Oid]:
        """Every blob path in ``commit`` (under ``prefixes`` if given) -> blob id."""
        out: dict[str, pygit2.Oid] = {}

        def walk(tree: pygit2.Tree, base: str) -> None:
            for entry in tree:
                path = f"{base}{entry.name}"
                if isinstance(entry, pygit2.Tree):
                    if not prefixes or any(p.startswith(path + "/") or path.startswith(p.rstrip("/")) for p in prefixes):
                        walk(entry, path + "/")
                elif isinstance(entry, pygit2.Blob):
                    if not prefixes or any(path.startswith(p) for p in prefixes):
                        out[path] = entry.id

        walk(commit.tree, "")
        return out

    def read_blob(self, oid: pygit2.Oid) -> bytes:
        return self.git[oid].peel(pygit2.Blob).data

    def read_at(self, commit: pygit2.Commit, path: str) -> bytes | None:
        """The file at ``path`` in ``commit``; None if there is none (or it is a folder)."""
        try:
            entry = commit.tree[path]
        except KeyError:
            return None
        return entry.data if isinstance(entry, pygit2.Blob) else None

    # ---- writing commits ---------------------------------------------------------------

    def signature(self) -> pygit2.Signature:
        try:
            return self.git.default_signature
        except (KeyError, pygit2.GitError):
            return pygit2.Signature("kb", "kb@localhost")

    def commit_changes(
        self,
        changes: dict[str, bytes | None],
        message: str,
        ref: str = "HEAD",
        parents: list[pygit2.Oid] | None = None,
    ) -> pygit2.Oid:
        """Commit ``changes`` (path -> content, None deletes) on top of ``ref``'s commit.

        Works from git objects only; the working tree and index are not touched.
        """
        if parents is None:
            parent = self.resolve(ref) if not (ref == "HEAD" and self.git.head_is_unborn) else None
            parents = [parent.id] if parent is not None else []
        index = pygit2.Index()
        if parents:
            index.read_tree(self.git[parents[0]].peel(pygit2.Commit).tree)
        for path, content in sorted(changes.items()):
            if content is None:
                if path in index:
                    index.remove(path)
            else:
                blob = self.git.create_blob(content)
                index.add(pygit2.IndexEntry(path, blob, FILEMODE_BLOB))
        tree = index.write_tree(self.git)
        sig = self.signature()
        target = "HEAD" if ref == "HEAD" else (ref if ref.startswith("refs/") else f"refs/heads/{ref}")
        return self.git.create_commit(target, sig, sig, message, tree, parents)

    def commit_worktree_paths(self, paths: list[str], message: str) -> pygit2.Oid:
        """Commit the working-tree state of ``paths`` on HEAD and sync the index for them."""
        changes: dict[str, bytes | None] = {}
        for path in paths:
            full = self.root / path
            changes[path] = full.read_bytes() if full.is_file() else None
        oid = self.commit_changes(changes, message)
        index = self.git.index
        index.read()
        for path, content in changes.items():
            if content is None:
                if path in index:
                    index.remove(path)
            else:
                index.add(path)
        index.write()
        return oid

    def dirty_paths(self, prefixes: tuple[str, ...] = ()) -> list[str]:
        """Paths with uncommitted changes (untracked included), optionally under ``prefixes``."""
        flags = self.git.status(untracked_files="all")
        paths = [p for p, f in flags.items() if f not in (pygit2.enums.FileStatus.CURRENT, pygit2.enums.FileStatus.IGNORED)]
        if prefixes:
            paths = [p for p in paths if p.startswith(prefixes)]
        return sorted(paths)

    def changed_since(self, base: pygit2.Commit) -> list[str]:
        """Paths that differ between ``base`` and the working tree (committed or not).

        Tree-to-tree from ``base`` to HEAD (identical subtrees are skipped by id), then the
        status of the working tree against HEAD (which uses the index's stat cache): much
        cheaper than hashing every file of the working tree.
        """
        paths: set[str] = set(self.dirty_paths())
        head = self.head()
        if head is not None and head.id != base.id:
            for delta in diff_trees(base.tree, head.tree).deltas:
                paths.add(delta.old_file.path)
                paths.add(delta.new_file.path)
        return sorted(paths)

    # ---- locking -----------------------------------------------------------------------

    @contextmanager
    def lock(self, name: str) -> Iterator[None]:
        """An exclusive, non-blocking lock under .kb/ (released on exit or process death)."""
        path = self.state_dir / f"{name}.lock"
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConflictError(
                    f"another kb process holds the {name} lock ({path})", hint="wait for it to finish and try again"
                ) from None
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            yield
        finally:
            os.close(fd)


def open_repo(explicit: Path | None = None, start: Path | None = None) -> Repo:
    return Repo(find_root(start, explicit))


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder and rename: readers see old or new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
