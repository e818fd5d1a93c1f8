"""Conversation sessions for user memory: reading chat JSON/JSONL, LoCoMo and YAML case files.

A session is a dated list of messages. Every format ends as the same thing, so that
``kb memory ingest`` can store each session as one evidence item (kind ``conversation``) whose
lines show speaker, time and turn id.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.errors import FormatError, UsageError
from kb.intake import Message, load_json, message_from_dict, one_line, parse_messages, read_input
from kb.yamltext import YamlProblem, load_yaml

MAX_CASE_BYTES = 64 * 1024 * 1024  # a case file holds whole conversations

LOCOMO_DATE_RE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", re.I)
MONTHS = {
    m: i
    for i, m in enumerate(
        ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"], 1
    )
}


@dataclass(frozen=True)
class Session:
    source: str  # file name and position, for the evidence `source`
    date: str  # ISO date-time (UTC assumed when none given)
    messages: tuple[Message, ...]
    title: str = ""
    speakers: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReadResult:
    sessions: list[Session]
    warnings: list[str]


FORMATS_HINT = "see docs/memory.md for the accepted formats"


def _bad(name: str, what: str) -> FormatError:
    return FormatError(f"{name}: {what}", hint=FORMATS_HINT)


def _is_text(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def parse_locomo_date(text: str) -> str:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08T13:56:00'."""
    m = LOCOMO_DATE_RE.search(text or "")
    if not m:
        raise FormatError(f"unrecognised LoCoMo session date {text!r}", hint="LoCoMo dates read like `1:56 pm on 8 May, 2023`")
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    mon = MONTHS.get(month.lower())
    if mon is None:
        raise FormatError(f"unrecognised month in LoCoMo session date {text!r}", hint="LoCoMo dates read like `1:56 pm on 8 May, 2023`")
    try:
        return dt.datetime(int(year), mon, int(day), h, int(minute)).isoformat()
    except ValueError:
        raise FormatError(f"impossible LoCoMo session date {text!r}", hint="LoCoMo dates read like `1:56 pm on 8 May, 2023`") from None


def _iso(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    text = str(value).strip()
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None).isoformat()
    except ValueError:
        raise FormatError(f"unrecognised timestamp {text[:40]!r}", hint="use ISO 8601, e.g. 2024-11-15 10:30:00") from None


def _stamp(messages: list[Message], date: str) -> tuple[Message, ...]:
    """Messages without their own time get the session's, so every line shows when it was said."""
    return tuple(m if m.time else Message(m.speaker, m.text, date, m.turn_id) for m in messages)


def _locomo_turn(turn: Any, where: str, date: str) -> Message:
    if not isinstance(turn, dict) or not _is_text(turn.get("speaker")) or not _is_text(turn.get("text", "")):
        raise FormatError(f"{where}: a turn is an object with `speaker` and `text`", hint=FORMATS_HINT)
    caption = turn.get("blip_caption")
    text = str(turn.get("text", ""))
    if caption:
        text += f" [shares a photo: {caption}]"
    raw_id = turn.get("dia_id")
    turn_id = one_line(str(raw_id)) if _is_text(raw_id) else ""
    return Message(one_line(str(turn["speaker"])), text, date, turn_id or None)


def locomo_sessions(sample: dict[str, Any], name: str) -> list[Session]:
    conv = sample.get("conversation")
    if not isinstance(conv, dict) or "speaker_a" not in conv:
        raise _bad(name, "not a LoCoMo sample (no conversation.speaker_a)")
    for key in ("speaker_a", "speaker_b"):
        if not isinstance(conv.get(key), str) or not one_line(conv[key]).strip():
            raise _bad(name, f"conversation.{key} must be a speaker's name")
    speakers = (one_line(conv["speaker_a"]), one_line(conv["speaker_b"]))
    sessions = []
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_[0-9]+", k))
    for n in numbers:
        turns = conv.get(f"session_{n}")
        if not turns:
            continue
        if not isinstance(turns, list):
            raise _bad(name, f"conversation.session_{n} must be a list of turns")
        stamp = conv.get(f"session_{n}_date_time")
        try:
            date = parse_locomo_date(stamp if isinstance(stamp, str) else "")
        except FormatError as exc:
            raise _bad(name, f"conversation.session_{n}_date_time: {exc.message}") from None
        messages = [_locomo_turn(turn, f"{name}: conversation.session_{n} turn {i}", date) for i, turn in enumerate(turns, 1)]
        sessions.append(
            Session(
                f"{name}#{sample.get('sample_id', '')}/session_{n}",
                date,
                tuple(messages),
                f"session {n}",
                speakers,
                {"sample_id": sample.get("sample_id"), "session": n},
            )
        )
    return sessions


