"""What a change may touch: the pages of its scope and the evidence it may add, nothing else.

A change proposed through kb (a work branch whose commits carry the proposer's ``Kb-Proposer-*``
trailers) writes pages under ``knowledge/`` or ``users/<id>/`` and nothing more: evidence is added
on main (and only appended), merge records are written by ``kb merge``, consolidation records by
``kb consolidate`` on main, and configuration, signers, workflows, ignore files and any path kb
does not own change only in a person's commit. Three findings say what a change did wrong:

- ``change.outside``: a path the change may not touch (``kb.config.yaml``, ``.github/**``,
  ``reviewers/**``, ``reviews/**``, a root file, ``.kb/**``, an edited evidence item, ...);
- ``change.scope``: a page (or an added evidence item) of a scope the change does not have: the
  scope roots of the evidence its trailers name (``Kb-Evidence``; for a consolidation batch also
  the batch's root in the cycle record at the base), the same on every commit that names them;
- ``change.entry``: an entry that is not a plain file: a symbolic link, a submodule, an
  executable file.

A change with no kb commit at all is a person's: what it changes outside the pages is reported
as a ``change.human`` warning, so that ``kb check --gate`` on a person's pull request says what a
person must look at without refusing it. Everything is judged from git trees (and, for ``kb
check`` on a working tree, the uncommitted files), never from a check report: ``kb merge`` runs
the same judgement on the base and head trees itself.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import pygit2

from ci.findings import Finding
from ci.rules.conservation import record_at_ref
from ci.selection import Selection
from ci.snapshot import LINK_MODE, Snapshot
from kb.config import CONFIG_FILE
from kb.errors import FormatError
from kb.evidence import EVIDENCE_DIR, LEDGER_PATH, LedgerEntry, parse_ledger
from kb.repo import Repo, diff_trees
from kb.scopes import KNOWLEDGE_DIR, USER_ID_RE, USERS_DIR, folder_for_scope
from kb.signing import SIGNERS_FILE

Status = Literal["added", "modified", "deleted"]

MODE_LINK = LINK_MODE
MODE_SUBMODULE = 0o160000
MODE_EXECUTABLE = 0o100755

# Why a path is not a change's to touch: the first matching prefix names it.
OUTSIDE_REASONS: tuple[tuple[str, str], ...] = (
    (CONFIG_FILE, "the configuration changes only in a person's commit on main"),
    (SIGNERS_FILE, "who may sign reviews changes only on main (`kb keygen`)"),
    ("reviewers/", "the reviewers' folder changes only on main"),
    ("reviews/", "merge records are written by `kb merge` itself"),
    (".github/", "workflows change only in a person's commit"),
    (".gitignore", "ignore files change only in a person's commit"),
    (".gitattributes", "git attributes change only in a person's commit"),
    (".gitmodules", "submodules are not part of a knowledge repository"),
    (".kb/", "derived state is never committed"),
    ("consolidation/", "consolidation records are committed by `kb consolidate` on main"),
    (EVIDENCE_DIR + "/", "evidence is append-only: items are added with `kb evidence add`, never edited"),
)
OUTSIDE_HINT = "drop the change from the branch; a person commits such a change on main"

# What judges a change and who may sign or run it: a pull request that edits these would change
# the rules it is judged by, so on a pull request (``kb check --gate --pull-request``, the
# ``kb/gate`` status) a person's edit of them is refused too (``change.governance``), not only a
# kb change's. Such a change reaches the default branch only past the rules, by the repository's
# administrators (docs/github.md, "Changing the rules").
GOVERNANCE = (CONFIG_FILE, SIGNERS_FILE, "reviewers/", ".github/")
GOVERNANCE_HINT = "a pull request may not change the rules that judge it: an administrator merges it past the rules (docs/github.md)"


@dataclass(frozen=True)
class Touched:
    """One path a change touched, with the mode of its new entry (None when deleted)."""

    path: str
    status: Status
    mode: int | None


@dataclass(frozen=True)
class ChangeScope:
    kb_change: bool  # some commit of the change carries the proposer's trailers
    roots: frozenset[str]  # the scope roots it may write: "knowledge/", "users/<id>/"


def touched_between(old: pygit2.Tree, new: pygit2.Tree) -> list[Touched]:
    """Every path that differs between two trees, submodules and links included."""
    out: dict[str, Touched] = {}
    for delta in diff_trees(old, new).deltas:
        if delta.status == pygit2.enums.DeltaStatus.DELETED:
            out.setdefault(delta.old_file.path, Touched(delta.old_file.path, "deleted", None))
            continue
        if delta.old_file.path != delta.new_file.path:
            out.setdefault(delta.old_file.path, Touched(delta.old_file.path, "deleted", None))
        status: Status = "added" if delta.status == pygit2.enums.DeltaStatus.ADDED else "modified"
        out[delta.new_file.path] = Touched(delta.new_file.path, status, int(delta.new_file.mode))
    return [out[p] for p in sorted(out)]


def touched_in_worktree(view: Repo, base: pygit2.Commit) -> list[Touched]:
    """What the working tree of ``view`` changed since ``base``: its commits and uncommitted files."""
    head = view.head()
    committed = {t.path: t for t in touched_between(base.tree, head.tree)} if head is not None else {}
    for path in view.dirty_paths():
        if committed.get(path, Touched(path, "added", None)).mode == MODE_SUBMODULE:
            continue  # a submodule's folder is not checked out; its entry is what counts
        full = view.root / path
        try:
            info = os.lstat(full)
        except OSError:
            committed[path] = Touched(path, "deleted", None)
            continue
        if stat.S_ISLNK(info.st_mode):
            mode = MODE_LINK
        elif stat.S_ISDIR(info.st_mode):
            mode = MODE_SUBMODULE
        else:
            mode = MODE_EXECUTABLE if info.st_mode & 0o111 else 0o100644
        status: Status = "modified" if path in committed or _in_tree(base.tree, path) else "added"
        committed[path] = Touched(path, status, mode)
    return [committed[p] for p in sorted(committed)]


def _in_tree(tree: pygit2.Tree, path: str) -> bool:
    try:
        tree[path]
    except KeyError:
        return False
    return True


def _trailers(message: str) -> dict[str, str]:
    paragraphs = message.strip().split("\n\n")
    out: dict[str, str] = {}
    for line in paragraphs[-1].splitlines() if paragraphs else []:
        key, sep, value = line.strip().partition(": ")
        if sep and key.startswith("Kb-") and " " not in key:
            out[key] = value.strip()
    return out


def _ledger(repo: Repo, commit: pygit2.Commit | None) -> list[LedgerEntry]:
    data = repo.read_at(commit, LEDGER_PATH) if commit is not None else None
    if data is None:
        return []
    try:
        return parse_ledger(data.decode("utf-8"))
    except (FormatError, UnicodeDecodeError):
        return []  # the evidence rules report a broken ledger


def _scope_root(scope: str) -> str | None:
    if scope == "system" or scope.startswith("user:"):
        root = folder_for_scope(scope)
        return root if root != KNOWLEDGE_DIR or scope == "system" else None
    return None


def _batch_root(repo: Repo, base: pygit2.Commit, cycle: str, job: str) -> str | None:
    """A consolidation batch's scope root, from the cycle record at the base (written on main
    without a forge) or on ``refs/kb/consolidation`` (where it is kept through a forge)."""
    path = f"consolidation/cycles/{cycle}.json"
    data = (record_at_ref(repo, path) or repo.read_at(base, path)) if cycle and "/" not in cycle else None
    try:
        record = json.loads(data) if data is not None else None
    except ValueError:
        return None
    batches = record.get("batches") if isinstance(record, dict) else None
    for batch in batches if isinstance(batches, list) else []:
        if isinstance(batch, dict) and batch.get("id") == job:
            folder = str(batch.get("root") or batch.get("folder") or "")
            return page_root(folder.rstrip("/") + "/x.md")
    return None


def change_scope(repo: Repo, base: pygit2.Commit, head: pygit2.Commit | None) -> ChangeScope:
    """Whether ``base..head`` is a kb change and which scope roots it may write."""
    if head is None:
        return ChangeScope(False, frozenset())
    scopes = {e.id: e.scope for e in _ledger(repo, base) + _ledger(repo, head)}
    roots: set[str] | None = None
    for commit in repo.git.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL):
        if commit.id == base.id:
            break
        trailers = _trailers(commit.message)
        if "Kb-Proposer-Family" not in trailers:
            continue
        mine = {r for e in trailers.get("Kb-Evidence", "").split(",") if (r := _scope_root(scopes.get(e.strip(), "")))}
        if "Kb-Consolidation" in trailers:
            batch = _batch_root(repo, base, trailers["Kb-Consolidation"], trailers.get("Kb-Job", ""))
            mine |= {batch} if batch else set()
        roots = mine if roots is None else roots & mine  # a later commit cannot widen the scope
    return ChangeScope(roots is not None, frozenset(roots or ()))


def page_root(path: str) -> str | None:
    """The scope root of a page path kb owns (``knowledge/`` or ``users/<id>/``), else None."""
    parts = path.split("/")
    if not path.endswith(".md") or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        return None
    if parts[0] == KNOWLEDGE_DIR.rstrip("/") and len(parts) >= 2:
        return KNOWLEDGE_DIR
    if parts[0] == USERS_DIR.rstrip("/") and len(parts) >= 3 and USER_ID_RE.match(parts[1]):
        return f"{USERS_DIR}{parts[1]}/"
    return None


def entry_finding(path: str, mode: int) -> Finding | None:
    """A finding for an entry that is not a plain file (the same for a tree and a working tree)."""
    kinds = {MODE_LINK: "a symbolic link", MODE_SUBMODULE: "a submodule (or a folder where a file was)", MODE_EXECUTABLE: "executable"}
    kind = kinds.get(mode)
    if kind is None:
        return None
    return Finding(
        path, 1, "change.entry", f"{path} is {kind}; a change holds plain files only", hint="commit it as a plain, non-executable file"
    )


def _outside(path: str, human: bool) -> Finding:
    reason = next((why for prefix, why in OUTSIDE_REASONS if path == prefix or path.startswith(prefix)), "kb does not own this path")
    if human:
        return Finding(path, 1, "change.human", f"a person's commit changes {path} ({reason})", "warning", "check that it was meant")
    return Finding(path, 1, "change.outside", f"a kb change may not touch {path}: {reason}", hint=OUTSIDE_HINT)


def _evidence_finding(t: Touched, base_ledger: bytes | None, head_ledger: bytes | None, added: dict[str, LedgerEntry]) -> Finding | None:
    """None when ``t`` is evidence the change may add: an item the new ledger records, or the
    ledger itself with only lines appended; a finding otherwise."""
    if t.path == LEDGER_PATH and t.status != "deleted" and head_ledger is not None and head_ledger.startswith(base_ledger or b""):
        return None
    if t.status == "added" and t.path in added:
        return None
    return _outside(t.path, human=False)


def judge(
    touched: Iterable[Touched], scope: ChangeScope, base_ledger: bytes | None = None, head_ledger: bytes | None = None
) -> list[Finding]:
    """Every finding of a change that touched ``touched`` with ``scope`` (pure)."""
    added: dict[str, LedgerEntry] = {}
    if head_ledger is not None and head_ledger.startswith(base_ledger or b""):
        try:
            added = {e.path: e for e in parse_ledger(head_ledger[len(base_ledger or b"") :].decode("utf-8"))}
        except (FormatError, UnicodeDecodeError):
            added = {}
    findings: list[Finding] = []
    for t in touched:
        entry = entry_finding(t.path, t.mode) if t.mode is not None else None
        if entry is not None:
            findings.append(entry)
            continue
        root = page_root(t.path)
        if root is not None:
            if scope.kb_change and root not in scope.roots:
                findings.append(_scope_finding(t.path, root, scope))
            continue
        if t.path == LEDGER_PATH or t.path.startswith(EVIDENCE_DIR + "/"):
            if not scope.kb_change:
                continue  # a person's evidence change: the evidence rules judge it (append-only)
            finding = _evidence_finding(t, base_ledger, head_ledger, added)
            if finding is None and t.path in added:
                root = _scope_root(added[t.path].scope)
                if root not in scope.roots:
                    finding = _scope_finding(t.path, root or "?", scope)
            if finding is not None:
                findings.append(finding)
            continue
        findings.append(_outside(t.path, human=not scope.kb_change))
    return findings


def _scope_finding(path: str, root: str, scope: ChangeScope) -> Finding:
    mine = ", ".join(sorted(scope.roots)) or "no folder (its trailers name no evidence)"
    return Finding(
        path,
        1,
        "change.scope",
        f"{path} is in {root}, outside the change's scope ({mine}: the folders of the evidence it names)",
        hint="propose changes to another scope from that scope's own evidence",
    )


def check_trees(repo: Repo, base: pygit2.Commit, head: pygit2.Commit, assume_kb: bool = False) -> list[Finding]:
    """The judgement of ``base..head`` from the two trees alone (what ``kb merge`` runs)."""
    scope = change_scope(repo, base, head)
    if assume_kb:
        scope = ChangeScope(True, scope.roots)
    return judge(touched_between(base.tree, head.tree), scope, repo.read_at(base, LEDGER_PATH), repo.read_at(head, LEDGER_PATH))


def check_change(view: Repo, base: pygit2.Commit) -> list[Finding]:
    """The judgement of what the working tree of ``view`` changed since ``base`` (the gate's)."""
    ledger_file = view.root / LEDGER_PATH
    head_ledger = ledger_file.read_bytes() if ledger_file.is_file() and not ledger_file.is_symlink() else None
    scope = change_scope(view, base, view.head())
    return judge(touched_in_worktree(view, base), scope, view.read_at(base, LEDGER_PATH), head_ledger)


def is_governance(path: str) -> bool:
    return any(path == prefix or (prefix.endswith("/") and path.startswith(prefix)) for prefix in GOVERNANCE)


def refuse_governance(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` of a change that arrives as a pull request: a person's edit of a governance path
    (``change.human``, a warning on main) becomes the error ``change.governance``."""
    out = []
    for f in findings:
        if f.rule == "change.human" and is_governance(f.path):
            f = Finding(
                f.path,
                1,
                "change.governance",
                f"a pull request may not change {f.path}: it is part of what judges the change",
                hint=GOVERNANCE_HINT,
            )
        out.append(f)
    return out


def check(snapshot: Snapshot, selection: Selection) -> list[Finding]:  # noqa: ARG001
    """Entries under the page folders that are not plain files (``kb check`` on any tree)."""
    return [f for path, mode in snapshot.odd_entries.items() if (f := entry_finding(path, mode)) is not None]
