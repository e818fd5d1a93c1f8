"""`kb forget`: remove a user, an evidence item, or a piece of text from everything kb keeps.

The order is the point (docs/privacy.md):

1. ``plan_forget`` decides, from HEAD, what goes: evidence items (tombstoned, or redacted line by
   line for ``--match``), pages (deleted, or their citing claims removed) and the material: keyed
   fingerprints of the forgotten text, minus whatever retained pages and evidence also say.
2. ``revoke`` writes the deny entry (``kb.forgotten``): from then on no read returns it.
3. ``apply_head_change`` commits the change on the main branch after the deterministic checks
   pass on it (no Reviewer: a reviewer may not veto a deletion). The ledger keeps its chain:
   tombstones, recomputed hashes, and one entry recording the forgetting.
4. ``rewrite_history`` rewrites every commit of every ref so that no blob or message keeps the
   material (paths removed, ledgers tombstoned, other blobs scrubbed line by line), rebuilds the
   notes on the new commit ids, drops remote-tracking refs and copies in worktrees, expires the
   reflogs and prunes every unreachable object (``git gc --prune=now``).
5. ``purge_derived`` removes every index version and point-in-time index, rebuilds the index
   from the new HEAD, and deletes any other file under ``.kb/`` that holds the material.
6. ``verify`` scans every git object and every file under ``.kb/``; only a clean scan writes the
   completion record and lifts the deny entry.

The pending record (``.kb/forget/<id>.json``: fingerprints, ids and the step reached, never the
text) says how far a forgetting got; until it completes, its deny entry keeps the material hidden.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from kb.clock import iso_utc
from kb.errors import ConflictError, GateError, NotFoundError, UsageError
from kb.evidence import LEDGER_PATH, LedgerEntry, find_entry, forget_record, ledger_at, parse_ledger, rechain, tombstone
from kb.forgotten import (
    MIN_TEXT,
    Fingerprints,
    fingerprint,
    fingerprints_from_json,
    forget_dir,
    load_key,
    normalise,
    read_entries,
    write_entries,
)
from kb.repo import STATE_DIR, Repo, atomic_write
from kb.scopes import PAGE_FOLDERS, folder_for_scope, user_scope

if TYPE_CHECKING:
    from ci.run import CheckReport

SCRUBBED = "[forgotten]"
FORGOTTEN_DIR = "forget"  # under .kb/: deny entries, the key, pending and completion records
_FOOTNOTE_RE = re.compile(r"^\[\^([^\]\s]+)\]:\s*(ev-[0-9a-f]{16})(?:#L(\d+)(?:-L?(\d+))?)?")
_REF_RE = re.compile(r"\[\^([^\]\s]+)\]")


@dataclass(frozen=True)
class Target:
    """What to forget: exactly one of a user, an evidence id, a text, or expired items and memory
    pages (retention)."""

    user: str | None = None
    evidence: str | None = None
    match: str | None = None
    expired: tuple[str, ...] = ()  # evidence ids past their retention (pipeline/retention.py)
    expired_pages: tuple[str, ...] = ()  # memory page paths past their retention

    @property
    def kind(self) -> str:
        return "user" if self.user else "evidence" if self.evidence else "match" if self.match else "retention"


@dataclass
class Plan:
    op: str
    kind: str
    base: str  # HEAD when the forgetting started
    items: dict[str, str]  # forgotten evidence id -> the tombstone's fresh id
    redacted: list[str]  # evidence ids whose lines holding the text are redacted (--match)
    deleted_pages: list[str]
    edited_pages: list[str]
    scopes: list[str]
    fingerprints: Fingerprints
    redacted_hashes: dict[str, str] = field(default_factory=dict)  # redacted item id -> its new content hash
    files: dict[str, bytes | None] = field(default_factory=dict)  # the HEAD change: path -> new content (None deletes)
    texts: list[str] = field(default_factory=list)  # the material in the clear: memory only, never written
    target: str = ""  # target_digest of what was asked for (a re-run finds its unfinished forgetting)
    indexed: bool = False  # an index served when the forgetting began (so purging rebuilds one)

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.op,
            "kind": self.kind,
            "base": self.base,
            "evidence": sorted(self.items),
            "redacted": sorted(self.redacted),
            "deleted_pages": sorted(self.deleted_pages),
            "edited_pages": sorted(self.edited_pages),
        }


# ---- planning ------------------------------------------------------------------------------


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def _page_files(repo: Repo, commit: pygit2.Commit) -> dict[str, pygit2.Oid]:
    return {p: o for p, o in repo.tree_files(commit, PAGE_FOLDERS).items() if p.endswith(".md")}


def _cites(m: re.Match[str], forgotten: set[str], redacted: dict[str, set[int]]) -> bool:
    """Whether the footnote ``m`` cites a forgotten item, or a redacted line of an item."""
    ident = m.group(2)
    if ident in forgotten:
        return True
    if ident not in redacted or not m.group(3):
        return False
    first = int(m.group(3))
    return any(first <= n <= int(m.group(4) or first) for n in redacted[ident])


def drop_claims(text: str, forgotten: set[str], match: str | None = None, redacted: dict[str, set[int]] | None = None) -> str:
    """``text`` without the lines that cite a forgotten item (claims, footnotes, facts), that
    cite a line of an item that ``--match`` redacts (``redacted``: id -> line numbers; its quote
    no longer holds), or that hold ``match``; footnotes left unreferenced go too; ``sources``
    lists lose the ids."""
    lines = text.split("\n")
    labels = {m.group(1) for line in lines if (m := _FOOTNOTE_RE.match(line)) and _cites(m, forgotten, redacted or {})}
    wanted = normalise(match) if match else None
    kept: list[str] = []
    for line in lines:
        refs = set(_REF_RE.findall(line))
        if refs & labels or (wanted and wanted in normalise(line)):
            continue
        if any(ident in line for ident in forgotten):
            if line.startswith("sources:"):
                line = re.sub(r"\s*,?\s*\b(" + "|".join(map(re.escape, sorted(forgotten))) + r")\b\s*,?", ",", line)
                line = (
                    re.sub(r"\[\s*,+\s*", "[", re.sub(r"\s*,+\s*\]", "]", re.sub(r",\s*,+", ",", line)))
                    .replace(",", ", ")
                    .replace(",  ", ", ")
                )
            elif line.startswith("facts:"):
                line = _drop_facts(line, forgotten)
            else:
                continue
        kept.append(line)
    used = {label for line in kept if not _FOOTNOTE_RE.match(line) for label in _REF_RE.findall(line)}
    kept = [line for line in kept if not ((m := re.match(r"^\[\^([^\]\s]+)\]:", line)) and m.group(1) not in used)]
    return "\n".join(kept)


def _drop_facts(line: str, forgotten: set[str]) -> str:
    """The frontmatter ``facts:`` flow list without the facts whose source is forgotten."""
    import yaml

    facts = yaml.safe_load(line.split(":", 1)[1]) or []
    kept = [f for f in facts if not any(ident in str(f.get("source", "")) for ident in forgotten)]
    from kb.page import render_frontmatter

    rendered = render_frontmatter({"facts": kept}).strip().splitlines()
    return next((x for x in rendered if x.startswith("facts:")), "facts: []")


def _redact_lines(text: str, match: str) -> str:
    wanted = normalise(match)
    return "\n".join(_redact_line(line, match) if wanted in normalise(line) else line for line in text.split("\n"))


def _redact_line(line: str, match: str) -> str:
    replaced = re.sub(re.escape(match), SCRUBBED, line, flags=re.IGNORECASE)
    return replaced if replaced != line else SCRUBBED


def _matching_lines(text: str, match: str) -> set[int]:
    wanted = normalise(match)
    return {n for n, line in enumerate(text.split("\n"), 1) if wanted in normalise(line)}


@dataclass
class _Selection:
    items: list[LedgerEntry] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    lines: dict[str, set[int]] = field(default_factory=dict)  # redacted item -> its redacted line numbers
    scopes: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    files: dict[str, bytes | None] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)


def _select(repo: Repo, head: pygit2.Commit, entries: list[LedgerEntry], pages: dict[str, pygit2.Oid], target: Target) -> _Selection:
    """The items and pages ``target`` names at HEAD (and, for --match, the redacted items)."""
    out = _Selection()
    if target.user:
        scope = user_scope(target.user)
        out.scopes = [scope]
        out.items = [e for e in entries if e.scope == scope]
        out.deleted = sorted(p for p in pages if p.startswith(folder_for_scope(scope)))
        if not out.items and not out.deleted:
            raise NotFoundError(f"no evidence and no pages for user {target.user!r}", hint="check the id with `kb evidence list`")
    elif target.evidence:
        out.items = [find_entry(entries, target.evidence)]
    elif target.expired or target.expired_pages:
        out.items = [find_entry(entries, ident) for ident in target.expired]
        out.deleted = sorted(p for p in target.expired_pages if p in pages)
    else:
        match = target.match or ""
        if len(normalise(match)) < MIN_TEXT:
            raise UsageError(f"--match needs at least {MIN_TEXT} characters", hint="give the exact text to forget")
        out.texts.append(match)
        for e in entries:
            content = _text(repo.read_at(head, e.path))
            if lines := _matching_lines(content, match):
                out.redacted.append(e.id)
                out.lines[e.id] = lines
                out.files[e.path] = _redact_lines(content, match).encode("utf-8")
    for e in out.items:
        out.texts.append(_text(repo.read_at(head, e.path)))
        out.files[e.path] = None
    for path in out.deleted:
        out.texts.append(_text(repo.read_blob(pages[path])))
        out.files[path] = None
    return out


def plan_forget(repo: Repo, target: Target, key: bytes) -> Plan:
    """What ``target`` removes at HEAD, and its material (pure: writes nothing)."""
    head = repo.head()
    if head is None:
        raise NotFoundError("the repository has no commits yet", hint="there is nothing to forget in an empty repository")
    entries = [e for e in ledger_at(repo, head) if e.path]
    pages = _page_files(repo, head)
    chosen = _select(repo, head, entries, pages, target)
    files, texts = chosen.files, chosen.texts
    forgotten = {e.id for e in chosen.items}
    unlinked = _link_pattern([p.removesuffix(".md") for p in chosen.deleted])
    edited: list[str] = []
    for path, oid in sorted(pages.items()):
        if path in files:
            continue
        old = _text(repo.read_blob(oid))
        new = drop_claims(old, forgotten, target.match, chosen.lines)
        if unlinked is not None:  # an index's entry for a deleted page, a line linking to it
            new = "\n".join(line for line in new.split("\n") if not unlinked.search(line))
        if new != old:
            edited.append(path)
            files[path] = new.encode("utf-8")
            if not target.match:  # with --match only the text itself is the material
                texts.extend(sorted(set(old.split("\n")) - set(new.split("\n"))))
    if not files:
        raise NotFoundError("nothing to forget: no evidence or page holds it", hint="check the id or the text")
    # What stays says it too, so it is not the forgotten material: a date or a template phrase a
    # user's items share with others, a run of words another sentence shares with --match's text.
    kept = {e.path for e in entries} | set(pages)
    retained = [_text(files[p]) if p in files else _text(repo.read_at(head, p)) for p in sorted(kept) if files.get(p, b"") is not None]
    prints = fingerprint(key, texts, retained)
    if target.match:  # the whole text is always material, even when what stays shares every window of it
        prints = prints.with_whole(normalise(target.match))
    renames = {e.id: "ev-" + secrets.token_hex(8) for e in chosen.items}
    hashes = {e.id: hashlib.sha256(files[e.path] or b"").hexdigest() for e in entries if e.id in chosen.redacted}
    op = "fg-" + secrets.token_hex(8)
    return Plan(
        op,
        target.kind,
        str(head.id),
        renames,
        chosen.redacted,
        chosen.deleted,
        edited,
        chosen.scopes,
        prints,
        hashes,
        files,
        texts,
        target_digest(key, target),
        _has_index(repo),
    )


def _link_pattern(page_ids: list[str]) -> re.Pattern[str] | None:
    """A wikilink to one of ``page_ids`` (``[[id]]``, ``[[id#section]]``, ``[[id|label]]``)."""
    if not page_ids:
        return None
    return re.compile(r"\[\[(?:" + "|".join(map(re.escape, sorted(page_ids))) + r")(?:\.md)?(?:[#|][^\]]*)?\]\]")


def _has_index(repo: Repo) -> bool:
    from kb.retrieval.store import index_store

    return index_store(repo).current() is not None


# ---- records ----------------------------------------------------------------------------------


def _pending_path(repo: Repo, op: str) -> Path:
    return forget_dir(repo) / f"{op}.json"


def target_digest(key: bytes, target: Target) -> str:
    """The target as a keyed digest: a record names what it forgot without saying it."""
    expired = ",".join(sorted(target.expired) + sorted(target.expired_pages))
    value = f"{target.kind}\0{target.user or target.evidence or normalise(target.match or '') or expired}"
    return hashlib.blake2b(value.encode("utf-8"), key=key, digest_size=16).hexdigest()


def _write_pending(repo: Repo, plan: Plan, step: str) -> None:
    data = plan.summary() | {
        "step": step,
        "scopes": plan.scopes,
        "renames": plan.items,
        "fingerprints": plan.fingerprints.to_json(),
        "target": plan.target,
        "removed": sorted(p for p, d in plan.files.items() if d is None),
        "redacted_hashes": plan.redacted_hashes,
        "indexed": plan.indexed,
    }
    atomic_write(_pending_path(repo, plan.op), (json.dumps(data, sort_keys=True, indent=1) + "\n").encode("utf-8"))


def revoke(repo: Repo, plan: Plan) -> None:
    """Step 2: hide everything the plan forgets from every read, at once. The pending record is
    written first, so that a process killed in between leaves a forgetting a re-run resumes."""
    if not _pending_path(repo, plan.op).exists():
        _write_pending(repo, plan, "planned")
    entries = read_entries(repo)
    entries[plan.op] = {
        "scopes": plan.scopes,
        "evidence": sorted(set(plan.items) | set(plan.redacted)),
        "paths": sorted(set(plan.deleted_pages) | set(plan.edited_pages)),
        "text": plan.fingerprints.to_json(),
    }
    write_entries(repo, entries)
    _write_pending(repo, plan, "revoked")


# ---- step 3: the change on HEAD --------------------------------------------------------------


def new_ledger(entries: list[LedgerEntry], plan: Plan, record: LedgerEntry | None) -> list[LedgerEntry]:
    """``entries`` with tombstones for forgotten items, new hashes for redacted ones, chained again."""
    out = []
    for e in entries:
        if e.id in plan.items:
            out.append(tombstone(e, plan.items[e.id]))
        elif e.id in plan.redacted_hashes:
            out.append(LedgerEntry(**(e.payload() | {"sha256": plan.redacted_hashes[e.id]})))
        else:
            out.append(e)
    return rechain(out + ([record] if record else []))


def apply_head_change(repo: Repo, plan: Plan, now: Callable[[], str] = iso_utc) -> str:
    """Step 3: commit the removal on the current branch once the deterministic checks pass."""
    with repo.write_lock():
        head = repo.head()
        assert head is not None
        entries = ledger_at(repo, head)
        if any(e.kind == "forget" and e.id == plan.op for e in entries):
            return str(head.id)  # done before (a resumed run)
        if str(head.id) != plan.base:
            raise ConflictError("the branch moved since the forgetting was planned", hint="run `kb forget` again")
        meta = {
            "evidence": len(plan.items),
            "redacted": len(plan.redacted),
            "pages_deleted": len(plan.deleted_pages),
            "pages_edited": len(plan.edited_pages),
            "target": plan.kind,
        }
        record = forget_record(0, plan.op, now(), meta)
        ledger = new_ledger(entries, plan, record)
        originals = {p: (repo.root / p).read_bytes() if (repo.root / p).is_file() else None for p in [*plan.files, LEDGER_PATH]}
        try:
            for path, data in plan.files.items():
                if data is None:
                    (repo.root / path).unlink(missing_ok=True)
                    _remove_empty_parents(repo.root, repo.root / path)
                else:
                    atomic_write(repo.root / path, data)
            atomic_write(repo.root / LEDGER_PATH, "".join(e.to_line() for e in ledger).encode("utf-8"))
            report = _check_change(repo, head)
            if not report.ok:
                first = report.errors[0]
                raise GateError(
                    f"the forgetting change fails the checks: {first.path}:{first.line}: {first.message}",
                    hint="fix the page by hand (the material stays hidden meanwhile), then run the same `kb forget` again",
                )
            commit = repo.commit_worktree_paths(sorted([*plan.files, LEDGER_PATH]), f"forget: {plan.op}\n\nKb-Forget: {plan.op}\n")
        except BaseException:
            for path, data in originals.items():
                if data is None:
                    (repo.root / path).unlink(missing_ok=True)
                else:
                    atomic_write(repo.root / path, data)
            raise
    _write_pending(repo, plan, "committed")
    return str(commit)


def _check_change(repo: Repo, head: pygit2.Commit) -> CheckReport:
    """The deterministic checks over what the forgetting changes: its pages, the indexes of their
    folders, the pages naming a deleted page, and the whole ledger (its chain; no append-only
    comparison with HEAD, since removing evidence is the point). A deletion is not held up by an
    unrelated page elsewhere, and a full check of 10,000 pages took minutes of the forgetting."""
    from ci.run import check_selection
    from ci.selection import plan_changed
    from ci.snapshot import Snapshot

    snapshot = Snapshot.load(repo.root, repo.config)
    selection = plan_changed(snapshot, repo.changed_since(head), head)
    # a folder deleted whole (a user's) has no index to check
    folders = tuple(f for f in selection.folders if (repo.root / f).is_dir())
    selection = dataclasses.replace(selection, folders=folders, base=None)
    return check_selection(repo, snapshot, selection)


def _remove_empty_parents(root: Path, path: Path) -> None:
    folder = path.parent
    while folder != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


# ---- step 4: history ------------------------------------------------------------------------


class _Rewriter:
    """Rewrites trees, blobs and messages of every commit (memoised by object id)."""

    def __init__(self, repo: Repo, plan: Plan) -> None:
        self.repo, self.git, self.plan = repo, repo.git, plan
        self.blobs: dict[pygit2.Oid, pygit2.Oid | None] = {}
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

    def blob(self, oid: pygit2.Oid, path: str) -> pygit2.Oid | None:
        key = oid
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
            new = self.scrub(text)
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
            if entry.type_str == "tree":
                new = self.tree(entry.id, path + "/")
            elif self.dropped(path):
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
            if mapping.get(old, old) != old:
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
    _write_pending(repo, plan, "rewritten")
    return {str(k): str(v) for k, v in mapping.items() if k != v}


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
            _file_has(p, rewriter.plan.fingerprints) for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts
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


# ---- step 5: derived state -------------------------------------------------------------------


def _file_has(path: Path, prints: Fingerprints) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return any(prints.found_in(text) for text in _texts_of(data))


def _texts_of(data: bytes) -> Iterator[str]:
    """The text a file holds as stored, and inside JSON strings (escaped non-ASCII text)."""
    text = data.decode("utf-8", "replace")
    yield text
    if "\\u" in text:
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            yield json.dumps(value, ensure_ascii=False)


def _state_files(repo: Repo) -> Iterator[Path]:
    for path in sorted((repo.root / STATE_DIR).rglob("*")):
        if path.is_file() and FORGOTTEN_DIR not in path.relative_to(repo.root / STATE_DIR).parts[:1]:
            yield path


def purge_derived(repo: Repo, plan: Plan) -> list[str]:
    """Step 5: every index version and point-in-time index removed and the serving index
    rebuilt from the new HEAD (a text index keeps deleted terms on disk, so only a rebuild
    purges it); every other file under .kb/ holding the material deleted. Returns those files."""
    from kb.retrieval.build import build_index
    from kb.retrieval.store import index_store

    store = index_store(repo)
    had_index = plan.indexed or store.current() is not None
    with repo.lock("index"):
        shutil.rmtree(store.root, ignore_errors=True)
    if had_index:
        build_index(repo)
    removed = []
    for path in _state_files(repo):
        if path.suffix != ".lock" and _file_has(path, plan.fingerprints):
            path.unlink(missing_ok=True)
            removed.append(path.relative_to(repo.root).as_posix())
    _write_pending(repo, plan, "purged")
    return removed


# ---- step 6: verification ---------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyReport:
    objects: int
    files: int
    copies: tuple[str, ...]  # where material was found: object ids and .kb/ paths

    @property
    def clean(self) -> bool:
        return not self.copies


def scan(repo: Repo, prints: Fingerprints) -> VerifyReport:
    """Every git object (reachable or not, loose or packed) and every file under .kb/ (but the
    forgetting's own records, which hold fingerprints only)."""
    copies: list[str] = []
    objects = 0
    proc = subprocess.run(["git", "-C", str(repo.root), "cat-file", "--batch-all-objects", "--batch"], check=True, capture_output=True)
    data = proc.stdout
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        oid, kind, size = data[pos:end].decode().split(" ")
        body = data[end + 1 : end + 1 + int(size)]
        pos = end + 1 + int(size) + 1
        objects += 1
        if kind != "tree" and any(prints.found_in(text) for text in _texts_of(body)):
            copies.append(f"{kind} {oid}")
    files = 0
    for path in _state_files(repo):
        files += 1
        if _file_has(path, prints):
            copies.append(path.relative_to(repo.root).as_posix())
    for path in (repo.root / p for p in repo.dirty_paths()):
        if path.is_file() and _file_has(path, prints):
            copies.append(path.relative_to(repo.root).as_posix())
    return VerifyReport(objects, files, tuple(copies))


def complete(repo: Repo, plan: Plan, report: VerifyReport, now: Callable[[], str] = iso_utc) -> dict[str, Any]:
    """The completion record (when, what by fingerprint, what was scanned, the result); the deny
    entry is lifted only when the scan is clean."""
    record = plan.summary() | {
        "evidence": sorted(plan.items.values()),  # the tombstones' ids, never the old ones
        "completed_at": now() if report.clean else None,
        "scanned": {"git_objects": report.objects, "state_files": report.files},
        "copies": list(report.copies),
        "result": "clean" if report.clean else "copies-remain",
        "fingerprints": plan.fingerprints.to_json(),
        "step": "done" if report.clean else "purged",
        "scopes": plan.scopes,
        "renames": plan.items if not report.clean else {},
        "target": plan.target,
        "removed": sorted(p for p, d in plan.files.items() if d is None) if not report.clean else [],
        "redacted_hashes": plan.redacted_hashes if not report.clean else {},
    }
    atomic_write(_pending_path(repo, plan.op), (json.dumps(record, sort_keys=True, indent=1) + "\n").encode("utf-8"))
    if report.clean:
        entries = read_entries(repo)
        entries.pop(plan.op, None)
        write_entries(repo, entries)
    return record


# ---- the whole ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForgetResult:
    plan: dict[str, Any]
    dry_run: bool
    record: dict[str, Any] | None = None
    commit: str | None = None
    rewritten: int = 0
    purged: tuple[str, ...] = ()


def forget(repo: Repo, target: Target, dry_run: bool = False) -> ForgetResult:
    """Plan, revoke, change HEAD, rewrite history, purge, verify (module docstring)."""
    if sum(x is not None for x in (target.user, target.evidence, target.match)) + bool(target.expired or target.expired_pages) != 1:
        raise UsageError("give exactly one of --user, an evidence id, or --match", hint="e.g. `kb forget --user alice --dry-run`")
    key = load_key(repo, create=not dry_run) or b"\0" * 32
    record = None if dry_run else _unfinished(repo, target_digest(key, target))
    if record is not None:
        return _resume(repo, target, key, record)
    dirty = [p for p in repo.dirty_paths() if not p.startswith(STATE_DIR + "/")]
    if dirty and not dry_run:
        raise ConflictError(f"the working tree has uncommitted changes ({dirty[0]})", hint="commit or discard them first")
    try:
        plan = plan_forget(repo, target, key)
    except NotFoundError:
        done = None if dry_run else _done(repo, target_digest(key, target))
        if done is None:
            raise
        return _resume(repo, target, key, done)  # forgotten before: verified again
    if dry_run:
        return ForgetResult(plan.summary(), True)
    revoke(repo, plan)
    return _finish(repo, plan, apply_head_change(repo, plan))


def _finish(repo: Repo, plan: Plan, commit: str) -> ForgetResult:
    mapping = rewrite_history(repo, plan)
    purged = purge_derived(repo, plan)
    report = scan(repo, plan.fingerprints)
    record = complete(repo, plan, report)
    return ForgetResult(plan.summary(), False, record, mapping.get(commit, commit), len(mapping), tuple(purged))


def _unfinished(repo: Repo, target: str) -> dict[str, Any] | None:
    """The newest record of a forgetting of the same target that a killed run left unfinished
    (or finished without lifting its deny entry); None when there is none."""
    folder = forget_dir(repo)
    denied = read_entries(repo)
    found = []
    for path in folder.glob("fg-*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("target") == target and (data.get("step") != "done" or data.get("id") in denied):
            found.append((path.stat().st_mtime, data))
    return max(found, key=lambda pair: pair[0])[1] if found else None


def _done(repo: Repo, target: str) -> dict[str, Any] | None:
    """The newest completed forgetting of the same target (a re-run after it verifies again)."""
    found = []
    for path in forget_dir(repo).glob("fg-*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("target") == target and data.get("step") == "done":
            found.append((path.stat().st_mtime, data))
    return max(found, key=lambda pair: pair[0])[1] if found else None


def _committed(repo: Repo, op: str) -> bool:
    head = repo.head()
    return head is not None and any(e.kind == "forget" and e.id == op for e in ledger_at(repo, head))


def _reset_hard(repo: Repo) -> None:
    """The worktree and git's index back to HEAD: a killed run may have left files half-changed,
    or git's index lock behind (no process holds it: we hold the repository's write lock)."""
    with repo.write_lock():
        Path(repo.git.path, "index.lock").unlink(missing_ok=True)
        proc = subprocess.run(["git", "-C", str(repo.root), "reset", "--hard", "--quiet", "HEAD"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConflictError(
            f"could not restore the working tree: {proc.stderr.strip()}", hint="run `git reset --hard`, then `kb forget` again"
        )


def _resume(repo: Repo, target: Target, key: bytes, data: dict[str, Any]) -> ForgetResult:
    """Carry an interrupted forgetting through from the step it reached (the deny entry is
    written again first, so nothing shows meanwhile). Before its commit, the change is planned
    again from HEAD (the same material, so the same fingerprints) under the same id; after it,
    the plan comes from the record, and history rewriting, purging and verification run again
    (each is idempotent). Files a killed run left half-written are restored from HEAD first."""
    plan = Plan(
        data["id"],
        data["kind"],
        data["base"],
        dict(data.get("renames", {})),
        list(data.get("redacted", [])),
        list(data.get("deleted_pages", [])),
        list(data.get("edited_pages", [])),
        list(data.get("scopes", [])),
        fingerprints_from_json(key, data.get("fingerprints", {})),
        dict(data.get("redacted_hashes", {})),
        {p: None for p in data.get("removed", [])},
        [],
        data["target"],
        bool(data.get("indexed")),
    )
    if data.get("step") == "done":  # killed between the completion record and lifting the deny entry
        report = scan(repo, plan.fingerprints)
        return ForgetResult(plan.summary(), False, complete(repo, plan, report, now=lambda: str(data.get("completed_at"))))
    revoke(repo, plan)
    head = repo.head()
    assert head is not None
    if not _committed(repo, plan.op):
        if str(head.id) != plan.base:
            raise ConflictError("the branch moved since the forgetting was planned", hint="reset the branch, then run `kb forget` again")
        _reset_hard(repo)  # undo a half-applied change
        fresh = plan_forget(repo, target, key)
        fresh.op, fresh.items = plan.op, plan.items
        return _finish(repo, fresh, apply_head_change(repo, fresh))
    _reset_hard(repo)  # a rewrite killed before it checked out the new HEAD
    for ident in plan.redacted:  # a redacted item: HEAD holds its redaction, every commit gets the same
        entry = find_entry(ledger_at(repo, head), ident)
        plan.files[entry.path] = repo.read_at(head, entry.path)
    return _finish(repo, plan, str(head.id))


def verify_all(repo: Repo) -> list[dict[str, Any]]:
    """`kb forget --verify`: scan again for every forgetting this repository recorded."""
    key = load_key(repo)
    folder = repo.root / STATE_DIR / FORGOTTEN_DIR
    records = sorted(folder.glob("fg-*.json")) if folder.is_dir() else []
    if key is None or not records:
        raise NotFoundError("no forgetting is recorded in this repository", hint="run `kb forget` first")
    out = []
    for path in records:
        data = json.loads(path.read_text(encoding="utf-8"))
        report = scan(repo, fingerprints_from_json(key, data.get("fingerprints", {})))
        out.append(
            {
                "id": data["id"],
                "result": "clean" if report.clean else "copies-remain",
                "copies": list(report.copies),
                "git_objects": report.objects,
                "state_files": report.files,
            }
        )
    return out
