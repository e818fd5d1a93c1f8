"""The cycle's plan and coverage record, committed on main under ``consolidation/``.

``consolidation/cycles/<id>.json`` holds one cycle: its base, scope, batches (each with its
state, branch and commit), every page and claim in scope with what the cycle did to it and the
commit that did it, the spans it retired with their reason, and what its jobs found.
``consolidation/current.json`` names the latest cycle. The record is bookkeeping, not knowledge:
the cycle commits it itself (holding the write lock), after each batch, so a killed run resumes
from the last batch it recorded.

Where: on main in a repository without a forge. Through a forge (``kb consolidate`` opening pull
requests) main changes only by merged pull requests, so the record goes to a ref of its own,
``refs/kb/consolidation`` (``RECORD_REF``, a line of commits holding only ``consolidation/``'s
record files, pushed by the consolidation route): once that ref exists, the record is read from
it and committed on it, never on main. The gate reads it there too (``ci.rules.scope``,
``ci.rules.conservation``).

The record's types are closed (pydantic models, enums for states and actions): a record reads
back as written, byte for byte, and one that is not of this shape is a ``FormatError``. Keys
that a record carries only once they have a value (``reason``, ``rounds``, ``withdrawn`` ...)
are ``None`` in the models and absent from the file while they are.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, ClassVar

import pygit2
from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, ValidationError, model_serializer

from ci.rules.conservation import RECORD_REF as RECORD_REF
from kb.errors import FormatError
from kb.repo import Repo
from pipeline.consolidate.view import root_of

RECORD_DIR = "consolidation"
CURRENT = f"{RECORD_DIR}/current.json"
REPLAY_FILE = f"{RECORD_DIR}/replay.yaml"

# The one name of "waiting for a person": a batch's state, and the status note on its branch's tip
# (``pipeline.records.set_status``), as ``kb run`` names a branch that did not converge.
NEEDS_HUMAN = "needs-human"

# The reason of a page or claim kept because its batch never merged (a person declined the
# branch): nothing on main checked it in this cycle, so coverage does not count it.
UNCHECKED = "not re-checked"


class Action(StrEnum):
    """What the cycle did to a page or claim, in rank order: an action only moves up (``outranks``)."""

    PENDING = "pending"
    VERIFIED = "verified"
    KEPT = "kept"
    CHANGED = "changed"
    QUALIFIED = "qualified"
    DISPUTED = "disputed"
    MERGED = "merged"
    RETIRED = "retired"

    def outranks(self, other: Action) -> bool:
        """At least as strong as ``other`` (a claim merged away is not later merely verified)."""
        order = list(Action)
        return order.index(self) >= order.index(other)


class BatchState(StrEnum):
    PENDING = "pending"
    DONE = "done"
    DECLINED = "declined"  # a person closed or deleted its branch: never reopened
    NEEDS_HUMAN = NEEDS_HUMAN


FINISHED = frozenset({BatchState.DONE, BatchState.DECLINED})


class BatchKind(StrEnum):
    PAGES = "pages"  # a folder's pages, up to batch_pages: the per-page jobs
    DUPLICATES = "duplicates"  # a scope root: dedupe and tiny pages
    CONFLICTS = "conflicts"  # a scope root: contradicting facts


class CycleStatus(StrEnum):
    OPEN = "open"
    COMPLETE = "complete"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    WHEN_SET: ClassVar[frozenset[str]] = frozenset()  # keys written only when not None

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if not (v is None and k in self.WHEN_SET)}


class FoundRecord(_Record):
    """One thing a batch found (a job's ``Found``, a review comment, why it was declined)."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"job"})
    job: str | None = None  # the job that found it; None for a review comment or a decline
    kind: str
    path: str
    detail: str
    fixed: bool


class Withdrawal(_Record):
    """A page whose change the Reviewer refused: the comment's kind and message."""

    kind: str
    reason: str


class Batch(_Record):
    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"folder", "root", "skipped", "rounds", "withdrawn"})
    id: str
    kind: BatchKind
    folder: str | None = None  # pages batches
    root: str | None = None  # duplicates and conflicts batches
    pages: list[str]
    state: BatchState = BatchState.PENDING
    branch: str | None = None
    commit: str | None = None
    found: list[FoundRecord] = []
    skipped: list[str] | None = None
    rounds: int | None = None
    withdrawn: dict[str, Withdrawal] | None = None

    @property
    def scope_root(self) -> str:
        """The scope root the batch writes in: ``knowledge`` or ``users/<id>``."""
        return self.root if self.root is not None else root_of(f"{self.folder}/x")


class Entry(_Record):
    """A page or claim in scope: what the cycle did to it, the commit that did it, why."""

    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"reason", "cites"})
    action: Action = Action.PENDING
    commit: str | None = None
    reason: str | None = None
    cites: str | None = None  # claims: the span their citation names

    def set_action(self, action: Action, commit: str, reason: str = "") -> None:
        """Record ``action`` unless the entry has a stronger one already."""
        if action.outranks(self.action) or self.action is Action.PENDING:
            self.action = action
            self.commit = commit
            if reason:
                self.reason = reason


class Retired(_Record):
    span: str
    reason: str
    batch: str


class UncitedItem(_Record):
    """One evidence item's lines that state a fact no page cites (``pipeline.consolidate.uncited``)."""

    evidence: str
    fact_lines: int  # its lines with a name, a number or a date
    lines: int  # of those, the ones no citation span covers
    examples: list[str]  # the first few: "L12: Porto, 2023"


class Uncited(_Record):
    """The evidence of a cycle's scope that no page cites, when the cycle completed."""

    items: int  # evidence items read
    with_uncited: int  # items with at least one uncited fact line
    fact_lines: int
    lines: int
    listed: list[UncitedItem]  # the items with the most uncited lines, most first


