"""Knowledge pages: frontmatter + Markdown, parsed and rendered canonically.

A page is ``---\\n<YAML header>---\\n<Markdown body>``. Parsing keeps the body bytes untouched;
rendering writes the header in one canonical shape (fixed key order, flow lists, plain scalars
where YAML reads them back unchanged), so ``render_page(parse_page(t)) == t`` for canonical files.
Typing rules live in ``ci.rules.frontmatter``; this module only reads and writes.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import yaml

from kb.errors import FormatError
from kb.markdown import Structure, parse_structure
from kb.yamltext import YamlProblem, load_yaml

FIELD_ORDER = (
    "id",
    "type",
    "title",
    "summary",
    "scope",
    "status",
    "valid_from",
    "valid_to",
    "supersedes",
    "superseded_by",
    "sources",
    "origin",
    "verified",
    "tags",
    "facts",
)
PAGE_TYPES = ("fact", "preference", "profile", "event", "rule", "procedure", "summary", "index", "topic", "timeline", "entity")
STATUSES = ("draft", "active", "disputed", "deprecated")
OVERVIEW_HEADING = "Overview"

_FENCE = "---\n"
MAX_HEADER_BYTES = 256 * 1024  # a page header is fields, not content


@dataclass(frozen=True)
class Page:
    """One parsed page. ``path`` is repository-relative POSIX, e.g. ``knowledge/a/b.md``."""

    path: str
    meta: dict[str, Any]
    body: str
    header_lines: int  # lines taken by the frontmatter block, fences included
    meta_lines: dict[str, int] = field(default_factory=dict)  # key -> 1-based file line

    @property
    def id(self) -> str:
        return str(self.meta.get("id") or "")

    @property
    def title(self) -> str:
        return str(self.meta.get("title") or "")

    @property
    def summary(self) -> str:
        return str(self.meta.get("summary") or "")

    @property
    def scope(self) -> str:
        return str(self.meta.get("scope") or "")

    @property
    def status(self) -> str:
        return str(self.meta.get("status") or "active")

    @cached_property
    def structure(self) -> Structure:
        return parse_structure(self.body, line_offset=self.header_lines)

    def overview(self) -> str:
        """The L1 text: the body of the ``## Overview`` section, or '' if there is none."""
        for section in self.structure.sections:
            if section.level == 2 and section.title.strip() == OVERVIEW_HEADING:
                return self.section_text(section.anchor, include_heading=False)
        return ""

    def section_text(self, anchor: str, include_heading: bool = True) -> str:
        section = self.structure.section(anchor)
        if section is None:
            return ""
        lines = self.body.splitlines(keepends=True)
        start = section.line - self.header_lines - (0 if include_heading else -1) - 1
        end = section.end_line - self.header_lines
        return "".join(lines[start:end]).strip("\n")


def page_id_for_path(path: str) -> str:
    """``knowledge/a/b.md`` -> ``knowledge/a/b``."""
    return path[:-3] if path.endswith(".md") else path


def _normalise(value: Any) -> Any:
    """YAML dates and datetimes become ISO strings so pages compare and render as text."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None and value.utcoffset() == dt.timedelta(0):
            return value.replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {_key(k): _normalise(v) for k, v in value.items()}
    return value


def _key(key: Any) -> str:
    """Keys are text; a date or time key reads as its ISO form, like a value."""
    return str(_normalise(key)) if isinstance(key, dt.date) else str(key)


def parse_page(text: str | bytes, path: str) -> Page:
    """Parse a page; malformed frontmatter is a FormatError naming the path and line."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"not UTF-8 text (byte {exc.start})", hint="re-save the file as UTF-8", path=path) from None
    if not text.startswith(_FENCE):
        raise FormatError("missing frontmatter (a page starts with a `---` line)", hint="see docs/format.md", path=path, line=1)
    end = text.find("\n---\n", 3)
    if end == -1:
        if text.endswith("\n---"):
            end = len(text) - 4
        else:
            raise FormatError("frontmatter is not closed by a `---` line", hint="see docs/format.md", path=path, line=1)
    header = text[4 : end + 1]
    body = text[end + 5 :]
    try:
        meta_raw = load_yaml(header, MAX_HEADER_BYTES) if header.strip() else {}
    except YamlProblem as exc:
        raise FormatError(
            exc.message.replace("malformed YAML", "malformed YAML frontmatter", 1)
            if exc.message.startswith("malformed")
            else f"frontmatter: {exc.message}",
            hint="fix the header; see docs/format.md",
            path=path,
            line=exc.line + 1 if exc.line else 1,
        ) from None
    if not isinstance(meta_raw, dict):
        raise FormatError(
            "frontmatter must be a mapping of fields", hint="write `key: value` lines between the two `---` lines", path=path, line=2
        )
    meta = {_key(k): _normalise(v) for k, v in meta_raw.items()}
    meta_lines: dict[str, int] = {}
    for offset, line in enumerate(header.splitlines(), start=2):
        key = line.split(":", 1)[0]
        if key and not key.startswith((" ", "#", "-")) and key in meta:
            meta_lines.setdefault(key, offset)
    header_lines = header.count("\n") + 2
    return Page(path=path, meta=meta, body=body, header_lines=header_lines, meta_lines=meta_lines)


# ---- rendering -------------------------------------------------------------------------

# Characters written as escapes inside double quotes: C0 and C1 controls, DEL, the line and
# paragraph separators (YAML reads NEL, LS and PS as line breaks and folds them), the BOM and
# the non-characters YAML does not allow raw.
_ESCAPED = re.compile('[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff"\\\\]')
_NOT_PLAIN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
_SHORT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\x85": "\\N", "\u2028": "\\L", "\u2029": "\\P"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    return _SHORT_ESCAPES.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar that reads back as exactly ``text``."""
    return '"' + _ESCAPED.sub(_escape, text) + '"'


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    # YAML 1.1 reads a float only with a dot and a signed exponent: 1e+16 would be text
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent if exponent[0] in '+-' else '+' + exponent}"
    return text


def _scalar(value: Any, in_flow: bool = False) -> str:
    if value is None:
        return "null" if in_flow else ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    text = str(value)
    return text if _is_plain_safe(text, in_flow) else _quoted(text)


def _is_plain_safe(text: str, in_flow: bool = False) -> bool:
    """Whether ``text`` written plain reads back as itself (dates as kb normalises them),
    asked of the YAML parser itself, in a flow list when it will stand in one."""
    if not text or text != text.strip() or _NOT_PLAIN.search(text) or text[0] in "!&*?|>'\"%@`#-[]{},":
        return False
    try:
        loaded = yaml.safe_load(f"[{text}]" if in_flow else text)
    except (yaml.YAMLError, ValueError, RecursionError):
        return False
    return _normalise(loaded) == ([text] if in_flow else text)


def _value(value: Any, in_flow: bool = False) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_value(v, True) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_scalar(str(k), True)}: {_value(v, True)}" for k, v in value.items()) + "}"
    return _scalar(value, in_flow)


def render_frontmatter(meta: dict[str, Any]) -> str:
    keys = [k for k in FIELD_ORDER if k in meta] + sorted(k for k in meta if k not in FIELD_ORDER)
    lines = []
    for key in keys:
        rendered = _value(meta[key])
        lines.append(f"{_scalar(str(key))}: {rendered}".rstrip() + "\n")
    return _FENCE + "".join(lines) + _FENCE


def render_page(meta: dict[str, Any], body: str) -> str:
    return render_frontmatter(meta) + body


def render(page: Page) -> str:
    return render_page(page.meta, page.body)
