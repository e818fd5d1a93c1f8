"""Conversation sessions for user memory: reading chat JSON/JSONL, LoCoMo and YAML case files.

A session is a dated list of messages. Every format ends as the same thing, so that
``kb memory ingest`` can store each session as one evidence item (kind ``conversation``) whose
lines show speaker, time and turn id.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.errors import FormatError, UsageError
from kb.intake import Message, message_from_dict, parse_messages, read_input
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


def parse_locomo_date(text: str) -> str:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08T13:56:00'."""
    m = LOCOMO_DATE_RE.search(text or "")
    if not m:
        raise FormatError(f"unrecognised LoCoMo session date {text!r}")
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    mon = MONTHS.get(month.lower())
    if mon is None:
        raise FormatError(f"unrecognised month in LoCoMo session date {text!r}")
    return dt.datetime(int(year), mon, int(day), h, int(minute)).isoformat()


def _iso(value: Any) -> str:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    text = str(value).strip()
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None).isoformat()
    except ValueError:
        raise FormatError(f"unrecognised timestamp {text!r}", hint="use ISO 8601, e.g. 2024-11-15 10:30:00") from None


def _stamp(messages: list[Message], date: str) -> tuple[Message, ...]:
    """Messages without their own time get the session's, so every line shows when it was said."""
    return tuple(m if m.time else Message(m.speaker, m.text, date, m.turn_id) for m in messages)


def locomo_sessions(sample: dict[str, Any], name: str) -> list[Session]:
    conv = sample.get("conversation")
    if not isinstance(conv, dict) or "speaker_a" not in conv:
        raise FormatError(f"{name}: not a LoCoMo sample (no conversation.speaker_a)")
    speakers = (str(conv["speaker_a"]), str(conv["speaker_b"]))
    sessions = []
    numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    for n in numbers:
        turns = conv.get(f"session_{n}") or []
        if not turns:
            continue
        date = parse_locomo_date(str(conv.get(f"session_{n}_date_time", "")))
        messages = []
        for turn in turns:
            text = str(turn.get("text", ""))
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            messages.append(Message(str(turn["speaker"]), text, date, str(turn.get("dia_id") or "") or None))
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
    sessions = []
    for n, conv in enumerate(data.get("conversation_histories") or [], 1):
        if "timestamp" not in conv:
            raise FormatError(f"{name}: conversation {n} has no timestamp")
        date = _iso(conv["timestamp"])
        raw = conv.get("messages") or []
        messages = [message_from_dict(m, f"{name}: conversation {n} message {i}") for i, m in enumerate(raw, 1)]
        if not messages:
            raise FormatError(f"{name}: conversation {n} has no messages")
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
        raise FormatError(f"{name}: not UTF-8 text (byte {exc.start})") from None
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
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
        samples = data if isinstance(data, list) else [data]
        if samples and isinstance(samples[0], dict) and isinstance(samples[0].get("conversation"), dict):
            if len(samples) > 1:
                if sample is None:
                    raise UsageError(
                        f"{name} holds {len(samples)} LoCoMo conversations", hint="choose one with --sample <index or sample_id>"
                    )
                chosen = [s for i, s in enumerate(samples) if str(i) == sample or s.get("sample_id") == sample]
                if not chosen:
                    raise UsageError(f"{name}: no LoCoMo sample {sample!r}")
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
