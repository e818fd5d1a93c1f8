"""Evidence is append-only: the hash chain verifies, every item matches its recorded hash, and
against a base commit no item or ledger line was modified or removed."""

from __future__ import annotations

import hashlib

import pygit2

from ci.findings import Finding
from ci.selection import Selection
from ci.snapshot import Snapshot
from kb.errors import FormatError
from kb.evidence import EVIDENCE_DIR, LEDGER_PATH, ledger_lines, parse_ledger, verify_chain

RESTORE = "evidence is append-only: restore it with `git checkout <base> -- evidence`"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_ledger(snapshot: Snapshot, selection: Selection) -> list[Finding]:
    error = snapshot.ledger_error
    if error is not None:
        return [Finding(LEDGER_PATH, error.line or 1, "evidence.ledger", error.detail, hint=RESTORE)]
    out = [Finding(LEDGER_PATH, line, "evidence.chain", msg, hint=RESTORE) for line, msg in verify_chain(snapshot.ledger)]
    recorded = {e.path for e in snapshot.ledger}
    changed = None if selection.evidence_paths is None else set(selection.evidence_paths)
    for n, entry in enumerate(snapshot.ledger, 1):
        if not entry.path or (changed is not None and entry.path not in changed):
            continue  # a tombstone (its content forgotten) or the record of a forgetting
        file = snapshot.root / entry.path
        if not file.is_file():
            out.append(Finding(entry.path, 1, "evidence.removed", f"{entry.id} (ledger line {n}) is missing", hint=RESTORE))
        elif _sha(file.read_bytes()) != entry.sha256:
            out.append(
                Finding(entry.path, 1, "evidence.modified", f"{entry.id} no longer matches the hash in the ledger (line {n})", hint=RESTORE)
            )
    candidates = (
        changed
        if changed is not None
        else {p.relative_to(snapshot.root).as_posix() for p in (snapshot.root / EVIDENCE_DIR).rglob("*") if p.is_file()}
    )
    for path in sorted(candidates):
        if path != LEDGER_PATH and path.startswith(EVIDENCE_DIR + "/") and path not in recorded and (snapshot.root / path).is_file():
            out.append(
                Finding(
                    path,
                    1,
                    "evidence.unrecorded",
                    "file under evidence/ that the ledger does not record",
                    hint="add evidence only with `kb evidence add`",
                )
            )
    return out


def check_against_base(snapshot: Snapshot, base: pygit2.Commit, repo_git: pygit2.Repository) -> list[Finding]:
    out: list[Finding] = []
    try:
        entry = base.tree[LEDGER_PATH]
        base_text = repo_git[entry.id].read_raw().decode("utf-8")
    except KeyError:
        base_text = ""
    ledger_file = snapshot.root / LEDGER_PATH
    current_text = ledger_file.read_text(encoding="utf-8") if ledger_file.exists() else ""
    base_lines = ledger_lines(base_text)
    current_lines = ledger_lines(current_text)
    for n, line in enumerate(base_lines, 1):
        if n > len(current_lines):
            out.append(Finding(LEDGER_PATH, n, "evidence.rewritten", f"ledger line {n} of the base was removed", hint=RESTORE))
            break
        if current_lines[n - 1] != line:
            out.append(Finding(LEDGER_PATH, n, "evidence.rewritten", f"ledger line {n} differs from the base", hint=RESTORE))
    try:
        base_entries = parse_ledger(base_text)
    except FormatError:
        return out
    for e in base_entries:
        file = snapshot.root / e.path
        try:
            base_blob = repo_git[base.tree[e.path].id].read_raw()
        except KeyError:
            continue
        if not file.is_file():
            out.append(Finding(e.path, 1, "evidence.removed", f"{e.id} exists in the base but was removed", hint=RESTORE))
        else:
            data = file.read_bytes()
            if data != base_blob:
                out.append(
                    Finding(e.path, _first_diff_line(base_blob, data), "evidence.modified", f"{e.id} differs from the base", hint=RESTORE)
                )
    return out


def _first_diff_line(a: bytes, b: bytes) -> int:
    a_lines, b_lines = a.split(b"\n"), b.split(b"\n")
    for n, (x, y) in enumerate(zip(a_lines, b_lines, strict=False), 1):
        if x != y:
            return n
    return min(len(a_lines), len(b_lines)) + 1


def check(snapshot: Snapshot, selection: Selection, repo_git: pygit2.Repository | None = None) -> list[Finding]:
    out = []
    if selection.full or selection.evidence_paths:
        out.extend(check_ledger(snapshot, selection))
        if selection.base is not None and repo_git is not None:
            out.extend(check_against_base(snapshot, selection.base, repo_git))
    return out