class Cycle(_Record):
    WHEN_SET: ClassVar[frozenset[str]] = frozenset({"content", "uncited"})
    cycle: str
    base: str
    scope: str
    started_at: str
    finished_at: str | None = None
    status: CycleStatus = CycleStatus.OPEN
    evidence_count: int
    batch_pages: int
    batches: list[Batch]
    pages: dict[str, Entry]
    claims: dict[str, Entry]
    retired: list[Retired] = []
    replay: float | None = None
    content: str | None = None  # a hash of the tree it completed on (but the record): see status.content_digest
    uncited: Uncited | None = None  # evidence no page cites, when it completed

    def entries_of(self, path: str) -> list[Entry]:
        """The page's entry and its claims' entries."""
        page = self.pages.get(path)
        return ([page] if page is not None else []) + [e for k, e in self.claims.items() if k.rsplit("#", 1)[0] == path]

    def dumps(self) -> str:
        """The record file's text (sorted keys, one-space indent: diffs stay small)."""
        return json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def loads(cls, data: bytes | str, where: str) -> Cycle:
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            at = ".".join(str(p) for p in first["loc"])
            raise FormatError(
                f"{where} is not a consolidation record: {at}: {first['msg']}",
                hint="restore it from git history (`git log -- consolidation/`); kb writes it, it is not edited by hand",
            ) from None


def cycle_path(cycle_id: str) -> str:
    return f"{RECORD_DIR}/cycles/{cycle_id}.json"


def _json_at(repo: Repo, commit: pygit2.Commit | None, path: str) -> Any:
    data = repo.read_at(commit, path) if commit is not None else None
    return None if data is None else json.loads(data)


def record_tip(repo: Repo) -> pygit2.Commit | None:
    """The tip of ``refs/kb/consolidation`` when the record lives there (through a forge), else None."""
    ref = repo.git.references.get(RECORD_REF)
    return ref.peel(pygit2.Commit) if ref is not None else None


def start_record_ref(repo: Repo) -> None:
    """Create ``refs/kb/consolidation`` (when it does not exist) holding the record main has now:
    from then on the record is committed there, not on main."""
    if record_tip(repo) is not None:
        return
    head = repo.head()
    index = pygit2.Index()
    files = repo.tree_files(head, (f"{RECORD_DIR}/cycles/", CURRENT)) if head is not None else {}
    for path, oid in sorted(files.items()):
        index.add(pygit2.IndexEntry(path, oid, pygit2.enums.FileMode.BLOB))
    tree = index.write_tree(repo.git)
    sig = repo.signature()
    where = f" as main had it at {str(head.id)[:12]}" if head is not None else ""
    oid = repo.git.create_commit(None, sig, sig, f"Consolidation record{where}\n", tree, [])
    repo.git.references.create(RECORD_REF, oid)


def current_cycle(repo: Repo, commit: pygit2.Commit | None = None) -> Cycle | None:
    """The latest cycle: read from ``refs/kb/consolidation`` when it exists, else from ``commit``
    (main's head by default)."""
    commit = record_tip(repo) or (commit if commit is not None else repo.head())
    pointer = _json_at(repo, commit, CURRENT)
    if not isinstance(pointer, dict) or "cycle" not in pointer or commit is None:
        return None
    path = cycle_path(str(pointer["cycle"]))
    data = repo.read_at(commit, path)
    return None if data is None else Cycle.loads(data, path)


def all_cycles(repo: Repo, commit: pygit2.Commit | None = None) -> list[Cycle]:
    commit = record_tip(repo) or (commit if commit is not None else repo.head())
    if commit is None:
        return []
    files = repo.tree_files(commit, (f"{RECORD_DIR}/cycles/",))
    return [Cycle.loads(repo.read_blob(oid), path) for path, oid in sorted(files.items())]


def pointer_text(cycle: Cycle) -> str:
    """``consolidation/current.json``: the latest cycle and its status."""
    return json.dumps({"cycle": cycle.cycle, "status": cycle.status.value}, sort_keys=True) + "\n"


def commit_record(repo: Repo, cycle: Cycle, message: str) -> str:
    """Commit ``cycle`` (and the pointer to it) on main, or on ``refs/kb/consolidation`` when the
    record lives there; call it holding the write lock."""
    on_ref = record_tip(repo)
    head = on_ref or repo.head()
    assert head is not None
    changes = {cycle_path(cycle.cycle): cycle.dumps().encode(), CURRENT: pointer_text(cycle).encode()}
    if all(repo.read_at(head, p) == c for p, c in changes.items()):
        return str(head.id)
    index = pygit2.Index()
    index.read_tree(head.tree)
    for path, content in changes.items():
        index.add(pygit2.IndexEntry(path, repo.git.create_blob(content), pygit2.enums.FileMode.BLOB))
    tree = index.write_tree(repo.git)
    sig = repo.signature()
    text = f"{message}\n\nKb-Consolidation: {cycle.cycle}\n"
    oid = repo.git.create_commit(None, sig, sig, text, tree, [head.id])
    if on_ref is not None:
        repo.git.references.create(RECORD_REF, oid, force=True)
    else:
        repo.move_head(oid)
    return str(oid)


def coverage(cycle: Cycle) -> tuple[int, int]:
    """(checked, total) pages and claims of the cycle's scope: an entry counts once a batch that
    merged (or changed nothing) checked it; one still pending, or kept because its batch was
    declined, does not."""
    items = list(cycle.pages.values()) + list(cycle.claims.values())
    return sum(1 for i in items if checked(i.action, i.reason)), len(items)


def checked(action: Action, reason: str | None) -> bool:
    return action is not Action.PENDING and not (action is Action.KEPT and (reason or "").startswith(UNCHECKED))
