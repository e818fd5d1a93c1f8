"""Markdown structure of a page body: sections and anchors, links, citations, claims.

markdown-it-py finds the blocks (so fenced and indented code never yields links, headings or
citations) and their source lines. Inside inline blocks, small patterns find wikilinks
(``[[page-id]]``, ``[[page-id#anchor]]``), relative Markdown links and footnote references.
Footnote definitions are citations: ``[^1]: ev-<hex>#L3-L4 "verbatim quote"``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

from markdown_it import MarkdownIt

# The citation format is kb.citations'; these names stay importable from here for older callers.
from kb.citations import FOOTDEF_RE, FOOTREF_RE, REFS_ONLY_RE, REFS_RUN_RE, Citation, parse_citation
from kb.citations import format_citation as format_citation

if TYPE_CHECKING:
    from markdown_it.token import Token

WIKILINK_RE = re.compile(r"\[\[([^\[\]|#\n]+?)(?:#([^\[\]|\n]+?))?(?:\|([^\[\]\n]*))?\]\]")
MDLINK_RE = re.compile(r"(?<![!\\])\[(?!\^)([^\[\]\n]*)\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# the closing token of a block that a paragraph of references may follow -> its opening token
BLOCK_CLOSERS = {
    "bullet_list_close": "bullet_list_open",
    "ordered_list_close": "ordered_list_open",
    "table_close": "table_open",
    "blockquote_close": "blockquote_open",
}
CODESPAN_RE = re.compile(r"(`+)(?:.|\n)*?\1")
# A sentence ends at terminal punctuation, with its footnote references; a closing quotation mark
# may stand between the two (`Jo said: "I moved."[^1]`), but only when references follow, so that
# a quoted sentence inside a sentence does not end it. References at the very end of a block stay
# with their sentence (Chinese text needs no space after 。, so this matters there). The period of
# "e.g.", "i.e.", "etc.", "vs." and "cf." ends no sentence.
SENTENCE_END_RE = re.compile(
    r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)(?<!\bcf)(?<!\bEg)[.!?。！？](?:[\"”’」』]*"
    + REFS_RUN_RE.pattern
    + r")?(?:\s+|\Z|(?=\S)(?<=[。！？\]]))|\n(?=\s*[-*+] )"
)


@dataclass(frozen=True)
class Section:
    level: int
    title: str
    anchor: str
    line: int  # 1-based file line of the heading
    end_line: int  # last line of the section (before the next heading of level <= this one)
    path: tuple[str, ...] = ()  # titles of enclosing headings, outermost first, this one last


@dataclass(frozen=True)
class Link:
    kind: Literal["wiki", "md"]
    target: str  # page id (wiki) or relative path (md), without the anchor
    anchor: str | None
    line: int


@dataclass(frozen=True)
class Claim:
    """A sentence (or list item) that carries footnote references; or a *block claim*: a code
    block, table, list, block quote or HTML block followed by a paragraph holding only footnote
    references, whose text is the block's source lines and ``block`` its file lines (first line
    of the block, line of the references)."""

    text: str
    line: int
    labels: tuple[str, ...]
    block: tuple[int, int] | None = None


@dataclass
class Structure:
    sections: list[Section] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)

    def section(self, anchor: str) -> Section | None:
        for section in self.sections:
            if section.anchor == anchor:
                return section
        return None

    @property
    def anchors(self) -> set[str]:
        return {s.anchor for s in self.sections}


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Inline parsing is left off: links, footnote references and claims are found by the
    # patterns above in each inline block's source text, which is all we need (and 3x faster).
    return MarkdownIt("commonmark").enable("table").disable("inline")


def slugify(text: str) -> str:
    """GitHub-style anchor: lower case, punctuation dropped, spaces to hyphens; CJK kept."""
    text = unicodedata.normalize("NFKC", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def unique_anchors(titles: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    anchors = []
    for title in titles:
        base = slugify(title)
        count = seen.get(base, 0)
        anchors.append(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return anchors


def _split_claims(content: str, first_line: int) -> list[Claim]:
    claims = []
    bounds = [0] + [m.end() for m in SENTENCE_END_RE.finditer(content)] + [len(content)]
    for start, end in pairwise(bounds):
        sentence = content[start:end]
        labels = tuple(FOOTREF_RE.findall(sentence))
        if labels:
            line = first_line + content.count("\n", 0, start)
            claims.append(Claim(text=" ".join(sentence.split()), line=line, labels=labels))
    return claims


def parse_structure(body: str, line_offset: int = 0) -> Structure:
    """Parse a page body; ``line_offset`` is the number of file lines before the body."""
    lines = body.splitlines()
    # Footnote definitions are read line by line below; blanking them (line count kept) spares
    # the block parser its slow link-reference handling of every citation.
    source = "\n".join("" if line.startswith("[^") and FOOTDEF_RE.match(line) else line for line in lines) if "[^" in body else body
    tokens = _parser().parse(source)
    structure = Structure()
    code_lines: set[int] = set()
    headings: list[tuple[int, str, int]] = []
    for i, tok in enumerate(tokens):
        if tok.type in ("fence", "code_block") and tok.map:
            code_lines.update(range(tok.map[0], tok.map[1]))
        elif tok.type == "heading_open" and tok.map:
            inline = tokens[i + 1]
            headings.append((int(tok.tag[1]), inline.content.strip(), tok.map[0]))
        elif tok.type == "inline" and tok.map and tokens[i - 1].type != "heading_open":
            before = _block_before(tokens, i - 1) if REFS_ONLY_RE.match(tok.content) else None
            if before is not None and before.map:
                start, end = before.map
                while end > start + 1 and not lines[end - 1].strip(" \t>"):
                    end -= 1  # a block's map can end on a blank (or quote-only) line
                text = "\n".join(lines[start:end])
                refs = tok.map[0] + 1 + line_offset
                structure.claims.append(
                    Claim(text, start + 1 + line_offset, tuple(FOOTREF_RE.findall(tok.content)), (start + 1 + line_offset, refs))
                )
                continue
            _scan_inline(tok.content, tok.map[0] + 1 + line_offset, structure)
    anchors = unique_anchors([title for _, title, _ in headings])
    total = len(lines)
    stack: list[tuple[int, str]] = []
    for n, ((level, title, start), anchor) in enumerate(zip(headings, anchors, strict=True)):
        end = total
        for later_level, _, later_start in headings[n + 1 :]:
            if later_level <= level:
                end = later_start
                break
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        structure.sections.append(Section(level, title, anchor, start + 1 + line_offset, end + line_offset, tuple(t for _, t in stack)))
    for idx, text in enumerate(lines):
        if idx in code_lines:
            continue
        match = FOOTDEF_RE.match(text)
        if match:
            structure.citations.append(parse_citation(match.group(1), idx + 1 + line_offset, match.group(2)))
    return structure


def _block_before(tokens: list[Token], opener: int) -> Token | None:
    """The block (code, table, list, quote, HTML) just before the paragraph opened at
    ``tokens[opener]`` in the same container, or None."""
    level = tokens[opener].level
    j = opener - 1
    while j >= 0 and tokens[j].level > level:
        j -= 1
    if j < 0 or tokens[j].level != level or tokens[opener].type != "paragraph_open":
        return None
    tok = tokens[j]
    if tok.type in ("fence", "code_block", "html_block"):
        return tok
    if tok.type in BLOCK_CLOSERS:
        for k in range(j, -1, -1):
            if tokens[k].level == level and tokens[k].type == BLOCK_CLOSERS[tok.type]:
                return tokens[k]
    return None


def _scan_inline(content: str, first_line: int, structure: Structure) -> None:
    if "[" not in content:
        return
    visible = CODESPAN_RE.sub(lambda m: " " * len(m.group(0)) if "\n" not in m.group(0) else re.sub(r"[^\n]", " ", m.group(0)), content)
    for match in WIKILINK_RE.finditer(visible):
        line = first_line + visible.count("\n", 0, match.start())
        anchor = match.group(2).strip() if match.group(2) else None
        structure.links.append(Link("wiki", match.group(1).strip(), anchor, line))
    for match in MDLINK_RE.finditer(visible):
        href = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) or href.startswith(("ev-", "/")):
            continue
        line = first_line + visible.count("\n", 0, match.start())
        target, _, anchor = href.partition("#")
        structure.links.append(Link("md", target, anchor or None, line))
    if "[^" in visible:
        structure.claims.extend(_split_claims(visible, first_line))
