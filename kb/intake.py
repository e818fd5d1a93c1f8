"""Intake: raw material in the forms people have it, normalised to the stored form of evidence.

A conversation (JSON list, ``{messages: [...]}``, OpenAI chat format, JSONL) becomes one message
per line (``[time] speaker: text``, continuation lines indented); a document stays its own text;
tool output in JSON is pretty-printed. ``prepare`` is pure: the evidence log (``kb.evidence``)
appends what it returns.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import stat
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb.config import EVIDENCE_KINDS, Privacy
from kb.controls import clean_label
from kb.errors import FormatError, UsageError
from kb.ids import evidence_id
from kb.privacy import KINDS as PRIVACY_KINDS
from kb.privacy import MODEL_KINDS, Detector, mask, mask_values
from kb.secrets import find_secrets

KINDS = EVIDENCE_KINDS  # the kinds of evidence (defined with the config, which validates them)
# What a folder given to `kb evidence add` contributes by default (--glob to choose): text formats
# and the documents converted to text (PDF, HTML).
DEFAULT_GLOBS = ("*.md", "*.markdown", "*.txt", "*.rst", "*.json", "*.jsonl", "*.html", "*.htm", "*.pdf")
CONVERTED = (".pdf", ".html", ".htm")
# a snippet include in Markdown: mdx_include {!file!}, FastAPI/Typer {* file hl[3] *}, pymdownx
# --8<-- "file" (a file a line between two --8<-- lines is the block form)
INCLUDE_RE = re.compile(r'^\s*(?:\{!\s*([^!{}]+?)\s*!\}|\{\*\s*(\S+)[^*{}]*\*\}|-{1,3}8<-{1,3}\s+"([^"]+)")\s*$')
SNIPPET_BLOCK_RE = re.compile(r"^\s*-{1,3}8<-{1,3}\s*$")
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
MAX_INCLUDED = 2000  # files a folder's documents may bring in by including them
MAX_INPUT_BYTES = 64 * 1024 * 1024  # one input file: a document or a conversation export
MAX_JSON_DEPTH = 100  # conversations and tool output nest a few levels, not hundreds

_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_input(path: Path) -> bytes:
    """The bytes of one input file, at most ``MAX_INPUT_BYTES``. Only a regular file is read: a
    FIFO would block until a writer came, ``/dev/zero`` would never end. The file is opened
    without blocking and its type checked on the open descriptor, so that nothing swapped in
    between a check and the read can stall kb."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file", hint="check the path") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a folder; pass files", hint="pass the files in it (kb evidence add takes folders)") from None
    except PermissionError:
        raise UsageError(f"{path}: permission denied", hint="check the file's permissions") from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise UsageError(f"{path}: is a folder; pass files", hint="pass the files in it (kb evidence add takes folders)")
        if not stat.S_ISREG(mode):
            what = next((name for test, name in _SPECIAL_FILES if test(mode)), "a special file")
            raise UsageError(f"{path}: is {what}, not a regular file", hint="save the material to a file and pass that")
        limit = MAX_INPUT_BYTES
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FormatError(f"{path}: over the limit of {limit:,} bytes for one input", hint="split the material into smaller files")
    return data


def expand_inputs(paths: Iterable[Path], globs: Collection[str] = DEFAULT_GLOBS, label: str | None = None) -> list[tuple[Path, str]]:
    """Each input file with its source: a file is its name; a folder, every file below it that
    matches one of ``globs`` (hidden files and folders skipped), each named by its path relative
    to the folder. ``label`` (``--source``) names a single file; with a folder or several files it
    prefixes each name (``label/relative/path``) instead of replacing it. Every name is a
    ``clean_label``: one visible line, whatever characters the file name or the label held."""
    paths = list(paths)
    if label is not None and not clean_label(label):
        raise UsageError(f"--source {label!r} has no visible characters", hint="name the source with visible text, or leave --source out")
    out: list[tuple[Path, str]] = []
    for path in paths:
        if not path.is_dir():
            out.append((path, clean_label(path.name)))
            continue
        found = sorted(
            file
            for file in path.rglob("*")
            if file.is_file()
            and not any(part.startswith(".") for part in file.relative_to(path).parts)
            and any(file.match(pattern) for pattern in globs)
        )
        if not found:
            raise UsageError(f"{path}: no files matching {' '.join(globs)} in this folder", hint="choose the files with --glob PATTERN")
        found += [file for file in included_files(path, found) if file not in found]
        out.extend((file, clean_label(file.relative_to(path).as_posix())) for file in sorted(found))
    if label is None:
        return out
    label = clean_label(label)
    if len(out) == 1 and not any(p.is_dir() for p in paths):
        return [(out[0][0], label)]
    return [(file, f"{label.rstrip('/')}/{name}") for file, name in out]


