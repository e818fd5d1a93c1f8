"""The append-only evidence log: normalising raw material, storing it, the hash-chained ledger.

An item is stored once, under ``evidence/YYYY/MM/<id>.md``, in a form whose line numbers never
change: a conversation is one message per line (``[time] speaker: text``, continuation lines
indented), a document is its own text. ``evidence/ledger.jsonl`` records every item; each line
carries the hash of the line before it, so any edit or removal breaks the chain.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.errors import ConflictError, FormatError, NotFoundError, UsageError
from kb.repo import Repo, atomic_write
from kb.secrets import find_secrets

EVIDENCE_DIR = "evidence"
LEDGER_PATH = "evidence/ledger.jsonl"
KINDS = ("conversation", "trajectory", "document", "tool-output")
GENESIS = "0" * 64
ID_RE = re.compile(r"^ev-[0-9a-f]{16}$")
USER_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


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
        return _sha256(json.dumps(self.payload(), sort_keys=True, ensure_ascii=False, separators=(",", ":")))

    def to_line(self) -> str:
        data = self.payload() | {"hash": self.hash}
        return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


@dataclass(frozen=True)
class Message:
    speaker: str
    text: str
    time: str | None = None
    turn_id: str | None = None


@dataclass(frozen=True)
class PreparedItem:
    """Normalised content ready to append (the pure half of ``add``)."""

    id: str
    kind: str
    scope: str
    content: str
    source: str
    meta: dict[str, Any]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scope_for_user(user: str | None) -> str:
    if user is None:
        return "system"
    if not USER_ID_RE.match(user):
        raise UsageError(
            f"invalid user id {user!r}",
            hint="use lower-case letters, digits, '.', '_' or '-' (no slashes or '..'), at most 64 characters",
        )
    return f"user:{user}"


def evidence_id(kind: str, scope: str, content: str) -> str:
    return "ev-" + _sha256(f"{kind}\0{scope}\0{content}")[:16]


# ---- normalising input -----------------------------------------------------------------


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text") or part.get("content") or ""))
            else:
                parts.append(str(part))
        return "\n".join(p for p in parts if p)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def message_from_dict(raw: dict[str, Any], where: str) -> Message:
    speaker = raw.get("speaker") or raw.get("role") or raw.get("name") or raw.get("from")
    text = raw.get("content", raw.get("text", raw.get("message")))
    if text is None and raw.get("tool_calls"):
        calls = [c.get("function", c) for c in raw["tool_calls"] if isinstance(c, dict)]
        text = "; ".join(f"call {c.get('name')}({c.get('arguments', '')})" for c in calls)
    if speaker is None or text is None:
        raise FormatError(f"{where}: a message needs a role (or speaker) and content (or text)")
    time = raw.get("timestamp") or raw.get("time") or raw.get("date") or raw.get("created_at")
    turn = raw.get("id") or raw.get("dia_id") or raw.get("turn_id")
    if raw.get("name") and raw.get("role") and raw["name"] != raw["role"]:
        speaker = f"{raw['role']} ({raw['name']})"
    return Message(str(speaker), _text_of(text), str(time) if time is not None else None, str(turn) if turn is not None else None)


def parse_messages(text: str, name: str) -> list[Message]:
    """Messages from JSON (a list, or an object with ``messages``) or JSONL (one per line)."""
    stripped = text.strip()
    if not stripped:
        raise FormatError(f"{name}: empty conversation", hint="the file has no messages")
    if stripped.startswith("["):
        data = _json(stripped, name)
    elif stripped.startswith("{") and "\n" in stripped and _looks_like_jsonl(stripped):
        data = [_json(line, f"{name}:{n}") for n, line in enumerate(stripped.splitlines(), 1) if line.strip()]
    else:
        data = _json(stripped, name)
        if isinstance(data, dict):
            data = data.get("messages", data.get("conversation"))
    if not isinstance(data, list):
        raise FormatError(f"{name}: expected a list of messages or an object with `messages`")
    messages = []
    for n, raw in enumerate(data, 1):
        if not isinstance(raw, dict):
            raise FormatError(f"{name}: message {n} is not an object")
        messages.append(message_from_dict(raw, f"{name}: message {n}"))
    if not messages:
        raise FormatError(f"{name}: empty conversation", hint="the file has no messages")
    return messages


def _looks_like_jsonl(text: str) -> bool:
    first = text.splitlines()[0].strip()
    try:
        json.loads(first)
        return True
    except json.JSONDecodeError:
        return False


def _json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", hint="fix the file or pass a Markdown/text file") from None


def render_messages(messages: Iterable[Message]) -> str:
    """One message per line block; continuation lines are indented so they never look like turns."""
    out = []
    for msg in messages:
        head = f"[{msg.time}] " if msg.time else ""
        who = f"{msg.speaker} ({msg.turn_id})" if msg.turn_id else msg.speaker
        lines = msg.text.replace("\r\n", "\n").replace("\r", "\n").strip("\n").split("\n") or [""]
        out.append(f"{head}{who}: {lines[0]}".rstrip())
        out.extend(("    " + line).rstrip() for line in lines[1:])
    return "\n".join(out) + "\n"


def normalise_text(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if text.endswith("\n") else text + "\n"


def prepare_messages(messages: list[Message], source: str, scope: str, meta: dict[str, Any] | None = None, kind: str = "conversation") -> PreparedItem:
    """A conversation already read into messages (e.g. one session of a LoCoMo file)."""
    if not messages:
        raise FormatError(f"{source}: empty conversation", hint="the session has no messages")
    content = render_messages(messages)
    meta = dict(meta or {})
    times = sorted(m.time for m in messages if m.time)
    if times:
        meta.setdefault("first_time", times[0])
        meta.setdefault("last_time", times[-1])
    meta.setdefault("messages", len(messages))
    hits = find_secrets(content)
    if hits:
        raise FormatError(f"{source}: contains what looks like a secret ({hits[0].kind}) at stored line {hits[0].line}", hint="evidence is permanent: redact the secret before adding it")
    return PreparedItem(evidence_id(kind, scope, content), kind, scope, content, source, meta)


def prepare(
    data: bytes,
    name: str,
    kind: str,
    scope: str,
    source: str = "",
    meta: dict[str, Any] | None = None,
) -> PreparedItem:
    """Decode and normalise one input into its stored form. Pure: no effects."""
    if kind not in KINDS:
        raise UsageError(f"unknown evidence kind {kind!r}", hint=f"use one of: {', '.join(KINDS)}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{name}: not UTF-8 text (byte {exc.start})", hint="convert the file to UTF-8") from None
    suffix = Path(name).suffix.lower()
    meta = dict(meta or {})
    if kind in ("conversation", "trajectory") and suffix in (".json", ".jsonl"):
        messages = parse_messages(text, name)
        content = render_messages(messages)
        times = sorted(m.time for m in messages if m.time)
        if times:
            meta.setdefault("first_time", times[0])
            meta.setdefault("last_time", times[-1])
        meta.setdefault("messages", len(messages))
    elif kind == "tool-output" and suffix == ".json":
        content = normalise_text(json.dumps(_json(text, name), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        if not text.strip():
            raise FormatError(f"{name}: empty file", hint="nothing to add")
        content = normalise_text(text)
    hits = find_secrets(content)
    if hits:
        hit = hits[0]
        raise FormatError(
            f"{name}: contains what looks like a secret ({hit.kind}) at stored line {hit.line}",
            hint="evidence is permanent: redact the secret before adding the file",
        )
    return PreparedItem(evidence_id(kind, scope, content), kind, scope, content, source or name, meta)


# ---- the ledger ------------------------------------------------------------------------


def parse_ledger(text: str, source: str = LEDGER_PATH) -> list[LedgerEntry]:
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            entries.append(LedgerEntry(**data))
        except (json.JSONDecodeError, TypeError) as exc:
            raise FormatError(f"{source}:{n}: malformed ledger line ({exc})", hint="the ledger is append-only: restore it from git") from None
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
        sha256=_sha256(item.content),
        prev=prev.hash if prev else GENESIS,
        kind=item.kind,
        scope=item.scope,
        path=path,
        added_at=added_at,
        lines=item.content.count("\n"),
        source=item.source,
        meta=item.meta,
    )
    return LedgerEntry(**(entry.payload() | {"hash": entry.compute_hash()}))


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class AddResult:
    added: list[LedgerEntry]
    duplicates: list[str]  # ids already present
    commit: str | None


def _write_ledger(path: Path, data: bytes) -> None:
    atomic_write(path, data)


def add_items(repo: Repo, items: list[PreparedItem], now: Callable[[], str] = utc_now) -> AddResult:
    """Append prepared items atomically: all files, the ledger lines and one commit, or nothing."""
    with repo.lock("write"):
        dirty = repo.dirty_paths((EVIDENCE_DIR + "/",))
        if dirty:
            raise ConflictError(f"evidence/ has uncommitted changes ({dirty[0]})", hint="evidence is append-only: restore it with `git checkout -- evidence` and retry")
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
            return AddResult([], duplicates, None)
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
            for item, entry in zip(fresh, new_entries):
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
        return AddResult(new_entries, duplicates, str(commit))


def find_entry(entries: list[LedgerEntry], evidence: str) -> LedgerEntry:
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
        raise NotFoundError(f"{evidence or 'evidence'} has {len(lines)} lines; L{start} does not exist")
    return [(n, lines[n - 1]) for n in range(start, min(end, len(lines)) + 1)]
