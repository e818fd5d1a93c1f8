"""Step 4 of `kb forget`: every commit, tag and note rewritten without the material; reflogs,
stale worktrees and unreachable objects dropped."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pygit2

from kb.evidence import LEDGER_PATH, parse_ledger
from kb.forgotten import MIN_TEXT, normalise
from kb.repo import Repo
from kb.scopes import folder_for_scope
from pipeline.forget.change import new_ledger
from pipeline.forget.derived import SCRUBBED, scrub_json
from pipeline.forget.plan import Plan
from pipeline.forget.records import write_pending
from pipeline.forget.verify import file_has


class _Rewriter:
    """Rewrites trees, blobs and messages of every commit (memoised by object id)."""

    def __init__(self, repo: Repo, plan: Plan) -> None:
        self.repo, self.git, self.plan = repo, repo.git, plan
        self.blobs: dict[tuple[pygit2.Oid, bool], pygit2.Oid | None] = {}
        self.trees: dict[tuple[pygit2.Oid, str], pygit2.Oid | None] = {}
        self.forgotten_paths = {p for p, data in plan.files.items() if data is None}
        self.user_folders = tuple(folder_for_scope(s) for s in plan.scopes)
        self.renames = plan.items
        self.replacements = {p: d for p, d in plan.files.items() if d is not None and p.startswith("evidence/")}
        self.texts = sorted({normalise(t) for t in plan.texts if len(normalise(t)) >= MIN_TEXT})

    def dropped(self, path: str) -> bool:
        if path in self.forgotten_paths or path.startswith(self.user_folders or ("\0",)):
            return True
        return any(f"/{old}.md" in path for old in self.renames) and path.startswith("evidence/")

    def scrub(self, text: str) -> str:
        for old, new in self.renames.items():
            text = text.replace(old, new)
        prints = self.plan.fingerprints
        if not prints.digests:
            return text
        lines = text.split("\n")
        return "\n".join(SCRUBBED if prints.found_in(line) else line for line in lines)

    def scrub_file(self, text: str, path: str) -> str:
        """``scrub``, but a JSON record keeps its shape: its strings holding material go."""
        if path.endswith(".json"):
            renamed = self.scrub(text) if self.renames else text
            scrubbed = scrub_json(renamed, self.plan.fingerprints.found_in)
            if scrubbed is not None:
                return scrubbed
        return self.scrub(text)

    def blob(self, oid: pygit2.Oid, path: str) -> pygit2.Oid | None:
        key = (oid, path.endswith(".json"))
        if path == LEDGER_PATH:
            return self._ledger(oid)
        if path in self.replacements:  # a redacted item: the same redaction in every commit
            return self.git.create_blob(self.replacements[path])
        if key not in self.blobs:
            data = self.git[oid].read_raw()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                self.blobs[key] = oid
                return oid
            new = self.scrub_file(text, path)
            self.blobs[key] = oid if new == text else self.git.create_blob(new.encode("utf-8"))
        return self.blobs[key]

    def _ledger(self, oid: pygit2.Oid) -> pygit2.Oid:
        """The ledger as it was at that commit, with the same tombstones and hashes as HEAD's:
        chaining depends only on the lines before, so each old ledger stays a prefix of the new."""
        entries = parse_ledger(self.git[oid].read_raw().decode("utf-8"))
        if not any(e.id in self.plan.items or e.id in self.plan.redacted_hashes for e in entries):
            return oid
        ledger = new_ledger(entries, self.plan, None)
        return self.git.create_blob("".join(e.to_line() for e in ledger).encode("utf-8"))

    def tree(self, oid: pygit2.Oid, base: str) -> pygit2.Oid | None:
        key = (oid, base)
        if key in self.trees:
            return self.trees[key]
        builder = self.git.TreeBuilder()
        for entry in self.git[oid].peel(pygit2.Tree):
            name = entry.name or ""
            path = base + name
            if entry.type_str == "tree" and self.plan.fingerprints.found_in(name):
                new = None
            elif entry.type_str == "tree":
                new = self.tree(entry.id, path + "/")
            elif self.dropped(path) or self.plan.fingerprints.found_in(name):  # a file named by the material
                new = None
            elif entry.type_str == "blob":
                new = self.blob(entry.id, path)
            else:
                new = entry.id
            if new is not None:
                builder.insert(name, new, entry.filemode)
        result = builder.write() if len(builder) or not base else None
        self.trees[key] = result
        return result


def _all_refs(git: pygit2.Repository) -> list[str]:
    return sorted(r for r in git.references if r.startswith("refs/"))


def _walk(git: pygit2.Repository, tips: list[pygit2.Oid]) -> Iterator[pygit2.Commit]:
    walker = git.walk(tips[0], pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
    for tip in tips[1:]:
        walker.push(tip)
    yield from walker


def rewrite_history(repo: Repo, plan: Plan) -> dict[str, str]:
    """Step 4: every branch and tag rewritten; notes rebuilt on the new ids; remotes' refs,
    stale worktrees and reflogs dropped; unreachable objects pruned. Returns old -> new ids."""
    git = repo.git
    rewriter = _Rewriter(repo, plan)
    notes = {r for r in _all_refs(git) if r.startswith("refs/notes/")}
    remotes = {r for r in _all_refs(git) if r.startswith("refs/remotes/")}
    refs = [r for r in _all_refs(git) if r not in notes and r not in remotes and r != "refs/stash"]
    tips = [git.references[r].peel(pygit2.Commit).id for r in refs]
    mapping: dict[pygit2.Oid, pygit2.Oid] = {}
    with repo.write_lock():
        if tips:
            for commit in _walk(git, tips):
                tree = rewriter.tree(commit.tree_id, "") or git.TreeBuilder().write()
                parents = [mapping.get(p, p) for p in commit.parent_ids]
                message = rewriter.scrub(commit.message)
                if tree == commit.tree_id and parents == list(commit.parent_ids) and message == commit.message:
                    mapping[commit.id] = commit.id
                    continue
                mapping[commit.id] = git.create_commit(None, commit.author, commit.committer, message, tree, parents)
        for name in refs:
            ref = git.references[name]
            old = ref.peel(pygit2.Commit).id
            if isinstance(git[ref.target], pygit2.Tag):
                _retag(git, name, mapping.get(old, old), rewriter)
            elif mapping.get(old, old) != old:
                ref.set_target(mapping[old], "kb forget")
        for name in notes:
            _rebuild_notes(repo, name, mapping, rewriter)
        for name in sorted(remotes) + (["refs/stash"] if "refs/stash" in git.references else []):
            git.references.delete(name)
        _drop_worktrees(repo, rewriter)
        head = repo.head()
        if head is not None:
            git.reset(head.id, pygit2.enums.ResetMode.HARD)
        _prune(repo)
    write_pending(repo, plan, "rewritten")
    return {str(k): str(v) for k, v in mapping.items() if k != v}


def _retag(git: pygit2.Repository, ref: str, target: pygit2.Oid, rewriter: _Rewriter) -> None:
    """An annotated tag made again on the rewritten commit, its message scrubbed (the old tag
    object keeps the old commit and message until pruned)."""
    tag = git[git.references[ref].target].peel(pygit2.Tag)
    message = rewriter.scrub(tag.message)
    if tag.target == target and message == tag.message:
        return
    git.references.delete(ref)
    git.create_tag(ref.removeprefix("refs/tags/"), target, pygit2.enums.ObjectType.COMMIT, tag.tagger, message)


def _rebuild_notes(repo: Repo, ref: str, mapping: dict[pygit2.Oid, pygit2.Oid], rewriter: _Rewriter) -> None:
    """Notes moved to the rewritten commits in one fresh commit (the notes' own history would
    keep old blobs). A note whose text held the material is dropped; the others keep their
    records as signed, so a signature over an old head id no longer verifies (docs/privacy.md)."""
    git = repo.git
    moved: list[tuple[pygit2.Oid, str]] = []
    for note in git.notes(ref):  # type: ignore[call-arg]  # the stub lacks the ref argument
        annotated, text = note.annotated_id, note.message
        if rewriter.plan.fingerprints.found_in(text) or rewriter.scrub(text) != text:
            continue
        moved.append((mapping.get(annotated, annotated), text))
    git.references.delete(ref)
    sig = repo.signature()
    for annotated, text in moved:
        if annotated in git:
            git.create_note(text, sig, sig, str(annotated), ref, True)


def _drop_worktrees(repo: Repo, rewriter: _Rewriter) -> None:
    """Worktrees (work branches' checkouts) holding the material are removed; git prunes them."""
    git = repo.git
    for name in git.list_worktrees():
        worktree = git.lookup_worktree(name)
        folder = Path(worktree.path)
        if folder.is_dir() and any(
            file_has(p, rewriter.plan.fingerprints) for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts
        ):
            shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            worktree.prune(True)


def _prune(repo: Repo) -> None:
    def git_cmd(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo.root), *args], check=True, capture_output=True)

    git_cmd("reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
    for name in ("ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD"):
        (Path(repo.git.path) / name).unlink(missing_ok=True)
    git_cmd("worktree", "prune")
    git_cmd("gc", "--prune=now", "--quiet")