def include_names(text: str) -> list[str]:
    """The files a Markdown text includes (snippet lines outside nothing: a code fence that shows
    an include line is rare enough to be read as one), each without a ``:3:5`` line range."""
    names: list[str] = []
    block = False
    for line in text.splitlines():
        if SNIPPET_BLOCK_RE.match(line):
            block = not block
            continue
        m = INCLUDE_RE.match(line)
        name = next((g for g in m.groups() if g), "") if m else (line.strip().strip("\"'") if block and line.strip() else "")
        name = re.sub(r":\d+(?::\d+)?$", "", name.strip())
        if name and not name.startswith(";") and "://" not in name:
            names.append(name)
    return names


def included_files(root: Path, files: Iterable[Path]) -> list[Path]:
    """The files below ``root`` that its Markdown ``files`` include (``kb evidence add docs/``
    brings in the code a page shows with ``--8<-- "x.py"``), read from each file's folder, then
    from each folder above it up to ``root``, the nearest first. Nothing outside ``root``, no
    hidden file, at most ``MAX_INCLUDED``."""
    base = root.resolve()
    out: list[Path] = []
    for file in files:
        if file.suffix.lower() not in MARKDOWN_SUFFIXES:
            continue
        try:
            text = read_input(file).decode("utf-8", errors="replace")
        except (UsageError, FormatError):
            continue
        for name in include_names(text):
            folder = file.parent
            while True:
                candidate = (folder / name.lstrip("/")).resolve()
                inside = candidate.is_relative_to(base) and not any(p.startswith(".") for p in candidate.relative_to(base).parts)
                if inside and candidate.is_file() and not candidate.is_symlink():
                    found = root / candidate.relative_to(base)
                    if found not in out:
                        out.append(found)
                    break
                if folder.resolve() == base or folder == folder.parent:
                    break
                folder = folder.parent
        if len(out) >= MAX_INCLUDED:
            break
    return out[:MAX_INCLUDED]


def convert_document(data: bytes, name: str) -> str:
    """The text of a PDF (pypdf: the text layer, page by page) or the Markdown of an HTML page
    (markdownify; scripts and styles dropped). A file that cannot be read is a FormatError."""
    suffix = Path(name).suffix.lower()
    if suffix == ".pdf":
        return _pdf_text(data, name)
    try:
        html = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        html = data.decode("latin-1")  # HTML without a UTF-8 body is mostly Latin-1 (its old default)
    from markdownify import markdownify

    return markdownify(html, heading_style="ATX", bullets="-")


def _pdf_text(data: bytes, name: str) -> str:
    import io
    import logging
    import zlib

    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    log = logging.getLogger("pypdf")
    level = log.level
    log.setLevel(logging.ERROR)  # its warnings about damaged files would print on stderr; errors are ours to say
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise FormatError(f"{name}: the PDF is encrypted", hint="save an unencrypted copy and add that")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, zlib.error) as exc:
        raise FormatError(f"{name}: cannot read this PDF ({type(exc).__name__}: {exc})", hint="export it as text and add that") from None
    finally:
        log.setLevel(level)
    text = "\n\n".join(p for p in pages if p)
    if not text.strip():
        raise FormatError(f"{name}: the PDF has no text layer (a scan?)", hint="run OCR on it, or add a text export")
    return text


