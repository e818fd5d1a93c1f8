"""Progressive disclosure: read a page level by level, read one section, grep pages.

These are the no-vector navigation tools (``read_doc``, ``read_section``, ``grep_docs``) that
agents, the CLI and the Python API share. They read git objects of one commit (default HEAD),
never the working tree, and every lookup is scoped to a principal: another user's page is
reported exactly like a page that does not exist.

Long text comes back in bounded pieces (``max_tokens``) with a cursor, ``"<line>"`` or
``"<line>:<char>"`` (1-based file line, character offset inside it), to pass back for the rest.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from kb.citations import FOOTDEF_RE
from kb.errors import FormatError, NotFoundError, UsageError
from kb.forgotten import is_hidden, load_denied
from kb.page import OVERVIEW_HEADING, Page, page_id_for_path, parse_page
from kb.repo import Repo
from kb.scopes import SYSTEM, USERS_DIR, can_read, parse_principal, readable_folders, scope_for_path
from kb.tokens import count_tokens

if TYPE_CHECKING:
    import pygit2

LEVELS = ("L0", "L1", "L2")
DEFAULT_MAX_TOKENS = 1000
MAX_GREP_HITS = 200
MAX_PATTERN_CHARS = 1000
REGEX_SECONDS = 2.0  # one grep's time for a regular expression, all lines together
_CURSOR_RE = re.compile(r"^(\d+)(?::(\d+))?$")


@dataclass(frozen=True)
class OutlineEntry:
    level: int
    title: str
    anchor: str
    line: int
    end_line: int
    tokens: int


@dataclass(frozen=True)
class PageView:
    id: str
    path: str
    commit: str
    title: str
    summary: str  # L0
    type: str
    status: str
    scope: str
    valid_from: str
    valid_to: str
    level: str  # L0 | L1 | L2 | section
    tokens: int  # size of the whole body
    outline: tuple[OutlineEntry, ...]
    anchor: str = ""  # the section read, when reading a section
    text: str = ""  # bounded text of the level or section ('' at L0)
    line_start: int = 0
    line_end: int = 0
    next_cursor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GrepHit:
    page: str
    path: str
    anchor: str
    line: int
    text: str


@dataclass(frozen=True)
class GrepResult:
    commit: str
    hits: tuple[GrepHit, ...]
    truncated: bool
    unsearched_users: int = 0  # users whose pages exist but the principal may not read (not searched)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- locating pages -----------------------------------------------------------------------


def _commit(repo: Repo, commit: str | None) -> pygit2.Commit:
    target = repo.resolve(commit) if commit else repo.head()
    if target is None:
        raise NotFoundError("the repository has no commits yet", hint="commit something first (`kb evidence add FILE`)")
    return target


def page_path(page: str) -> str:
    """``knowledge/a`` or ``knowledge/a.md`` (or ``knowledge/a#anchor``) -> ``knowledge/a.md``."""
    name = page.strip().split("#", 1)[0].strip("/")
    return name if name.endswith(".md") else name + ".md"


def load_page(repo: Repo, page: str, principal: str = SYSTEM, commit: str | None = None) -> tuple[Page, str]:
    """The page at ``commit`` if ``principal`` may read it; NotFoundError otherwise (same message)."""
    scopes = parse_principal(principal)
    target = _commit(repo, commit)
    path = page_path(page)
    data = repo.read_at(target, path) if can_read(scopes, scope_for_path(path)) and ".." not in path.split("/") else None
    if data is not None and is_hidden(repo, path, data):
        data = None  # being forgotten: as absent as another user's page
    if data is None:
        raise NotFoundError(f"no page {page!r} at commit {str(target.id)[:12]}", hint="find pages with `kb search` or `kb grep`")
    return parse_page(data, path), str(target.id)


def _outline(page: Page) -> tuple[OutlineEntry, ...]:
    lines = page.body.splitlines()
    out = []
    for s in page.structure.sections:
        text = "\n".join(lines[s.line - page.header_lines - 1 : s.end_line - page.header_lines])
        out.append(OutlineEntry(s.level, s.title, s.anchor, s.line, s.end_line, count_tokens(text)))
    return tuple(out)


# ---- bounded text -------------------------------------------------------------------------


def parse_cursor(cursor: str | None) -> tuple[int, int] | None:
    if cursor is None or cursor == "":
        return None
    match = _CURSOR_RE.match(cursor.strip())
    if not match:
        raise UsageError(f"invalid cursor {cursor!r}", hint="pass back the cursor a previous read returned, e.g. 42 or 42:180")
    return int(match.group(1)), int(match.group(2) or 0)


def _prefix_fitting(text: str, budget: int) -> int:
    """Length of the longest prefix of ``text`` within ``budget`` tokens (at least 1 char)."""
    lo, hi = 1, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def bounded(numbered: list[tuple[int, str]], cursor: str | None, max_tokens: int) -> tuple[str, int, int, str | None]:
    """Up to ``max_tokens`` of numbered lines from ``cursor``: (text, first, last, next cursor)."""
    if max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1", hint="pass --max-tokens N with N >= 1")
    if not numbered:
        return "", 0, 0, None
    start_line, start_char = parse_cursor(cursor) or (numbered[0][0], 0)
    index = next((i for i, (n, _) in enumerate(numbered) if n == start_line), None)
    if index is None or start_char > len(numbered[index][1]):
        raise UsageError(
            f"cursor {cursor!r} is outside this text (lines {numbered[0][0]}-{numbered[-1][0]})", hint="start again without --cursor"
        )
    pieces: list[str] = []
    used = 0
    last = start_line
    for i in range(index, len(numbered)):
        number, line = numbered[i]
        part = line[start_char:] if i == index else line
        cost = count_tokens(part) + 1
        if used + cost > max_tokens:
            if pieces:
                return "\n".join(pieces), start_line, last, str(number)
            cut = _prefix_fitting(part, max_tokens)
            offset = (start_char if i == index else 0) + cut
            return part[:cut], start_line, number, f"{number}:{offset}"
        pieces.append(part)
        used += cost
        last = number
    return "\n".join(pieces), start_line, last, None


def _numbered(page: Page, first: int, last: int) -> list[tuple[int, str]]:
    """File lines ``first``..``last`` of the body, numbered, without blank lines at either end."""
    lines = page.body.splitlines()
    base = page.header_lines
    numbered = [(n, lines[n - base - 1]) for n in range(max(first, base + 1), min(last, base + len(lines)) + 1)]
    while numbered and not numbered[-1][1].strip():
        numbered.pop()
    start = 0
    while start < len(numbered) and not numbered[start][1].strip():
        start += 1
    return numbered[start:]


# ---- public API ---------------------------------------------------------------------------


def _view(page: Page, commit: str, level: str, **extra: Any) -> PageView:
    meta = page.meta
    return PageView(
        id=page_id_for_path(page.path),
        path=page.path,
        commit=commit,
        title=page.title,
        summary=page.summary,
        type=str(meta.get("type") or ""),
        status=page.status,
        scope=scope_for_path(page.path) or "",
        valid_from=str(meta.get("valid_from") or ""),
        valid_to=str(meta.get("valid_to") or ""),
        level=level,
        tokens=count_tokens(page.body),
        outline=_outline(page),
        **extra,
    )


def read_page(
    repo: Repo,
    page: str,
    principal: str = SYSTEM,
    commit: str | None = None,
    level: str = "L0",
    cursor: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> PageView:
    """L0: summary and outline (anchors, lines, token sizes). L1: plus the Overview section
    (the whole body when the page has none). L2: the whole body. Text is bounded, with a cursor."""
    if level not in LEVELS:
        raise UsageError(f"unknown level {level!r}", hint="use L0, L1 or L2")
    parsed, sha = load_page(repo, page, principal, commit)
    if level == "L0":
        return _view(parsed, sha, level)
    first, last = parsed.header_lines + 1, parsed.header_lines + len(parsed.body.splitlines())
    if level == "L1":
        overview = next((s for s in parsed.structure.sections if s.level == 2 and s.title.strip() == OVERVIEW_HEADING), None)
        if overview is not None:
            first, last = overview.line + 1, overview.end_line
    text, start, end, nxt = bounded(_numbered(parsed, first, last), cursor, max_tokens)
    return _view(parsed, sha, level, text=text, line_start=start, line_end=end, next_cursor=nxt)


def read_section(
    repo: Repo,
    page: str,
    anchor: str,
    principal: str = SYSTEM,
    commit: str | None = None,
    cursor: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> PageView:
    """One section (heading and subsections included), bounded, with a cursor for the rest."""
    parsed, sha = load_page(repo, page, principal, commit)
    section = parsed.structure.section(anchor.lstrip("#"))
    if section is None:
        raise NotFoundError(
            f"page {page_id_for_path(parsed.path)!r} has no section #{anchor.lstrip('#')}", hint="list its sections with `kb read PAGE`"
        )
    text, start, end, nxt = bounded(_numbered(parsed, section.line, section.end_line), cursor, max_tokens)
    return _view(parsed, sha, "section", anchor=section.anchor, text=text, line_start=start, line_end=end, next_cursor=nxt)


def _anchor_at(page: Page | None, line: int) -> str:
    if page is None:
        return ""
    best = ""
    for s in page.structure.sections:
        if s.line <= line <= s.end_line:
            best = s.anchor  # sections come in document order: the last match is the innermost
    return best


def _line_matcher(pattern: str, regex: bool, ignore_case: bool) -> Callable[[str], bool]:
    """A test for one line. A regular expression runs under the ``regex`` engine's timeout, one
    deadline for the whole grep: patterns like ``(a|aa)+$`` backtrack exponentially, and no
    syntactic rule (nested quantifiers, say) catches every such pattern, whereas a time bound
    does. The engine reads Python's syntax (``VERSION0``)."""
    if not pattern:
        raise UsageError("empty pattern", hint="give the text to look for")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UsageError(f"a pattern of {len(pattern):,} characters is over the limit of {MAX_PATTERN_CHARS:,}", hint="search for less")
    if not regex:
        needle = pattern.casefold() if ignore_case else pattern
        return (lambda line: needle in line.casefold()) if ignore_case else (lambda line: needle in line)
    import regex as engine

    try:
        compiled = engine.compile(pattern, engine.VERSION0 | (engine.IGNORECASE if ignore_case else 0))
    except (engine.error, OverflowError, RecursionError) as exc:
        raise UsageError(f"invalid regular expression {pattern!r} ({exc})", hint="fix it, or drop --regex for a literal search") from None
    deadline = time.monotonic() + REGEX_SECONDS

    def matches(line: str) -> bool:
        try:
            return compiled.search(line, timeout=max(deadline - time.monotonic(), 0.001)) is not None
        except TimeoutError:
            raise UsageError(
                f"the regular expression took longer than {REGEX_SECONDS:g} s and was stopped",
                hint="simplify it: nested or overlapping repetition such as (a|aa)+ backtracks without end",
            ) from None

    return matches


def grep(
    repo: Repo,
    pattern: str,
    principal: str = SYSTEM,
    commit: str | None = None,
    page: str | None = None,
    regex: bool = False,
    ignore_case: bool = False,
    max_hits: int = MAX_GREP_HITS,
) -> GrepResult:
    """Lines of the principal's pages matching ``pattern`` (literal, or a Python regex)."""
    matches_line = _line_matcher(pattern, regex, ignore_case)
    scopes = parse_principal(principal)
    target = _commit(repo, commit)
    if page is not None:
        parsed, _ = load_page(repo, page, principal, str(target.id))
        files = {parsed.path: target.tree[parsed.path].id}
        unsearched = 0
    else:
        tree = repo.tree_files(target, readable_folders(scopes))
        files = {p: o for p, o in tree.items() if p.endswith(".md") and can_read(scopes, scope_for_path(p))}
        unsearched = _other_users(repo, target, scopes)
    denied = load_denied(repo)
    files = {p: o for p, o in files.items() if not denied.hides_path(p)}
    hits: list[GrepHit] = []
    for path in sorted(files):
        data = repo.read_blob(files[path])
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        matches = [(n, line) for n, line in enumerate(text.splitlines(), 1) if matches_line(line) and not denied.hides_text(line)]
        if not matches:
            continue
        try:
            parsed_page: Page | None = parse_page(text, path)
        except FormatError:  # a malformed page is still greppable, without anchors
            parsed_page = None
        for number, line in matches:
            if len(hits) >= max_hits:
                return GrepResult(str(target.id), tuple(hits), True, unsearched)
            hits.append(GrepHit(page_id_for_path(path), path, _anchor_at(parsed_page, number), number, line))
    return GrepResult(str(target.id), tuple(hits), False, unsearched)


def _other_users(repo: Repo, target: pygit2.Commit, scopes: tuple[str, ...]) -> int:
    """How many users have pages at ``target`` that a principal with ``scopes`` may not read."""
    users = {scope_for_path(p) for p in repo.tree_files(target, (USERS_DIR,)) if p.endswith(".md")}
    return sum(1 for scope in users if scope is not None and not can_read(scopes, scope))


def footnote_definitions(repo: Repo, page: str, principal: str = SYSTEM, commit: str | None = None) -> dict[str, str]:
    """The footnote definitions of ``page`` (label -> what follows the colon: the cited span
    and quote), for showing a passage's citations apart from its text."""
    parsed, _ = load_page(repo, page, principal, commit)
    found = (FOOTDEF_RE.match(line.strip()) for line in parsed.body.splitlines())
    return {m.group(1): m.group(2) for m in found if m}
