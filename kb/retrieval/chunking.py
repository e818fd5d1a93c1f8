"""Chunking: pages and evidence items cut into retrieval units along their structure.

A page body is cut into sections at its headings; inside a section, top-level Markdown blocks
(paragraphs, lists, tables, code, quotes) are packed greedily up to ``bound`` tokens and kept
whole when they fit; a paragraph stays with the code, table or list it introduces, and a block
with the footnote references that cite it, when they fit together. An outline (a list of links
to the page's own sections) is navigation and stays out of the chunk text. A block that does not fit is split along its own seams (sentences for a
paragraph, lines for the rest; a table piece repeats the header row), with ``overlap`` tokens
carried between consecutive pieces; a run with no seam at all is cut into token windows. Every
step consumes input, so chunking terminates on any text.

Each chunk keeps its context (page title, section path, the page's L0 summary), which goes
into both indexes, so "the company grew 3%" is found by a query that names the company.
Evidence items are chunked too: conversations by whole messages (each line keeps its time and
speaker), documents like pages. Chunk ids are stable: ``<doc>#<anchor>~<n>``.

``CHUNKER_VERSION`` is recorded in manifests: bump it whenever the output for the same input
changes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from kb.citations import REFS_ONLY_RE
from kb.markdown import unique_anchors
from kb.page import Page, page_id_for_path
from kb.tokens import count_tokens

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

CHUNKER_VERSION = "kb-chunker/3"
PAGE = "page"
EVIDENCE = "evidence"

_SENTENCE_RE = re.compile(r"(?<=[.!?;:])\s+|(?<=[。！？；])")
_MESSAGE_HEAD_RE = re.compile(r"^((?:\[[^\]\n]*\]\s*)?[^:\n]{1,120}?):\s")
# an item of an outline: only a link to an anchor of the same page (a list of them is navigation:
# the sections it names are chunks of their own, so it is left out of the chunk text)
_NAVIGATION_ITEM_RE = re.compile(r"^\s*[-*+]\s+\[[^\]]+\]\(#[^)\s]+\)\s*$|^\s*$")
_REFERENCES_ONLY_RE = REFS_ONLY_RE
_INTRODUCED = ("fence", "code_block", "table_open", "bullet_list_open", "ordered_list_open")
_LINE_KINDS = ("bullet_list_open", "ordered_list_open", "table_open", "blockquote_open", "fence", "code_block", "html_block")


@dataclass(frozen=True)
class Chunk:
    """One retrieval unit. Lines are 1-based file lines of the source document."""

    id: str
    doc: str  # page id, or evidence id
    namespace: str  # PAGE | EVIDENCE
    anchor: str  # section anchor ('' before the first heading and for conversations)
    line_start: int
    line_end: int
    title: str
    headings: tuple[str, ...]
    summary: str
    body: str

    @property
    def text(self) -> str:
        """The text that is embedded: the context lines, then the body."""
        context = [self.title, " > ".join(self.headings), self.summary]
        return "\n".join([c for c in context if c] + [self.body])

    @property
    def content_hash(self) -> str:
        """Hash of everything that is indexed for this chunk (both indexes)."""
        parts = [self.title, "\x1f".join(self.headings), self.summary, self.body]
        return hashlib.sha256("\x1e".join(parts).encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class _Unit:
    text: str
    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class _Block:
    kind: str
    lines: tuple[str, ...]
    start: int  # 1-based file line of lines[0]


@dataclass(frozen=True)
class _Section:
    anchor: str
    path: tuple[str, ...]
    blocks: tuple[_Block, ...]


# ---- Markdown structure -------------------------------------------------------------------


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    # Only block structure is needed; inline parsing was half of the chunking time.
    return MarkdownIt("commonmark").enable("table").disable(["inline", "text_join"])


def _sections(body: str, line_offset: int) -> list[_Section]:
    """Top-level blocks of ``body`` grouped under the heading that precedes them.

    Anchors are numbered over every heading, nested ones included, exactly as
    ``kb.markdown.parse_structure`` does, so chunk anchors match page anchors.
    """
    lines = body.splitlines()
    tokens = _parser().parse(body)
    titles = [tokens[i + 1].content.strip() for i, t in enumerate(tokens) if t.type == "heading_open"]
    anchors = iter(unique_anchors(titles))
    stack: list[tuple[int, str]] = []
    anchor = ""
    path: tuple[str, ...] = ()
    out: list[_Section] = []
    pending: list[_Block] = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            next_anchor = next(anchors)
            if tok.level != 0:
                continue
            if pending:
                out.append(_Section(anchor, path, tuple(pending)))
                pending = []
            level = int(tok.tag[1])
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, tokens[i + 1].content.strip()))
            anchor, path = next_anchor, tuple(title for _, title in stack)
            continue
        if tok.level != 0 or tok.nesting < 0 or not tok.map:
            continue
        start, end = tok.map
        block_lines = lines[start:end]
        while block_lines and not block_lines[-1].strip():
            block_lines.pop()
        if block_lines and not (tok.type == "bullet_list_open" and all(_NAVIGATION_ITEM_RE.match(line) for line in block_lines)):
            pending.append(_Block(tok.type, tuple(block_lines), start + 1 + line_offset))
    if pending:
        out.append(_Section(anchor, path, tuple(pending)))
    return out


# ---- splitting and packing ----------------------------------------------------------------


def _bounds(bound: int, overlap: int) -> tuple[int, int]:
    bound = max(8, bound)
    return bound, max(0, min(overlap, bound // 2))


def _windows(text: str, bound: int, overlap: int) -> list[str]:
    """Cut text with no usable seam into pieces of <= bound tokens, ``overlap`` tokens shared.

    Binary searches over character positions with the real tokenizer; each piece ends
    strictly after the previous one, so the loop ends.
    """
    pieces: list[str] = []
    start = 0
    n = len(text)
    while start < n:
        lo, hi = start + 1, n
        while lo < hi:  # the longest prefix from ``start`` that fits
            mid = (lo + hi + 1) // 2
            if count_tokens(text[start:mid]) <= bound:
                lo = mid
            else:
                hi = mid - 1
        end = lo
        pieces.append(text[start:end])
        if end >= n:
            break
        nxt = end
        if overlap:
            lo, hi = start + 1, end  # the earliest start whose tail up to ``end`` fits the overlap
            while lo < hi:
                mid = (lo + hi) // 2
                if count_tokens(text[mid:end]) <= overlap:
                    hi = mid
                else:
                    lo = mid + 1
            nxt = lo
        start = max(nxt, start + 1)
    return pieces


def _group(units: list[_Unit], bound: int, overlap: int, joiner: str) -> list[_Unit]:
    """Pack units greedily up to ``bound``; carry trailing units worth <= ``overlap`` tokens."""
    groups: list[_Unit] = []
    current: list[_Unit] = []
    size = 0
    fresh = False  # does ``current`` hold a unit not yet emitted?
    for unit in units:
        if current and size + unit.tokens + 1 > bound:
            if fresh:
                groups.append(_merge(current, joiner))
            carried: list[_Unit] = []
            carried_size = 0
            for prev in reversed(current):
                if carried_size + prev.tokens + 1 > overlap:
                    break
                carried.insert(0, prev)
                carried_size += prev.tokens + 1
            if carried_size + unit.tokens + 1 > bound:
                carried, carried_size = [], 0
            current, size, fresh = carried, carried_size, False
        current.append(unit)
        size += unit.tokens + 1
        fresh = True
    if current and fresh:
        groups.append(_merge(current, joiner))
    return groups


def _merge(units: list[_Unit], joiner: str) -> _Unit:
    text = joiner.join(u.text for u in units)
    return _Unit(text, units[0].start, units[-1].end, sum(u.tokens for u in units) + len(units) - 1)


def _line_units(lines: Iterable[str], first: int) -> list[_Unit]:
    return [_Unit(line, first + i, first + i, count_tokens(line)) for i, line in enumerate(lines) if line.strip()]


def _sentence_units(text: str, first: int) -> list[_Unit]:
    units = []
    pos = 0
    for piece in _SENTENCE_RE.split(text):
        at = text.find(piece, pos)
        pos = at + len(piece)
        if piece.strip():
            line = first + text.count("\n", 0, at)
            units.append(_Unit(piece.strip(), line, line + piece.count("\n"), count_tokens(piece.strip())))
    return units


def _fit(units: list[_Unit], bound: int, overlap: int) -> list[_Unit]:
    """Replace every unit longer than ``bound`` by token windows."""
    out = []
    for unit in units:
        if unit.tokens <= bound:
            out.append(unit)
        else:
            out.extend(_Unit(w, unit.start, unit.end, count_tokens(w)) for w in _windows(unit.text, bound, overlap))
    return out


def _split_block(block: _Block, bound: int, overlap: int) -> list[_Unit]:
    if block.kind == "table_open" and len(block.lines) > 2:
        header = "\n".join(block.lines[:2])
        head_tokens = count_tokens(header) + 1
        if head_tokens <= bound // 2:
            room = bound - head_tokens
            rows = _group(_fit(_line_units(block.lines[2:], block.start + 2), room, overlap), room, overlap, "\n")
            return [
                _Unit(header + "\n" + g.text, block.start if i == 0 else g.start, g.end, g.tokens + head_tokens) for i, g in enumerate(rows)
            ]
    if block.kind in _LINE_KINDS:
        units = _line_units(block.lines, block.start)
        return _group(_fit(units, bound, overlap), bound, overlap, "\n")
    units = _sentence_units("\n".join(block.lines), block.start)
    return _group(_fit(units, bound, overlap), bound, overlap, " ")


def _block_units(block: _Block, bound: int, overlap: int) -> list[_Unit]:
    text = "\n".join(block.lines)
    tokens = count_tokens(text)
    if tokens <= bound:
        return [_Unit(text, block.start, block.start + len(block.lines) - 1, tokens)]
    return _split_block(block, bound, overlap)


def _glued(blocks: Iterable[_Block]) -> list[list[list[_Block]]]:
    """Blocks in groups that a chunk boundary should not cut: a paragraph and the code, table
    or list right after it (the sentence that introduces it), each with the paragraphs of bare
    footnote references that follow (the citation of the block). A group is a list of cores; a
    core is a block with its references."""
    cores: list[list[_Block]] = []
    for block in blocks:
        if cores and block.kind == "paragraph_open" and _REFERENCES_ONLY_RE.match(" ".join(block.lines)):
            cores[-1].append(block)
        else:
            cores.append([block])
    groups: list[list[list[_Block]]] = []
    for core in cores:
        previous = groups[-1] if groups else None
        if previous is not None and len(previous) == 1 and previous[0][0].kind == "paragraph_open" and core[0].kind in _INTRODUCED:
            previous.append(core)
        else:
            groups.append([core])
    return groups


def _pack_blocks(blocks: Iterable[_Block], bound: int, overlap: int) -> list[_Unit]:
    """Blocks packed greedily up to ``bound``; a group of ``_glued`` (or failing that, each of
    its cores) that fits in a chunk starts a new chunk rather than being cut."""
    chunks: list[_Unit] = []
    current: list[_Unit] = []
    size = 0

    def add(units: list[_Unit], whole: bool) -> None:
        nonlocal size
        total = sum(u.tokens + 1 for u in units)
        for unit in units:
            if current and size + (total if whole else unit.tokens + 1) > bound:
                chunks.append(_merge(current, "\n\n"))
                current.clear()
                size = 0
            whole = False  # the group's room was checked once, before its first unit
            current.append(unit)
            size += unit.tokens + 1

    for group in _glued(blocks):
        cores = [[u for block in core for u in _block_units(block, bound, overlap)] for core in group]
        if len(cores) > 1 and sum(u.tokens + 1 for core in cores for u in core) <= bound:
            add([u for core in cores for u in core], whole=True)
            continue
        for core in cores:
            add(core, whole=sum(u.tokens + 1 for u in core) <= bound)
    if current:
        chunks.append(_merge(current, "\n\n"))
    return chunks


# ---- documents ----------------------------------------------------------------------------


def _chunks_of(
    doc: str,
    namespace: str,
    title: str,
    summary: str,
    sections: Iterable[tuple[str, tuple[str, ...], list[_Unit]]],
) -> list[Chunk]:
    out = []
    for anchor, path, units in sections:
        for n, unit in enumerate(units):
            out.append(Chunk(f"{doc}#{anchor}~{n}", doc, namespace, anchor, unit.start, unit.end, title, path, summary, unit.text))
    return out


def chunk_markdown(
    doc: str, namespace: str, title: str, summary: str, body: str, line_offset: int, bound: int, overlap: int
) -> list[Chunk]:
    """Chunks of a Markdown body whose first line is file line ``line_offset + 1``."""
    bound, overlap = _bounds(bound, overlap)
    merged: dict[str, tuple[tuple[str, ...], list[_Block]]] = {}
    for section in _sections(body, line_offset):
        merged.setdefault(section.anchor, (section.path, []))[1].extend(section.blocks)
    return _chunks_of(doc, namespace, title, summary, ((a, p, _pack_blocks(b, bound, overlap)) for a, (p, b) in merged.items()))


def chunk_page(page: Page, bound: int, overlap: int) -> list[Chunk]:
    """Chunks of a knowledge page (keyed by its path-derived id); context: title and L0."""
    return chunk_markdown(page_id_for_path(page.path), PAGE, page.title, page.summary, page.body, page.header_lines, bound, overlap)


def _messages(content: str) -> list[_Unit]:
    """One unit per message: a head line plus its indented continuation lines."""
    units: list[_Unit] = []
    lines = content.splitlines()
    for number, line in enumerate(lines, 1):
        if units and (line.startswith("    ") or not line.strip()):
            last = units[-1]
            units[-1] = _Unit(last.text + "\n" + line, last.start, number, 0)
        elif line.strip():
            units.append(_Unit(line, number, number, 0))
    return [_Unit(u.text.rstrip(), u.start, u.end, count_tokens(u.text)) for u in units]


def _split_message(unit: _Unit, bound: int, overlap: int) -> list[_Unit]:
    """A message longer than ``bound``: pieces that each repeat its ``[time] speaker:`` head."""
    match = _MESSAGE_HEAD_RE.match(unit.text)
    head = match.group(1) + ": " if match else ""
    rest = unit.text[len(head) :] if head else unit.text
    head_tokens = count_tokens(head)
    inner = _sentence_units(rest, unit.start)
    pieces = _group(_fit(inner, bound - head_tokens, overlap), bound - head_tokens, overlap, " ")
    return [_Unit(head + p.text, p.start, p.end, p.tokens + head_tokens) for p in pieces]


def chunk_conversation(doc: str, title: str, content: str, bound: int, overlap: int) -> list[Chunk]:
    """Chunks of a stored conversation: whole messages, speaker and time kept on every line."""
    bound, overlap = _bounds(bound, overlap)
    units: list[_Unit] = []
    for message in _messages(content):
        units.extend([message] if message.tokens <= bound else _split_message(message, bound, overlap))
    return _chunks_of(doc, EVIDENCE, title, "", [("", (), _group(units, bound, overlap, "\n"))])


def chunk_lines(doc: str, title: str, content: str, bound: int, overlap: int) -> list[Chunk]:
    """Chunks of line-oriented text (tool output): whole lines, overlapping by lines."""
    bound, overlap = _bounds(bound, overlap)
    units = _fit(_line_units(content.splitlines(), 1), bound, overlap)
    return _chunks_of(doc, EVIDENCE, title, "", [("", (), _group(units, bound, overlap, "\n"))])


def chunk_evidence(evidence_id: str, kind: str, title: str, content: str, bound: int, overlap: int) -> list[Chunk]:
    """Chunks of one evidence item, by its kind."""
    chunkers: dict[str, Callable[[], list[Chunk]]] = {
        "conversation": lambda: chunk_conversation(evidence_id, title, content, bound, overlap),
        "trajectory": lambda: chunk_conversation(evidence_id, title, content, bound, overlap),
        "tool-output": lambda: chunk_lines(evidence_id, title, content, bound, overlap),
    }
    if kind in chunkers:
        return chunkers[kind]()
    return chunk_markdown(evidence_id, EVIDENCE, title, "", content, 0, bound, overlap)