class SecretsFoundError(FormatError):
    """Inputs refused for what looks like secrets. ``findings`` lists every one, each as
    ``where:line: kind (fingerprint ...)``, never the secret text."""

    def __init__(self, findings: list[str], inputs: int = 1) -> None:
        self.findings = tuple(findings)
        self.details = self.findings
        many = "s" if len(findings) != 1 else ""
        super().__init__(
            f"{len(findings)} finding{many} that look{'' if many else 's'} like a secret in "
            f"{inputs} input{'s' if inputs != 1 else ''}; nothing was added",
            hint="evidence is permanent: redact each secret and add again; a reviewed finding that is "
            "not a secret is allowed by its fingerprint under `secrets: {allow: [...]}` in kb.config.yaml",
        )


def refuse_secrets(content: str, where: str, allow: Collection[str], stored: bool) -> None:
    """Raise ``SecretsFoundError`` for every secret in ``content`` not allowed by fingerprint.
    ``stored``: the line numbers are those of the stored form (a conversation), not the file's."""
    hits = find_secrets(content, allow)
    if hits:
        raise SecretsFoundError([hit.describe(where, stored) for hit in hits])


DEFAULT_PRIVACY = Privacy()


def redact_personal(content: str, meta: dict[str, Any], privacy: Privacy, detector: Detector | None = None) -> str:
    """``content`` with the personal data that ``privacy`` masks replaced by typed placeholders
    (``kb.privacy.mask``); ``meta["masked"]`` counts the values masked per kind (never the values).

    With a ``detector`` (the optional model detector) and a kind of ``MODEL_KINDS`` set to
    ``mask``, the detector is then asked for values of those kinds in the text with every
    pattern finding of any kind masked (so no value a pattern found reaches it); what it returns
    is masked too, when it occurs verbatim in the stored text."""
    redaction = mask(content, privacy.kinds("mask"), privacy.allow)
    text, masked = redaction.text, dict(redaction.masked)
    asked = privacy.kinds("mask") & set(MODEL_KINDS)
    if detector is not None and asked:
        shown = mask(text, PRIVACY_KINDS, privacy.allow).text
        found = [(kind, value) for kind, value in detector(shown, asked) if kind in asked and value in text]
        more = mask_values(text, found)
        text = more.text
        for kind, count in more.masked.items():
            masked[kind] = masked.get(kind, 0) + count
    if masked:
        meta["masked"] = dict(sorted(masked.items()))
    return text


def prepare_all(preparations: Iterable[Callable[[], PreparedItem]]) -> list[PreparedItem]:
    """Run every preparation; the secrets found in any of them are refused together, once all
    inputs were read, so that one run reports every finding of every input. Any other error
    stops at once."""
    items: list[PreparedItem] = []
    findings: list[str] = []
    refused = 0
    for prepare_one in preparations:
        try:
            items.append(prepare_one())
        except SecretsFoundError as exc:
            findings.extend(exc.findings)
            refused += 1
    if findings:
        raise SecretsFoundError(findings, refused)
    return items


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
        listed = raw["tool_calls"] if isinstance(raw["tool_calls"], list) else []
        calls = [f for c in listed if isinstance(c, dict) and isinstance(f := c.get("function", c), dict)]
        text = "; ".join(f"call {c.get('name')}({c.get('arguments', '')})" for c in calls)
    if speaker is None or text is None:
        raise FormatError(
            f"{where}: a message needs a role (or speaker) and content (or text)",
            hint='each message is an object like {"role": "user", "content": "..."}',
        )
    time = raw.get("timestamp") or raw.get("time") or raw.get("date") or raw.get("created_at")
    if time is not None:
        check_timestamp(time, where)
    turn = raw.get("id") or raw.get("dia_id") or raw.get("turn_id")
    if raw.get("name") and raw.get("role") and raw["name"] != raw["role"]:
        speaker = f"{raw['role']} ({raw['name']})"
    return Message(
        one_line(str(speaker)),
        _text_of(text),
        one_line(str(time)) if time is not None else None,
        one_line(str(turn)) if turn is not None else None,
    )