def case_sessions(data: dict[str, Any], name: str) -> list[Session]:
    histories = data.get("conversation_histories") or []
    if not isinstance(histories, list):
        raise _bad(name, "conversation_histories must be a list of conversations")
    sessions = []
    for n, conv in enumerate(histories, 1):
        if not isinstance(conv, dict):
            raise _bad(name, f"conversation {n} must be a mapping with timestamp and messages")
        if "timestamp" not in conv:
            raise _bad(name, f"conversation {n} has no timestamp")
        try:
            date = _iso(conv["timestamp"])
        except FormatError as exc:
            raise FormatError(f"{name}: conversation {n} timestamp: {exc.message}", hint=exc.hint) from None
        raw = conv.get("messages") or []
        if not isinstance(raw, list):
            raise _bad(name, f"conversation {n}: messages must be a list")
        messages = []
        for i, m in enumerate(raw, 1):
            if not isinstance(m, dict):
                raise _bad(name, f"conversation {n} message {i} must be a mapping with role and content")
            messages.append(message_from_dict(m, f"{name}: conversation {n} message {i}"))
        if not messages:
            raise _bad(name, f"conversation {n} has no messages")
        title = str(conv.get("conversation_id") or f"conversation {n}")
        meta = {"conversation_id": title} | (
            {"business": conv["metadata"].get("business")}
            if isinstance(conv.get("metadata"), dict) and conv["metadata"].get("business")
            else {}
        )
        sessions.append(Session(f"{name}#{title}", date, _stamp(messages, date), title, (), meta))
    return sessions


def read_sessions(path: Path, sample: str | None = None) -> ReadResult:
    """Every session in ``path``; chat files are one session each."""
    name = path.name
    data_bytes = read_input(path)
    try:
        text = data_bytes.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{name}: not UTF-8 text (byte {exc.start})", hint="convert the file to UTF-8") from None
    if not text.strip():
        raise FormatError(f"{name}: empty session file", hint="nothing to ingest")
    suffix = path.suffix.lower()
    warnings: list[str] = []
    if suffix in (".yaml", ".yml"):
        try:
            data = load_yaml(text, MAX_CASE_BYTES)
        except YamlProblem as exc:
            raise FormatError(exc.message, hint="fix the file", path=name, line=exc.line) from None
        if not isinstance(data, dict) or "conversation_histories" not in data:
            raise FormatError(
                f"{name}: unknown session format (a YAML case file has `conversation_histories`)",
                hint="see docs/memory.md for the accepted formats",
            )
        return ReadResult(case_sessions(data, name), warnings)
    if suffix not in (".json", ".jsonl"):
        raise FormatError(
            f"{name}: unknown session format {suffix or '(no extension)'}",
            hint="sessions are .json/.jsonl chats, LoCoMo .json, or .yaml case files (docs/memory.md)",
        )
    stripped = text.strip()
    if suffix == ".json" and (stripped.startswith("[") or stripped.startswith("{")):
        data = load_json(stripped, name)
        samples = data if isinstance(data, list) else [data]
        if samples and isinstance(samples[0], dict) and isinstance(samples[0].get("conversation"), dict):
            if not all(isinstance(s, dict) for s in samples):
                raise _bad(name, "every LoCoMo sample must be an object")
            if len(samples) > 1:
                if sample is None:
                    raise UsageError(
                        f"{name} holds {len(samples)} LoCoMo conversations", hint="choose one with --sample <index or sample_id>"
                    )
                chosen = [s for i, s in enumerate(samples) if str(i) == sample or s.get("sample_id") == sample]
                if not chosen:
                    raise UsageError(
                        f"{name}: no LoCoMo sample {sample!r}", hint="pass --sample with an index (0, 1, ...) or a sample_id of the file"
                    )
                samples = chosen
            return ReadResult(locomo_sessions(samples[0], name), warnings)
    messages = parse_messages(text, name)
    times = sorted(m.time for m in messages if m.time)
    if times:
        date = _iso(times[0])
    else:
        mtime = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).replace(tzinfo=None, microsecond=0)
        date = mtime.isoformat()
        warnings.append(f"{name}: messages have no timestamps; using the file's time {date}")
    return ReadResult([Session(name, date, _stamp(messages, date), name, (), {})], warnings)
