"""The cycle's plan and coverage record, committed on main under ``consolidation/``.

``consolidation/cycles/<id>.json`` holds one cycle: its base, scope, batches (each with its
state, branch and commit), every page and claim in scope with what the cycle did to it and the
commit that did it, the spans it retired with their reason, and what its jobs found.
``consolidation/current.json`` names the latest cycle. The record is bookkeeping, not knowledge:
the cycle commits it itself (holding the write lock), after each batch, so a killed run resumes
from the last batch it recorded.
"""

from __future__ import annotations

import json
from typing import Any

import pygit2

from kb.repo import Repo

RECORD_DIR = "consolidation"
CURRENT = f"{RECORD_DIR}/current.json"
REPLAY_FILE = f"{RECORD_DIR}/replay.yaml"

Cycle = dict[str, Any]


def cycle_path(cycle_id: str) -> str:
    return f"{RECORD_DIR}/cycles/{cycle_id}.json"


def _json_at(repo: Repo, commit: pygit2.Commit | None, path: str) -> Any:
    data = repo.read_at(commit, path) if commit is not None else None
    return None if data is None else json.loads(data)


def current_cycle(repo: Repo, commit: pygit2.Commit | None = None) -> Cycle | None:
    commit = commit if commit is not None else repo.head()
    pointer = _json_at(repo, commit, CURRENT)
    if not isinstance(pointer, dict) or "cycle" not in pointer:
        return None
    cycle = _json_at(repo, commit, cycle_path(str(pointer["cycle"])))
    return cycle if isinstance(cycle, dict) else None


def all_cycles(repo: Repo, commit: pygit2.Commit | None = None) -> list[Cycle]:
    commit = commit if commit is not None else repo.head()
    if commit is None:
        return []
    files = repo.tree_files(commit, (f"{RECORD_DIR}/cycles/",))
    return [json.loads(repo.read_blob(oid)) for _, oid in sorted(files.items())]


def commit_record(repo: Repo, cycle: Cycle, message: str) -> str:
    """Commit ``cycle`` (and the pointer to it) on main; call it holding the write lock."""
    head = repo.head()
    assert head is not None
    data = json.dumps(cycle, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    pointer = json.dumps({"cycle": cycle["cycle"], "status": cycle["status"]}, sort_keys=True) + "\n"
    changes = {cycle_path(cycle["cycle"]): data.encode(), CURRENT: pointer.encode()}
    if all(repo.read_at(head, p) == c for p, c in changes.items()):
        return str(head.id)
    index = pygit2.Index()
    index.read_tree(head.tree)
    for path, content in changes.items():
        index.add(pygit2.IndexEntry(path, repo.git.create_blob(content), pygit2.enums.FileMode.BLOB))
    tree = index.write_tree(repo.git)
    sig = repo.signature()
    text = f"{message}\n\nKb-Consolidation: {cycle['cycle']}\n"
    oid = repo.git.create_commit(None, sig, sig, text, tree, [head.id])
    repo.move_head(oid)
    return str(oid)


def coverage(cycle: Cycle) -> tuple[int, int]:
    """(covered, total) pages and claims of the cycle's scope."""
    items = list(cycle["pages"].values()) + list(cycle["claims"].values())
    return sum(1 for i in items if i["action"] != "pending"), len(items)