def check_timestamp(value: object, where: str) -> None:
    """A message time must be a real moment: ISO 8601 (``2025-01-10T09:00:00Z``, a date, or a
    date and time with a space) or a Unix time in seconds. ``2025-13-40`` is refused here, at the
    door, rather than breaking every later step that reads the date."""
    if isinstance(value, bool):
        raise FormatError(
            f"{where}: timestamp {value!r} is not a time",
            hint="use ISO 8601 (2025-03-02T10:00:00Z) or epoch seconds, or leave the timestamp out",
        )
    if isinstance(value, int | float):
        if 0 <= value < 253402300800:  # up to the end of year 9999
            return
        raise FormatError(f"{where}: timestamp {value!r} is out of range", hint="use ISO 8601, e.g. 2025-01-10T09:00:00Z")
    try:
        dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        raise FormatError(
            f"{where}: impossible or unrecognised timestamp {str(value)[:40]!r}", hint="use ISO 8601, e.g. 2025-01-10T09:00:00Z"
        ) from None


def lines_of(text: str) -> list[str]:
    """The lines of ``text`` split at every line boundary Python knows (\\n, \\r, \\r\\n, VT, FF,
    FS, GS, RS, NEL, U+2028, U+2029). Stored evidence uses plain \\n only, so that its line numbers
    are the same for git, for ``splitlines`` and for a person reading ``kb evidence show``; a
    message can never hide a second turn behind an exotic separator."""
    return text.splitlines()


def one_line(text: str) -> str:
    """A speaker, time or turn id as one visible line (``kb.controls.clean_label``): a line
    boundary or control character becomes a space, an invisible format character goes."""
    return clean_label(text)


def clean_meta(value: Any) -> Any:
    """``meta`` of an item with every string in it (keys too) a ``clean_label``: the ledger stores
    it as one line, and ``kb evidence list`` and the agents show it."""
    if isinstance(value, str):
        return clean_label(value)
    if isinstance(value, dict):
        return {clean_label(str(k)): clean_meta(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_meta(v) for v in value]
    return value


def parse_messages(text: str, name: str) -> list[Message]:
    """Messages from JSON (a list, or an object with ``messages``) or JSONL (one per line)."""
    stripped = text.strip()
    if not stripped:
        raise FormatError(f"{name}: empty conversation", hint="the file has no messages")
    if stripped.startswith("["):
        data = load_json(stripped, name)
    elif stripped.startswith("{") and "\n" in stripped and _looks_like_jsonl(stripped):
        data = [load_json(line, f"{name}:{n}") for n, line in enumerate(stripped.split("\n"), 1) if line.strip()]
    else:
        data = load_json(stripped, name)
        if isinstance(data, dict):
            data = data.get("messages", data.get("conversation"))
    if not isinstance(data, list):
        raise FormatError(
            f"{name}: expected a list of messages or an object with `messages`",
            hint="see README, `kb evidence add`, for the conversation formats",
        )
    messages = []
    for n, raw in enumerate(data, 1):
        if not isinstance(raw, dict):
            raise FormatError(
                f"{name}: message {n} is not an object", hint='each message is an object like {"role": "user", "content": "..."}'
            )
        messages.append(message_from_dict(raw, f"{name}: message {n}"))
    if not messages:
        raise FormatError(f"{name}: empty conversation", hint="the file has no messages")
    return messages


def _looks_like_jsonl(text: str) -> bool:
    first = text.split("\n")[0].strip()  # JSONL lines end at \n only: a JSON string may hold U+2028 raw
    try:
        json.loads(first)
        return True
    except (json.JSONDecodeError, RecursionError):
        return False


def _depth_over(data: Any, limit: int) -> bool:
    """Whether ``data`` nests lists and objects deeper than ``limit`` (iteratively: no recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return False


def load_json(text: str, name: str) -> Any:
    """JSON from outside: a syntax error, or nesting deeper than ``MAX_JSON_DEPTH`` (which would
    exhaust the stack of the parser or of whatever walks the data next), is a FormatError."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(
            f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})", hint="fix the file or pass a Markdown/text file"
        ) from None
    except RecursionError:
        data = None
    else:
        if not _depth_over(data, MAX_JSON_DEPTH):
            return data
    raise FormatError(f"{name}: JSON nested too deeply (over {MAX_JSON_DEPTH} levels)", hint="flatten the data")


