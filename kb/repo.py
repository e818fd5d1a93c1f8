"""Repository access: finding the knowledge repository, reading commits, writing commits.

The one seam to git (pygit2, libgit2 bundled: no git binary needed). Commits are built from
git objects (a parent tree plus changed blobs), so a branch can be written without a working
tree, and a working-tree commit touches exactly the paths it names.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import random
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

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
    lock_wait: float | None = None  # seconds a writer waits for another; None: the config's lock_wait_s
    on_lock_wait: Callable[[str], None] | None = None  # told once, when a writer starts to wait
    command: str = ""  # what this process is, for a waiter's message (default: its argv)

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
        """An exclusive lock under .kb/, released on exit or process death.

        Another process's hold is waited for (``lock_wait``, bounded); a hold by this same
        thread is refused at once, since waiting for oneself never ends.
        """
        path = self.state_dir / f"{name}.lock"
        if (str(path), threading.get_ident()) in _HELD:
            raise ConflictError(f"this process already holds the {name} lock ({path})", hint="wait for it to finish and try again")
        with self._hold(path, f"{name} lock"):
            yield

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """The one repository-wide lock of every command that writes the repository.

        Re-entrant within a thread (``kb run`` holds it and calls propose, review and merge, which
        take it too). The outermost holder first finishes what a killed writer left half done
        (``finish_interrupted``), so every writer starts from a consistent repository.
        """
        path = self.state_dir / f"{WRITE_LOCK}.lock"
        key = (str(path), threading.get_ident())
        if key in _HELD:
            _HELD[key] += 1
            try:
                yield
            finally:
                _HELD[key] -= 1
            return
        with self._hold(path, "repository lock") as killed_since:
            if killed_since is not None:
                self._clear_git_locks(killed_since)
            self.finish_interrupted()
            yield

    @contextmanager
    def _hold(self, path: Path, what: str) -> Iterator[float | None]:
        """Hold the lock; yields when the previous holder was killed holding it (its start, epoch
        seconds), else None."""
        key = (str(path), threading.get_ident())
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            self._acquire(fd, path, what)
            killed_since = _holder_start(os.pread(fd, 4096, 0))
            # Who holds it, for a waiter's message. Truncated again on release, so a holder
            # named in the file is either alive or was killed holding the lock.
            os.ftruncate(fd, 0)
            holder = {"pid": os.getpid(), "command": self.command or _default_command(), "since": time.time()}
            os.pwrite(fd, json.dumps(holder).encode(), 0)
            _HELD[key] = 1
            try:
                yield killed_since
            finally:
                del _HELD[key]
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    def _acquire(self, fd: int, path: Path, what: str) -> None:
        """flock ``fd``, polling until the wait (``lock_wait`` or the config's) runs out."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        wait = self.lock_wait if self.lock_wait is not None else self.config.lock_wait_s
        holder = describe_holder(path)
        if self.on_lock_wait is not None and wait > 0:
            self.on_lock_wait(f"waiting for the {what} held by {holder} (up to {wait:g} s)")
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConflictError(
                        f"the {what} is still held by {describe_holder(path)} after waiting {wait:g} s ({path})",
                        hint="let that command finish and try again, or wait longer with --lock-wait SECONDS, "
                        "KB_LOCK_WAIT or lock_wait_s in kb.config.yaml",
                    ) from None
                time.sleep(min(left, random.uniform(0.02, 0.1)))  # jitter: waiters do not wake in step

    def _clear_git_locks(self, since: float) -> None:
        """Remove git's own lock files (index, HEAD, refs) that a writer killed holding the
        repository lock left: those created since it started. git would refuse every later write."""
        gitdir = Path(self.git.path)
        candidates = [gitdir / "index.lock", gitdir / "HEAD.lock", gitdir / "packed-refs.lock"]
        candidates += (gitdir / "refs").rglob("*.lock")
        candidates += (gitdir / "worktrees").glob("*/index.lock")
        candidates += (gitdir / "worktrees").glob("*/HEAD.lock")
        for lock in candidates:
            try:
                if lock.stat().st_mtime >= since - 1:
                    lock.unlink()
            except FileNotFoundError:
                continue

    # ---- moving HEAD (the merge) -------------------------------------------------------

    def move_head(self, new: pygit2.Oid, drop_branch: str | None = None, drop_worktree: str | None = None) -> None:
        """Move HEAD's branch to ``new`` and bring the working tree's files of the change along;
        then delete ``drop_branch`` and the worktree ``drop_worktree`` (the merged work branch).

        Journaled: the intent (old and new commit, the changed paths) is written to
        ``.kb/head-move.json`` before anything moves, each file is replaced atomically, and the
        next writer (``finish_interrupted``) completes a move a kill interrupted, touching only
        the paths of that change. Call it holding the write lock.
        """
        head = self.head()
        if head is None:
            raise ConflictError("the repository has no commits yet", hint="add evidence and run `kb run` first")
        target = self.git[new].peel(pygit2.Commit)
        paths = sorted({p for d in diff_trees(head.tree, target.tree).deltas for p in (d.old_file.path, d.new_file.path)})
        dirty = sorted(set(self.dirty_paths()) & set(paths))
        if dirty:
            raise ConflictError(f"the working tree has uncommitted changes in {dirty[0]}", hint="commit or discard them first")
        intent = {"old": str(head.id), "new": str(new), "paths": paths, "branch": drop_branch, "worktree": drop_worktree}
        atomic_write(self.state_dir / HEAD_MOVE, (json.dumps(intent, indent=2, sort_keys=True) + "\n").encode())
        self._apply_head_move(intent)

    def finish_interrupted(self) -> str | None:
        """Complete a head move a killed process left half done; what was done, or None."""
        journal = self.state_dir / HEAD_MOVE
        try:
            intent = json.loads(journal.read_text(encoding="utf-8"))
            old, new = str(intent["old"]), str(intent["new"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):  # a journal cut short: written before anything moved
            journal.unlink(missing_ok=True)
            return None
        head = self.head()
        if head is None or str(head.id) not in (old, new) or new not in self.git:
            journal.unlink()  # HEAD was moved some other way since: nothing of ours to finish
            return None
        self._apply_head_move(intent)
        return f"finished an interrupted merge: HEAD is now {new[:10]}"

    def _apply_head_move(self, intent: dict[str, Any]) -> None:
        target = self.git[intent["new"]].peel(pygit2.Commit)
        index = self.git.index
        index.read()
        for path in intent["paths"]:
            file = self.root / path
            for leftover in file.parent.glob(f".{glob.escape(file.name)}.tmp-*"):  # of a killed atomic_write
                leftover.unlink(missing_ok=True)
            try:
                entry = target.tree[path]
            except KeyError:
                entry = None
            if isinstance(entry, pygit2.Blob):
                atomic_write(file, entry.data)
                index.add(path)
            else:
                file.unlink(missing_ok=True)
                if path in index:
                    index.remove(path)
        index.write()
        self.git.head.resolve().set_target(target.id)
        if intent.get("worktree") and intent["worktree"] in self.git.list_worktrees():
            worktree = self.git.lookup_worktree(intent["worktree"])
            shutil.rmtree(worktree.path, ignore_errors=True)
            worktree.prune(True)
        branch = self.git.branches.local.get(intent["branch"]) if intent.get("branch") else None
        if branch is not None and (branch.target == target.id or self.git.descendant_of(target.id, branch.target)):
            branch.delete()
        (self.state_dir / HEAD_MOVE).unlink(missing_ok=True)


WRITE_LOCK = "write"
HEAD_MOVE = "head-move.json"
# Locks this process holds: (lock file, thread) -> depth. An flock belongs to an open file, so a
# second open and flock of the same file in the same process would wait for itself.
_HELD: dict[tuple[str, int], int] = {}


def _default_command() -> str:
    return " ".join([Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]])[:200]


def _holder_start(data: bytes) -> float | None:
    """When the holder named in a lock file's ``data`` started; None when none is named (the
    last holder released it cleanly)."""
    try:
        return float(json.loads(data)["since"]) if data.strip() else None
    except (ValueError, KeyError, TypeError):
        return 0.0  # named, but cut short by the kill: treat every git lock file as its


def describe_holder(path: Path) -> str:
    """ "pid N (command ...)" from a lock file, or a generic phrase when it names no live process."""
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
        pid, command = int(data["pid"]), str(data["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another kb process"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "another kb process"
    except PermissionError:
        pass  # alive, another user's
    return f"pid {pid} (command {command})"


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
