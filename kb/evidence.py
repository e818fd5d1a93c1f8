"""The append-only evidence log: storing items and the hash-chained ledger, reading them back.

An item is stored once, under ``evidence/YYYY/MM/<id>.md``, in the form ``kb.intake`` made, whose
line numbers never change. ``evidence/ledger.jsonl`` records every item; each line carries the
hash of the line before it, so any edit or removal breaks the chain.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.citations import EVIDENCE_FILE_RE
from kb.clock import iso_utc
from kb.controls import clean_label, json_visible
from kb.errors import ConflictError, FormatError, NotFoundError, UsageError
from kb.forgotten import is_evidence_hidden
from kb.ids import sha256_hex
from kb.intake import PreparedItem, clean_meta
from kb.repo import Repo, atomic_write
from kb.scopes import user_scope

if TYPE_CHECKING:
    import pygit2

EVIDENCE_DIR = "evidence"
LEDGER_PATH = "evidence/ledger.jsonl"
GENESIS = "0" * 64


@dataclass(frozen=True)
class LedgerEntry:
    seq: int
    id: str
    sha256: str
    prev: str
    kind: str
    scope: str
    path: str
    added_at: str
    lines: int
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    hash: str = ""

    def payload(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "hash"}
        return data

    def compute_hash(self) -> str:
        return sha256_hex(json.dumps(self.payload(), sort_keys=True, ensure_ascii=False, separators=(",", ":")))

    @property
    def date(self) -> str:
        """The item's own date (YYYY-MM-DD): its session date, else its first message's time,
        else the day it was added to the log."""
        return str(self.meta.get("session_date") or self.meta.get("first_time") or self.added_at)[:10]

    def to_line(self) -> str:
        """The entry as one ledger line. The characters JSON leaves raw that some readers take
        for a line boundary (NEL, U+2028, U+2029) or that a terminal obeys are written as
        ``\\uXXXX`` escapes: the same value, and ``\\n`` the only line boundary in the file."""
        data = self.payload() | {"hash": self.hash}
        return json_visible(json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))) + "\n"


# ---- the ledger ------------------------------------------------------------------------

TOMBSTONE = "forgotten"  # kind and scope of an entry whose item was forgotten (``kb forget``)
FORGET_KIND = "forget"  # kind of the entry recording a forgetting


def tombstone(entry: LedgerEntry, new_id: str) -> LedgerEntry:
    """The entry of a forgotten item: its place in the chain and its date, nothing that could
    confirm a guess of its content (no content hash, no source, no user, a fresh random id)."""
    return LedgerEntry(entry.seq, new_id, "", entry.prev, TOMBSTONE, TOMBSTONE, "", entry.added_at, 0)


def forget_record(seq: int, ident: str, at: str, meta: dict[str, Any]) -> LedgerEntry:
    """The entry recording a forgetting: when, and how many items and pages, never what."""
    return LedgerEntry(seq, ident, "", "", FORGET_KIND, "system", "", at, 0, meta=meta)


def rechain(entries: list[LedgerEntry]) -> list[LedgerEntry]:
    """The entries renumbered and hash-chained again (after tombstones replaced some)."""
    out: list[LedgerEntry] = []
    prev = GENESIS
    for n, entry in enumerate(entries, 1):
        data = entry.payload() | {"seq": n, "prev": prev}
        data.pop("hash", None)
        fresh = LedgerEntry(**data)
        fresh = LedgerEntry(**(fresh.payload() | {"hash": fresh.compute_hash()}))
        out.append(fresh)
        prev = fresh.hash
    return out


def ledger_lines(text: str) -> list[str]:
    """The lines of a ledger: split at ``\\n`` only. A JSON string may hold U+2028 or NEL raw
    (``ensure_ascii=False``: earlier versions of kb wrote sources like that), so splitting at every
    line boundary ``str.splitlines`` knows would cut such an entry in two."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def parse_ledger(text: str, source: str = LEDGER_PATH) -> list[LedgerEntry]:
    entries = []
    for n, line in enumerate(ledger_lines(text), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            entries.append(LedgerEntry(**data))
        except (json.JSONDecodeError, TypeError) as exc:
            raise FormatError(
                f"malformed ledger line ({exc})", hint="the ledger is append-only: restore it from git", path=source, line=n
            ) from None
    return entries


def verify_chain(entries: list[LedgerEntry]) -> list[tuple[int, str]]:
    """Problems in the chain as (1-based ledger line, message); empty when it verifies."""
    problems = []
    prev = GENESIS
    for n, entry in enumerate(entries, 1):
        if entry.prev != prev:
            problems.append((n, f"ledger line {n} ({entry.id}) does not chain to the line before it"))
        if entry.compute_hash() != entry.hash:
            problems.append((n, f"ledger line {n} ({entry.id}) was modified: its hash does not match its content"))
        if entry.seq != n:
            problems.append((n, f"ledger line {n} has sequence number {entry.seq}"))
        prev = entry.hash
    return problems


def load_ledger(root: Path) -> list[LedgerEntry]:
    path = root / LEDGER_PATH
    if not path.exists():
        return []
    return parse_ledger(path.read_text(encoding="utf-8"))


def make_entry(prev: LedgerEntry | None, item: PreparedItem, path: str, added_at: str) -> LedgerEntry:
    entry = LedgerEntry(
        seq=(prev.seq + 1) if prev else 1,
        id=item.id,
        sha256=sha256_hex(item.content),
        prev=prev.hash if prev else GENESIS,
        kind=item.kind,
        scope=item.scope,
        path=path,
        added_at=added_at,
        lines=item.content.count("\n"),
        source=clean_label(item.source),  # intake cleaned them already; an item made elsewhere is cleaned here
        meta=clean_meta(item.meta),
    )
    return LedgerEntry(**(entry.payload() | {"hash": entry.compute_hash()}))


_TMP_RE = re.compile(r"(^|/)\.[^/]+\.tmp-\d+$")
_ITEM_RE = EVIDENCE_FILE_RE


@dataclass(frozen=True)
class Recovery:
    """What an add killed before its commit left behind, and how to undo it."""

    remove: tuple[str, ...]  # untracked leftovers: temporary files, items the ledger never committed
    restore_ledger: bytes | None  # the committed ledger, when the working one only has lines appended
    ledger_committed: bool = True  # False: the ledger is not in HEAD at all, so it is removed
    resync: tuple[str, ...] = ()  # committed, file as committed, git's index not yet told (killed after the commit)


def plan_recovery(repo: Repo) -> Recovery:
    """Leftovers of an interrupted ``add`` under evidence/, or ConflictError when evidence/ holds
    changes no add makes (an edited or deleted item, a rewritten ledger, a foreign file)."""
    dirty = repo.dirty_paths((EVIDENCE_DIR + "/",))
    if not dirty:
        return Recovery((), None, True)
    head = repo.head()
    committed = repo.read_at(head, LEDGER_PATH) if head else None
    known = {e.id for e in ledger_at(repo, head)}
    remove: list[str] = []
    resync: list[str] = []
    restore: bytes | None = None
    for path in dirty:
        item = _ITEM_RE.match(path)
        committed_file = repo.read_at(head, path) if head is not None else None
        tracked = committed_file is not None
        if tracked and (repo.root / path).is_file() and (repo.root / path).read_bytes() == committed_file:
            resync.append(path)
        elif _TMP_RE.search(path) and not tracked:
            remove.append(path)
        elif item and not tracked and item.group(1) not in known:
            remove.append(path)
        elif path == LEDGER_PATH and (repo.root / path).is_file() and (repo.root / path).read_bytes().startswith(committed or b""):
            restore = committed or b""
        else:
            raise ConflictError(
                f"evidence/ has changes no kb command makes ({path})",
                hint="evidence is append-only: inspect them with `git status evidence`, then restore with `git checkout -- evidence` and remove untracked files with `git clean -n evidence` / `git clean -f evidence`",
            )
    return Recovery(tuple(remove), restore, committed is not None, tuple(resync))


def apply_recovery(repo: Repo, recovery: Recovery) -> tuple[str, ...]:
    if recovery.resync:
        index = repo.git.index
        index.read()
        for path in recovery.resync:
            index.add(path)
        index.write()
    for path in recovery.remove:
        (repo.root / path).unlink(missing_ok=True)
    if recovery.restore_ledger is not None:
        if recovery.ledger_committed:
            atomic_write(repo.root / LEDGER_PATH, recovery.restore_ledger)
        else:
            (repo.root / LEDGER_PATH).unlink(missing_ok=True)
    return recovery.remove + recovery.resync + ((LEDGER_PATH,) if recovery.restore_ledger is not None else ())


def _write_ledger(path: Path, data: bytes) -> None:
    """The ledger write, a function of its own so tests can inject a failure between the item
    files and the ledger."""
    atomic_write(path, data)


@dataclass(frozen=True)
class AddResult:
    added: list[LedgerEntry]
    duplicates: list[str]  # ids already present
    commit: str | None
    recovered: tuple[str, ...] = ()  # leftovers of an interrupted add, cleaned up first


def add_items(repo: Repo, items: list[PreparedItem], now: Callable[[], str] = iso_utc) -> AddResult:
    """Append prepared items atomically: all files, the ledger lines and one commit, or nothing."""
    with repo.write_lock():
        recovered = apply_recovery(repo, plan_recovery(repo))
        entries = load_ledger(repo.root)
        known = {e.id for e in entries}
        fresh: list[PreparedItem] = []
        duplicates: list[str] = []
        for item in items:
            if item.id in known:
                duplicates.append(item.id)
            else:
                known.add(item.id)
                fresh.append(item)
        if not fresh:
            return AddResult([], duplicates, None, recovered)
        added_at = now()
        folder = f"{EVIDENCE_DIR}/{added_at[:4]}/{added_at[5:7]}"
        new_entries: list[LedgerEntry] = []
        prev = entries[-1] if entries else None
        for item in fresh:
            prev = make_entry(prev, item, f"{folder}/{item.id}.md", added_at)
            new_entries.append(prev)
        ledger_file = repo.root / LEDGER_PATH
        old_ledger = ledger_file.read_bytes() if ledger_file.exists() else None
        written: list[Path] = []
        try:
            for item, entry in zip(fresh, new_entries, strict=True):
                target = repo.root / entry.path
                atomic_write(target, item.content.encode("utf-8"))
                written.append(target)
            new_lines = "".join(e.to_line() for e in new_entries).encode("utf-8")
            _write_ledger(ledger_file, (old_ledger or b"") + new_lines)
            ids = ", ".join(e.id for e in new_entries[:5]) + (" ..." if len(new_entries) > 5 else "")
            message = f"evidence: add {len(new_entries)} item(s)\n\n{ids}\n"
            commit = repo.commit_worktree_paths([e.path for e in new_entries] + [LEDGER_PATH], message)
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            if old_ledger is None:
                ledger_file.unlink(missing_ok=True)
            else:
                atomic_write(ledger_file, old_ledger)
            raise
        return AddResult(new_entries, duplicates, str(commit), recovered)


def find_entry(entries: list[LedgerEntry], evidence: str) -> LedgerEntry:
    entries = [e for e in entries if e.path]  # tombstones have no content to show
    for entry in entries:
        if entry.id == evidence:
            return entry
    matches = [e for e in entries if e.id.startswith(evidence)] if len(evidence) >= 6 else []
    if len(matches) == 1:
        return matches[0]
    raise NotFoundError(f"unknown evidence id {evidence!r}", hint="list ids with `kb evidence list`")


def read_content(root: Path, entry: LedgerEntry) -> str:
    try:
        return (root / entry.path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFoundError(f"evidence file {entry.path} is missing", hint="restore it from git: `git checkout -- evidence`") from None


def parse_span(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"L?(\d+)(?:-L?(\d+))?", text.strip())
    if not match:
        raise UsageError(f"bad line range {text!r}", hint="use A-B, e.g. --lines 3-7")
    start = int(match.group(1))
    end = int(match.group(2) or start)
    if start < 1 or end < start:
        raise UsageError(f"bad line range {text!r}", hint="lines start at 1 and A <= B")
    return start, end


def slice_lines(content: str, start: int, end: int, evidence: str = "") -> list[tuple[int, str]]:
    lines = content.splitlines()
    if start > len(lines):
        raise NotFoundError(
            f"{evidence or 'evidence'} has {len(lines)} lines; L{start} does not exist",
            hint="`kb evidence show ID` prints every line with its number",
        )
    return [(n, lines[n - 1]) for n in range(start, min(end, len(lines)) + 1)]


def ledger_at(repo: Repo, commit: pygit2.Commit | None) -> list[LedgerEntry]:
    """The ledger as committed at ``commit`` (empty before the first item)."""
    if commit is None:
        return []
    data = repo.read_at(commit, LEDGER_PATH)
    return parse_ledger(data.decode("utf-8")) if data else []


@dataclass(frozen=True)
class ItemView:
    """Lines of one evidence item, for ``kb evidence show``."""

    entry: LedgerEntry
    lines: list[tuple[int, str]]


def show_item(repo: Repo, reference: str, lines: str | None = None) -> ItemView:
    """An item by id (or unique prefix), optionally ``#LA-LB`` or ``lines`` ``A-B``."""
    ident, _, span = reference.partition("#")
    entry = find_entry(load_ledger(repo.root), ident)
    content = read_content(repo.root, entry)
    if is_evidence_hidden(repo, entry.id, entry.scope, content):  # being forgotten: as if unknown
        raise NotFoundError(f"unknown evidence id {ident!r}", hint="list ids with `kb evidence list`")
    wanted = lines or span
    start, end = parse_span(wanted) if wanted else (1, max(entry.lines, 1))
    return ItemView(entry, slice_lines(content, start, end, entry.id))


def list_entries(repo: Repo, user: str | None = None, kind: str | None = None) -> list[LedgerEntry]:
    """Ledger entries in order, optionally only one user's or one kind's."""
    scope = user_scope(user) if user else None
    return [e for e in load_ledger(repo.root) if e.path and (scope is None or e.scope == scope) and (kind is None or e.kind == kind)]