def render_messages(messages: Iterable[Message]) -> str:
    """One message per line block; continuation lines are indented so they never look like turns."""
    out = []
    for msg in messages:
        head = f"[{one_line(msg.time)}] " if msg.time else ""
        speaker = one_line(msg.speaker)
        who = f"{speaker} ({one_line(msg.turn_id)})" if msg.turn_id else speaker
        lines = lines_of(msg.text.strip("\n\r")) or [""]
        out.append(f"{head}{who}: {lines[0]}".rstrip())
        out.extend(("    " + line).rstrip() for line in lines[1:])
    return "\n".join(out) + "\n"


def normalise_text(text: str) -> str:
    """Every line boundary becomes \\n (see ``lines_of``), and the text ends with one."""
    return "\n".join(lines_of(text)) + "\n"


def prepare_messages(
    messages: list[Message],
    source: str,
    scope: str,
    meta: dict[str, Any] | None = None,
    kind: str = "conversation",
    allow: Collection[str] = (),
    privacy: Privacy = DEFAULT_PRIVACY,
    detector: Detector | None = None,
) -> PreparedItem:
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
    refuse_secrets(content, source, allow, stored=True)
    content = redact_personal(content, meta, privacy, detector)
    return PreparedItem(evidence_id(kind, scope, content), kind, scope, content, clean_label(source), clean_meta(meta))


def prepare(
    data: bytes,
    name: str,
    kind: str,
    scope: str,
    source: str = "",
    meta: dict[str, Any] | None = None,
    allow: Collection[str] = (),
    privacy: Privacy = DEFAULT_PRIVACY,
    detector: Detector | None = None,
) -> PreparedItem:
    """Decode and normalise one input into its stored form. Pure: no effects (but the optional
    model ``detector``'s call). Content that
    looks like a secret (``kb.secrets``; ``allow``: reviewed fingerprints) is refused; the
    personal data that ``privacy`` masks is replaced by typed placeholders (``[CARD-1]``)."""
    if kind not in KINDS:
        raise UsageError(f"unknown evidence kind {kind!r}", hint=f"use one of: {', '.join(KINDS)}")
    suffix = Path(name).suffix.lower()
    if suffix in CONVERTED:
        text = convert_document(data, name)
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise FormatError(
                f"{name}: not UTF-8 text (byte {exc.start})", hint="convert the file to UTF-8 (PDF and HTML are converted by name)"
            ) from None
    if "\x00" in text:
        raise FormatError(f"{name}: contains NUL bytes: binary data, not text", hint="add a text export of it")
    meta = dict(meta or {})
    messages_read = kind in ("conversation", "trajectory") and suffix in (".json", ".jsonl")
    if messages_read:
        messages = parse_messages(text, name)
        content = render_messages(messages)
        times = sorted(m.time for m in messages if m.time)
        if times:
            meta.setdefault("first_time", times[0])
            meta.setdefault("last_time", times[-1])
        meta.setdefault("messages", len(messages))
    elif kind == "tool-output" and suffix == ".json":
        content = normalise_text(json.dumps(load_json(text, name), indent=2, sort_keys=True, ensure_ascii=False))
    else:
        if not text.strip():
            raise FormatError(f"{name}: empty file", hint="nothing to add")
        content = normalise_text(text)
    refuse_secrets(content, name, allow, stored=messages_read)
    content = redact_personal(content, meta, privacy, detector)
    return PreparedItem(evidence_id(kind, scope, content), kind, scope, content, clean_label(source or name), clean_meta(meta))
