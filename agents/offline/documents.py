"""Documents to pages for the offline Proposer: one faithful page per source file, no model.

A stored document (``kb evidence add`` keeps it verbatim, so its line numbers never change) is
read with markdown-it for its structure, and rendered as one page under ``knowledge/`` whose
path follows the document's source path (``advanced/clients.md`` ->
``knowledge/advanced/clients.md``):

- the title comes from the front matter, then the first H1, then the file name (a ``#`` line
  inside a code fence is code, never a title);
- sections keep their order and relative levels; each paragraph is unwrapped and split into
  sentences with the same rule the page parser uses (``kb.markdown.SENTENCE_END_RE``), each
  sentence a claim quoting itself, so a claim is never a hard-wrapped line or a sentence with an
  added period;
- code blocks, tables, lists and block quotes are kept whole, each a *block claim*: the block,
  then a paragraph holding only its footnote reference, whose citation quotes the block's lines
  (docs/format.md, "Block claims");
- HTML is converted (links, code, emphasis) or dropped, never claimed; admonitions
  (``!!! note``, ``??? tip``, ``:::note``, MyST ```` ```{note} ````, ``.. note::``) become block
  quotes with their content; API directives (``::: pkg.Class``, ``.. autoclass::``) become an
  uncited pointer; Jinja and snippet lines are dropped;
- MyST for Sphinx: ``{eval-rst}`` bodies are read as reStructuredText (``rst_blocks``: code
  directives and literal blocks are code blocks, tabs and version notes quotes, ``list-table`` a
  table); roles become code spans or, for ``{ref}``/``{doc}``, links between pages; ``(label)=``
  targets and navigation directives are dropped; a paragraph of at most three words ending in a
  colon ("Example:") is text, not a claim;
- links between source documents become links between their pages (an anchor the target page
  lacks is dropped; a link to a document that has no page becomes its text);
- L0 is the document's first real sentence; L1 (``## Overview``) its lead and outline.

A newer version of the same document (same source path) rewrites the same page: an unchanged
sentence or block keeps its citation of the older item (whose lines still say it), a new or
changed one cites the new item, and one the new version no longer has moves to
``## Removed in later versions`` with its citation, marked with the date it went away.
"""

from __future__ import annotations

import html
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agents.offline.extractive import Withheld, keep_all
from agents.offline.indexes import new_index, upsert_index_entry
from agents.offline.memory_page import GENERATED_TAG, is_generated
from agents.protocols import EvidenceItem
from ci.snapshot import normalise_quote
from kb.errors import KbError
from kb.markdown import CODESPAN_RE, FOOTDEF_RE, SENTENCE_END_RE, format_citation, parse_citation, parse_structure, slugify
from kb.page import page_id_for_path, parse_page, render_page
from kb.tokens import count_tokens
from kb.yamltext import YamlProblem, load_yaml

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

ReadPage = Callable[[str], "str | None"]

OVERVIEW = "Overview"
REMOVED = "Removed in later versions"
DOC_EXTENSIONS = (".md", ".markdown", ".mdx", ".txt", ".rst", ".text")
RESERVED_STEMS = {"index": "index-page"}  # knowledge/<folder>/index.md is the folder's index page
ADMONITIONS = {
    "note",
    "info",
    "tip",
    "hint",
    "important",
    "warning",
    "caution",
    "danger",
    "error",
    "attention",
    "abstract",
    "summary",
    "tldr",
    "success",
    "check",
    "done",
    "question",
    "help",
    "faq",
    "failure",
    "fail",
    "missing",
    "bug",
    "example",
    "quote",
    "cite",
    "seealso",
    "see-also",
    "todo",
    "admonition",
    "details",
}
LEAD_SENTENCES = 3
OVERVIEW_TOKENS = 1500  # of the 2,000-token L1 budget
INTRO_IN_OVERVIEW_TOKENS = 900

FENCE_RE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})\s*([^`\s]*)(.*)$")
ADMONITION_RE = re.compile(r'^(?:!!!|\?\?\?\+?)\s*([\w-]+)?(?:\s+"([^"]*)")?\s*$')
TAB_RE = re.compile(r'^===\+?\s+"([^"]*)"\s*$')
COLON_OPEN_RE = re.compile(r"^(:{3,})\s*\{?([\w.-]+)\}?\s*(.*)$")
COLON_CLOSE_RE = re.compile(r"^:{3,}\s*$")
MYST_RE = re.compile(r"^(`{3,}|~{3,})\{([\w-]+)\}\s*(.*)$")
REST_RE = re.compile(r"^\.\.\s+([\w:-]+)::\s*(.*)$")
DROP_LINE_RE = re.compile(r"^\s*(?:\{%.*%\}|\{#.*#\}|\[TOC\]|--8<--.*|<!--.*-->|\([^()\s]+\)=|\{[.#][^{}]*\})\s*$")
MYST_TARGET_RE = re.compile(r"^\s*\(([^()\s]+)\)=\s*$")  # (label)= before a heading: a {ref} target
# MyST roles ({func}`echo`, {ref}`text <label>`), matched with the code spans so that a code span
# holding braces (`--{on}/--{off}`) is never read as a role
ROLE_RE = re.compile(r"(\{[\w.:+-]+\})?`([^`]+)`")
RST_ROLE_RE = re.compile(r":([\w.:+-]+):`([^`]+)`")  # reStructuredText roles: :func:`echo`
RST_LINK_RE = re.compile(r"`([^`<]+?)\s*<([^`>]+)>`__?")
EXPLICIT_TITLE_RE = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
# directives whose body is code, and the language it is in
CODE_DIRECTIVES = {
    "code-block": "",
    "code": "",
    "sourcecode": "",
    "code-cell": "",
    "click:example": "python",
    "click:run": "python",
    "doctest": "pycon",
    "testcode": "python",
    "testoutput": "",
    "ipython": "python",
    "jupyter-execute": "python",
    "literal": "",
}
# directives whose body is content (kept, markers gone); a label for those that have one
CONTAINER_DIRECTIVES = {
    "tabs": "",
    "tab": "{}",
    "group-tab": "{}",
    "code-tab": "{}",
    "tab-set": "",
    "tab-item": "{}",
    "container": "",
    "only": "",
    "topic": "{}",
    "sidebar": "{}",
    "versionadded": "Added in version {}",
    "versionchanged": "Changed in version {}",
    "deprecated": "Deprecated since version {}",
    "versionremoved": "Removed in version {}",
}
TABLE_DIRECTIVES = ("list-table",)
DOTTED_RE = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+$")
REFDEF_RE = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*<?([^\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*$")
HEADING_ATTR_RE = re.compile(r"\s*\{[#.:][^}]*\}\s*$")
INLINE_LINK_RE = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?(\s+\"[^\"]*\")?\s*\)")
REF_LINK_RE = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\[([^\]]*)\]")
SHORTCUT_LINK_RE = re.compile(r"(?<![\]!\\])\[([^\[\]]+)\](?![\[(:])")
TAG_RE = re.compile(r"<(/?)([A-Za-z][\w-]*)((?:\s+[^<>]*?)?)\s*(/?)>")
URL_RE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)
HREF_RE = re.compile(r"""\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
WORDS_RE = re.compile(r"[^\W\d_]{2,}")
# a paragraph of up to three words ending in a colon ("Example:", "is equivalent to:") introduces
# what follows and states nothing: it stays as text, without a claim
LABEL_RE = re.compile(r"^[^\s:`\[]+(?:\s+[^\s:`\[]+){0,2}:$")


# ---- reading a document -------------------------------------------------------------------


@dataclass
class Block:
    """A piece of the document. ``lines`` are (evidence line number, text) of the block as it
    stands in the source, dedented out of any admonition that holds it."""

    kind: str  # heading, para, code, table, list, quote, html, admonition, api
    lines: list[tuple[int, str]]
    level: int = 0  # heading level
    text: str = ""  # heading text, admonition label, API name, a code block's language
    children: list[Block] = field(default_factory=list)
    markup: str = "md"  # md | rst (a paragraph of reStructuredText, inside {eval-rst})

    @property
    def start(self) -> int:
        return self.lines[0][0] if self.lines else 0

    @property
    def end(self) -> int:
        return self.lines[-1][0] if self.lines else 0


@dataclass
class Document:
    item: EvidenceItem
    source: str  # normalised relative path of the source, e.g. advanced/clients.md
    path: str  # page path, e.g. knowledge/advanced/clients.md
    title: str
    blocks: list[Block]
    references: dict[str, str]  # link reference definitions: label (folded) -> href
    anchors: set[str] = field(default_factory=set)  # anchors the rendered page will have
    labels: dict[str, str] = field(default_factory=dict)  # MyST (label)= target -> heading it names ("" = the page)


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").disable("inline")


def _front_matter(lines: list[str]) -> tuple[dict[str, Any], int]:
    """The YAML front matter (``---`` ... ``---`` at the top) and how many lines it takes."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    for n in range(1, min(len(lines), 400)):
        if lines[n].strip() in ("---", "..."):
            try:
                data = load_yaml("\n".join(lines[1:n]) + "\n", 64 * 1024)
            except YamlProblem:
                return {}, 0
            return (data if isinstance(data, dict) else {}), n + 1
    return {}, 0


def _dedent(lines: list[tuple[int, str]], width: int) -> list[tuple[int, str]]:
    out = []
    for number, text in lines:
        expanded = text.expandtabs(4)
        cut = min(width, len(expanded) - len(expanded.lstrip(" ")))
        out.append((number, expanded[cut:]))
    return out


def _indented_body(lines: list[tuple[int, str]], start: int, width: int) -> int:
    """Index after the block of lines from ``start`` that are blank or indented by ``width``."""
    end = start
    last = start
    while end < len(lines):
        text = lines[end][1].expandtabs(4)
        if text.strip() and len(text) - len(text.lstrip(" ")) < width:
            break
        end += 1
        if text.strip():
            last = end
    return last


def _trim(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    while lines and not lines[-1][1].strip():
        lines = lines[:-1]
    while lines and not lines[0][1].strip():
        lines = lines[1:]
    return lines


def read_blocks(lines: list[tuple[int, str]]) -> list[Block]:
    """The blocks of a run of lines: doc-tool constructs found line by line, the Markdown
    between them parsed by markdown-it."""
    blocks: list[Block] = []
    plain: list[tuple[int, str]] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        number, text = lines[i]
        if fence is not None:
            plain.append((number, text))
            m = FENCE_RE.match(text)
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not (m.group(3) + m.group(4)).strip():
                fence = None
            i += 1
            continue
        construct = _construct(lines, i)
        if construct is None:
            m = FENCE_RE.match(text)
            if m and not MYST_RE.match(text.strip()):
                fence = m.group(2)
            plain.append((number, text))
            i += 1
            continue
        block, i = construct
        blocks.extend(_markdown_blocks(plain))
        plain = []
        if block is not None:
            blocks.append(block)
    blocks.extend(_markdown_blocks(plain))
    return blocks


def _construct(lines: list[tuple[int, str]], i: int) -> tuple[Block | None, int] | None:
    """A doc-tool construct starting at line ``i`` (not indented): the block it becomes (None
    when dropped) and the index after it; None when the line is plain Markdown."""
    number, text = lines[i]
    if DROP_LINE_RE.match(text):
        return None, i + 1
    m = ADMONITION_RE.match(text)
    if m and text[:3] in ("!!!", "???"):
        end = _indented_body(lines, i + 1, 4)
        label = (m.group(2) if m.group(2) is not None else (m.group(1) or "note").title()).strip()
        body = _dedent(lines[i + 1 : end], 4)
        return Block("admonition", lines[i:end], text=label, children=read_blocks(body)), end
    m = TAB_RE.match(text)
    if m:
        end = _indented_body(lines, i + 1, 4)
        return Block("admonition", lines[i:end], text=m.group(1), children=read_blocks(_dedent(lines[i + 1 : end], 4))), end
    m = COLON_OPEN_RE.match(text)
    if m:
        name = m.group(2)
        if DOTTED_RE.match(name) and not m.group(3).strip():  # mkdocstrings: ::: package.module.Name
            end = _indented_body(lines, i + 1, 4)
            return Block("api", lines[i:end], text=name), end
        close = next((j for j in range(i + 1, len(lines)) if COLON_CLOSE_RE.match(lines[j][1])), None)
        if close is not None and name.lower() in ADMONITIONS:
            body = [line for line in lines[i + 1 : close] if not re.match(r"^:[\w-]+:", line[1])]
            label = m.group(3).strip() or name.title()
            return Block("admonition", lines[i : close + 1], text=label, children=read_blocks(body)), close + 1
        if close is not None:  # an unknown container: its content stays, its markers go
            return Block("admonition", lines[i : close + 1], text="", children=read_blocks(lines[i + 1 : close])), close + 1
        return None, i + 1
    m = MYST_RE.match(text)
    if m:
        return _myst(lines, i, m)
    m = REST_RE.match(text)
    if m:
        return _rest(lines, i, m)
    return None


def _myst(lines: list[tuple[int, str]], i: int, m: re.Match[str]) -> tuple[Block | None, int]:
    """A MyST directive fence: ```` ```{note} ```` ... ```` ``` ````."""
    ticks, name = m.group(1), m.group(2).lower()
    close = next(
        (j for j in range(i + 1, len(lines)) if lines[j][1].strip().startswith(ticks) and not lines[j][1].strip().strip(ticks[0])),
        len(lines) - 1,
    )
    body = [line for line in lines[i + 1 : close] if not re.match(r"^:[\w-]+:", line[1])]
    if name in CODE_DIRECTIVES:
        return Block("code", lines[i : close + 1], text=m.group(3).strip() or CODE_DIRECTIVES[name]), close + 1
    if name in ADMONITIONS:
        label = m.group(3).strip() or name.title()
        return Block("admonition", lines[i : close + 1], text=label, children=read_blocks(body)), close + 1
    if name in CONTAINER_DIRECTIVES:
        label = CONTAINER_DIRECTIVES[name].format(m.group(3).strip()).strip()
        children = read_blocks(body)
        kind = "admonition" if label else "group"
        return (Block(kind, lines[i : close + 1], text=label, children=children) if children else None), close + 1
    if name == "eval-rst":
        return Block("group", lines[i : close + 1], children=rst_blocks(lines[i + 1 : close])), close + 1
    if name.startswith("auto"):
        return Block("api", lines[i : close + 1], text=m.group(3).strip() or name), close + 1
    if name in ("include", "literalinclude") and m.group(3).strip():
        return Block("include", lines[i : close + 1], text=m.group(3).strip()), close + 1
    return None, close + 1  # toctree, contents, currentmodule, mermaid...: directives, not prose


def _rest(lines: list[tuple[int, str]], i: int, m: re.Match[str]) -> tuple[Block | None, int]:
    """A reStructuredText directive in Markdown (Sphinx): ``.. note::`` and its indented body."""
    number = lines[i][0]
    name = m.group(1).lower()
    end = _indented_body(lines, i + 1, 3)
    body = [line for line in _dedent(lines[i + 1 : end], 3) if not re.match(r"^\s*:[\w-]+:", line[1])]
    if name in ADMONITIONS:
        if m.group(2).strip():
            body = [(number, m.group(2)), *body]
        return Block("admonition", lines[i:end], text=name.title(), children=read_blocks(body)), end
    if name.startswith(("auto", "py:")):
        return Block("api", lines[i:end], text=m.group(2).strip()), end
    if name in CODE_DIRECTIVES:
        code = _trim([line for line in lines[i + 1 : end] if not re.match(r"^\s*:[\w-]+:", line[1])])
        return (Block("code", code, text=m.group(2).strip() or CODE_DIRECTIVES[name]) if code else None), end
    return None, end


def rst_blocks(lines: list[tuple[int, str]]) -> list[Block]:
    """The blocks of reStructuredText (a MyST ``{eval-rst}`` body): paragraphs, literal blocks
    after ``::``, bullet lists, and directives: code (``code-block``, ``click:example``...) a
    code block of its body's lines, admonitions and containers (tabs, version notes) their
    content, ``list-table`` a table, API directives a pointer; the rest (``currentmodule``,
    comments, link targets) dropped."""
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        number, text = lines[i]
        expanded = text.expandtabs(4)
        indent = len(expanded) - len(expanded.lstrip())
        if not text.strip():
            i += 1
            continue
        end = _indented_body(lines, i + 1, indent + 1)
        m = REST_RE.match(text.strip())
        if m:
            block = _rst_directive(lines, i, end, m)
            if block is not None:
                blocks.append(block)
            i = end
            continue
        if text.strip().startswith(".."):  # a comment, a link target (.. _label:), a substitution
            i = end
            continue
        j = i
        while j < len(lines) and lines[j][1].strip() and not REST_RE.match(lines[j][1].strip()):
            j += 1
        paragraph = lines[i:j]
        kind = "list" if re.match(r"^\s*(?:[-*+]|\d+[.)]|#\.)\s", text) else "para"
        blocks.append(Block(kind, paragraph, markup="rst"))
        i = j
        if paragraph[-1][1].rstrip().endswith("::"):  # a literal block follows
            close = _indented_body(lines, j, indent + 1)
            code = _trim(lines[j:close])
            if code:
                blocks.append(Block("code", code))
            i = max(close, j)
    return blocks


def _rst_directive(lines: list[tuple[int, str]], i: int, end: int, m: re.Match[str]) -> Block | None:
    name, argument = m.group(1).lower(), m.group(2).strip()
    body = [line for line in lines[i + 1 : end] if not re.match(r"^\s*:[\w-]+:", line[1])]
    width = min((len(t.expandtabs(4)) - len(t.expandtabs(4).lstrip()) for _, t in body if t.strip()), default=0)
    inner = _dedent(body, width)
    if name in CODE_DIRECTIVES:
        code = _trim(body)
        return Block("code", code, text=argument or CODE_DIRECTIVES[name]) if code else None
    if name in ADMONITIONS:
        children = rst_blocks(([(lines[i][0], argument)] if argument else []) + inner)
        return Block("admonition", lines[i:end], text=name.title(), children=children) if children else None
    if name in CONTAINER_DIRECTIVES:
        children = rst_blocks(inner)
        label = CONTAINER_DIRECTIVES[name].format(argument).strip()
        return Block("admonition" if label else "group", lines[i:end], text=label, children=children) if children else None
    if name in TABLE_DIRECTIVES:
        return Block("table", _trim(lines[i:end]), text="list-table")
    if name.startswith(("auto", "py:")):
        return Block("api", lines[i:end], text=argument)
    return None


def _markdown_blocks(lines: list[tuple[int, str]]) -> list[Block]:
    if not any(text.strip() for _, text in lines):
        return []
    source = "\n".join(text for _, text in lines)
    tokens = _parser().parse(source)
    out: list[Block] = []
    kinds = {
        "fence": "code",
        "code_block": "code",
        "table_open": "table",
        "bullet_list_open": "list",
        "ordered_list_open": "list",
        "blockquote_open": "quote",
        "html_block": "html",
        "paragraph_open": "para",
        "heading_open": "heading",
    }
    for i, tok in enumerate(tokens):
        if tok.level != 0 or tok.type not in kinds or not tok.map:
            continue
        start, end = tok.map
        span = _trim(lines[start:end])
        if not span:
            continue
        kind = kinds[tok.type]
        if kind == "heading":
            text = HEADING_ATTR_RE.sub("", tokens[i + 1].content.strip())
            out.append(Block("heading", span[:1] if tok.markup.startswith("#") else span, level=int(tok.tag[1]), text=text))
        elif kind == "para":
            out.append(Block("para", span))
        else:
            out.append(Block(kind, span))
    return out


def reference_definitions(lines: list[str]) -> dict[str, str]:
    """Link reference definitions (``[label]: url``) outside code fences: folded label -> url."""
    out: dict[str, str] = {}
    fence: str | None = None
    for text in lines:
        m = FENCE_RE.match(text)
        if m and (fence is None or (m.group(2)[0] == fence[0] and not (m.group(3) + m.group(4)).strip())):
            fence = m.group(2) if fence is None else None
            continue
        if fence is None:
            d = REFDEF_RE.match(text)
            if d and not d.group(1).startswith("^"):
                out.setdefault(_fold(d.group(1)), d.group(2))
    return out


def _fold(label: str) -> str:
    return " ".join(label.split()).casefold()


# ---- where a document's page goes ----------------------------------------------------------


def source_path(source: str) -> str:
    """The relative path a source names: ``./docs/a.md`` -> ``docs/a.md``; a URL gives its path;
    ``..`` and empty segments are dropped."""
    text = source.strip().replace("\\", "/")
    if "://" in text:
        text = text.split("://", 1)[1].partition("/")[2]
    text = re.sub(r"^[A-Za-z]:/", "", text).split("?")[0].split("#")[0]
    parts = [p for p in text.split("/") if p and p not in (".", "..")]
    return "/".join(parts)


def page_path_for(source: str, fallback: str) -> str:
    """``advanced/clients.md`` -> ``knowledge/advanced/clients.md``: each folder slugified, the
    extension dropped; ``index.md`` becomes ``index-page`` (``index.md`` is the folder's index)."""
    parts = source_path(source).split("/") if source_path(source) else []
    if parts:
        stem = parts[-1]
        for ext in DOC_EXTENSIONS:
            if stem.lower().endswith(ext):
                stem = stem[: -len(ext)]
                break
        parts[-1] = stem
    slugs = [s for s in (slugify(p.replace("_", "-").replace(".", "-")).strip("-")[:80] for p in parts) if s]
    if not slugs:
        slugs = [slugify(fallback).strip("-")[:60] or "document"]
    slugs[-1] = RESERVED_STEMS.get(slugs[-1], slugs[-1])
    return "knowledge/" + "/".join(slugs) + ".md"


def _file_title(source: str) -> str:
    parts = source_path(source).split("/")
    stem = parts[-1]
    for ext in DOC_EXTENSIONS:
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
    if stem.lower() in ("index", "readme", "_index") and len(parts) > 1:
        stem = parts[-2]
    words = re.sub(r"[-_]+", " ", stem).strip()
    return (words[:1].upper() + words[1:]) if words else "Document"


def read_document(item: EvidenceItem, path: str) -> Document:
    """Parse one stored document: title, blocks, link references."""
    raw = item.text.splitlines()
    meta, skip = _front_matter(raw)
    numbered = [(n, "" if n <= skip else text) for n, text in enumerate(raw, 1)]
    blocks = read_blocks(numbered)
    title = str(meta.get("title") or "").strip() if isinstance(meta.get("title"), str | int | float) else ""
    first_h1 = next((b for b in blocks if b.kind == "heading" and b.level == 1), None)
    if not title and first_h1 is not None:
        title = _plain(first_h1.text)
    if first_h1 is not None and _plain(first_h1.text) == title:
        blocks = [b for b in blocks if b is not first_h1]
    title = title or _file_title(item.source or item.id)
    _normalise_levels(blocks)
    doc = Document(item, source_path(item.source), path, " ".join(title.split())[:200], blocks, reference_definitions(raw))
    doc.labels = _targets(raw, title)
    return doc


def _targets(lines: list[str], title: str) -> dict[str, str]:
    """MyST ``(label)=`` targets outside code: label -> the title of the heading right after it
    ("" when that is the page's own title, or no heading follows)."""
    out: dict[str, str] = {}
    fence: str | None = None
    for n, text in enumerate(lines):
        m = FENCE_RE.match(text)
        if m and (fence is None or (m.group(2)[0] == fence[0] and not (m.group(3) + m.group(4)).strip())):
            fence = m.group(2) if fence is None else None
            continue
        target = MYST_TARGET_RE.match(text) if fence is None else None
        if target is None:
            continue
        following = next((t for t in lines[n + 1 : n + 4] if t.strip()), "")
        heading = re.match(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", following)
        name = _plain(HEADING_ATTR_RE.sub("", heading.group(1))) if heading else ""
        out[target.group(1)] = "" if name == title else name
    return out


def _normalise_levels(blocks: list[Block]) -> None:
    """Section levels shift so that the document's first section is at level 2 (the page's H1
    is its title, and ``## Overview`` must end where the first section starts); relative levels
    stay, except that none goes above 2."""
    levels = [b.level for b in blocks if b.kind == "heading"]
    if not levels:
        return
    shift = 2 - levels[0]
    for b in blocks:
        if b.kind == "heading":
            b.level = max(2, min(6, b.level + shift))


# ---- inline text ------------------------------------------------------------------------------


def _plain(text: str) -> str:
    """Heading or summary text without link targets, images, tags and emphasis markers."""
    text = INLINE_LINK_RE.sub(lambda m: "" if m.group(1) else m.group(2), text)
    text = REF_LINK_RE.sub(lambda m: "" if m.group(1) else m.group(2), text)
    text = TAG_RE.sub("", text)
    text = re.sub(r"(?<!\w)[*_]{1,3}(?=\S)|(?<=\S)[*_]{1,3}(?!\w)", "", text)
    return " ".join(html.unescape(text).split())


class Linker:
    """Rewrites links of one document: links to other source documents become links to their
    pages, reference links become inline links, other relative links become their text."""

    def __init__(self, doc: Document, targets: dict[str, tuple[str, set[str]]], labels: dict[str, tuple[str, str]] | None = None) -> None:
        self.doc = doc
        self.targets = targets  # source path -> (page path, anchors of that page)
        self.labels = labels or {}  # MyST target label -> (source path, heading title or "" for the page)
        self.folder = posixpath.dirname(doc.source)
        self.definitions: dict[str, str] = {}  # reference links kept as such: label -> definition line

    def href(self, href: str) -> str | None:
        """The rewritten target of a link, or None when it must become plain text."""
        if URL_RE.match(href):
            return href
        if href.startswith("/"):
            return None  # site-absolute: means nothing inside the knowledge base
        target, _, anchor = href.partition("#")
        if not target:
            return f"#{anchor}" if anchor in self.doc.anchors else None
        resolved = posixpath.normpath(posixpath.join(self.folder, target.split("?")[0]))
        candidates = [resolved]
        if not resolved.lower().endswith(DOC_EXTENSIONS):
            candidates += [resolved.rstrip("/") + ext for ext in (".md", "/index.md", "/README.md")]
        for candidate in candidates:
            found = self.targets.get(candidate)
            if found is None:
                continue
            page_path, anchors = found
            rel = posixpath.relpath(page_path, posixpath.dirname(self.doc.path))
            return rel + (f"#{anchor}" if anchor and anchor in anchors else "")
        return None

    def inline(self, text: str) -> str:
        """Page text for source text: links rewritten, HTML converted, footnote-like and
        wikilink-like brackets escaped. Code spans are left exactly as they are."""
        codes: list[str] = []

        def hide(m: re.Match[str]) -> str:
            codes.append(m.group(0))
            return f"\x00{len(codes) - 1}\x00"

        prose = self._prose(CODESPAN_RE.sub(hide, self.roles(text)))
        return re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m.group(1))], prose)

    def roles(self, text: str) -> str:
        """MyST roles in ``text`` as Markdown (code spans left as they are)."""
        return ROLE_RE.sub(lambda m: self._myst_role(m) if m.group(1) else m.group(0), text)

    def _myst_role(self, m: re.Match[str]) -> str:
        """A MyST role: {ref} and {doc} links to the pages of the documents they name (their
        text as written), any other role its text as code ({func}`echo` -> `echo`)."""
        name = m.group(1)[1:-1].split(":")[-1].lower()
        if name not in ("ref", "doc"):
            return _role(name, m.group(2))
        explicit = EXPLICIT_TITLE_RE.match(m.group(2))
        text, target = (explicit.group(1).strip(), explicit.group(2).strip()) if explicit else (m.group(2).strip(), m.group(2).strip())
        href = self.href(target) if name == "doc" else self._label_href(target)
        return f"[{text}]({href})" if href else text

    def _label_href(self, label: str) -> str | None:
        found = self.labels.get(label)
        if found is None:
            return None
        source, heading = found
        anchor = slugify(_plain(heading)) if heading else ""
        if source == self.doc.source:
            return f"#{anchor}" if anchor and anchor in self.doc.anchors else None
        page = self.targets.get(source)
        if page is None:
            return None
        rel = posixpath.relpath(page[0], posixpath.dirname(self.doc.path))
        return rel + (f"#{anchor}" if anchor and anchor in page[1] else "")

    def _prose(self, text: str) -> str:
        if not text:
            return text

        def ref_link(m: re.Match[str]) -> str:
            label = m.group(3) or m.group(2)
            url = self.doc.references.get(_fold(label))
            if url is None:
                return m.group(0)
            if URL_RE.match(url):  # kept as a reference link: its definition goes on the page
                self.definitions[_fold(label)] = f"[{label}]: {url}"
                return m.group(0)
            return f"{m.group(1)}[{m.group(2)}]({url})"

        def shortcut(m: re.Match[str]) -> str:
            url = self.doc.references.get(_fold(m.group(1)))
            if url is None:
                return m.group(0)
            if URL_RE.match(url):
                self.definitions[_fold(m.group(1))] = f"[{m.group(1)}]: {url}"
                return m.group(0)
            return f"[{m.group(1)}]({url})"

        text = REF_LINK_RE.sub(ref_link, text)
        text = SHORTCUT_LINK_RE.sub(shortcut, text)
        text = _html_inline(text)

        def link(m: re.Match[str]) -> str:
            if m.group(1):  # an image: its alt text, if any, is all a page can keep
                return ""
            target = self.href(m.group(3))
            label = m.group(2)
            return f"[{label}]({target})" if target is not None else label

        text = INLINE_LINK_RE.sub(link, text)
        return text.replace("[^", "[\\^").replace("[[", "[\\[")


def _html_inline(text: str) -> str:
    """Inline HTML as Markdown: <a href> a link, <code> a code span, <b>/<strong> and
    <i>/<em> emphasis, <br> a space; any other tag dropped (its text kept)."""
    if "<" not in text:
        return text
    out: list[str] = []
    last = 0
    stack: list[str] = []
    for m in TAG_RE.finditer(text):
        out.append(text[last : m.start()])
        last = m.end()
        closing, name, attrs = m.group(1) == "/", m.group(2).lower(), m.group(3)
        if name == "a":
            if closing:
                href = stack.pop() if stack else ""
                out.append(f"]({href})" if href else "]")
            else:
                h = HREF_RE.search(attrs or "")
                href = next((g for g in h.groups() if g is not None), "") if h else ""
                stack.append(href)
                out.append("[")
        elif name == "code":
            out.append("`")
        elif name in ("b", "strong"):
            out.append("**")
        elif name in ("i", "em"):
            out.append("_")
        elif name == "br":
            out.append(" ")
    out.append(text[last:])
    joined = "".join(out)
    joined = re.sub(r"\[\s*\]\([^)]*\)|\[\s*\]", "", joined)  # a link left with no text
    return re.sub(r"\*\*\s*\*\*|(?<!\w)_\s*_(?!\w)", "", joined)


def rst_inline(text: str) -> str:
    """reStructuredText inline markup as Markdown: ``code`` a code span, :role:`x` the code
    span `x` (or the text of a :ref:/:doc:), `text <url>`_ a link; a paragraph's closing ``::``
    (which introduces a literal block) a colon."""
    text = re.sub(r"``([^`]+)``", lambda m: f"`{m.group(1)}`", text)
    text = RST_ROLE_RE.sub(lambda m: _role(m.group(1), m.group(2)), text)
    text = RST_LINK_RE.sub(lambda m: f"[{m.group(1)}]({m.group(2)})", text)
    text = re.sub(r"\s*::$", ":", text.rstrip()) if text.rstrip().endswith("::") and text.strip() != "::" else text
    return re.sub(r"^(\s*)([#>])", r"\1\\\2", text)  # '#' or '>' opening a line is text in reStructuredText


def _role(name: str, content: str) -> str:
    """A role as Markdown text: code roles a code span; :pep:/:rfc: their name; the rest text."""
    name = name.split(":")[-1].lower()
    explicit = EXPLICIT_TITLE_RE.match(content)
    title = explicit.group(1).strip() if explicit else content
    if name in ("ref", "doc", "term", "abbr", "any", "numref", "download", "keyword"):
        return title
    if name in ("pep", "rfc"):
        return f"{name.upper()} {title}"
    if not explicit:
        title = title.lstrip("!")
        if title.startswith("~"):
            title = title[1:].rsplit(".", 1)[-1]
    return f"`{title}`"


def _list_table(body: list[str]) -> list[str]:
    """A ``list-table`` directive as a Markdown table (None-like empty list when it is not one
    that converts cleanly: then it stays verbatim)."""
    header_rows = 0
    rows: list[list[str]] = []
    for text in body[1:]:
        stripped = text.strip()
        m = re.match(r"^:header-rows:\s*(\d+)", stripped)
        if m:
            header_rows = int(m.group(1))
            continue
        if not stripped or stripped.startswith(":"):
            continue
        if stripped.startswith("* - "):
            rows.append([stripped[4:].strip()])
        elif stripped.startswith("- ") and rows:
            rows[-1].append(stripped[2:].strip())
        elif rows:
            rows[-1][-1] += " " + stripped
        else:
            return []
    if not rows or len({len(r) for r in rows}) != 1 or any("|" in cell for r in rows for cell in r):
        return []
    head = rows[0] if header_rows else [""] * len(rows[0])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(r) + " |" for r in rows[1 if header_rows else 0 :]]


# ---- claims --------------------------------------------------------------------------------


class Citer:
    """Labels and citations for one page; claims the previous version already made (same
    quote) keep their label and citation of the older evidence. Labels are numbers, new ones
    above every label the page had: ``[^12]`` costs 3 tokens in a retrieval chunk, where a label
    made of an evidence id and a line costs 12."""

    def __init__(self, item: EvidenceItem, previous: dict[str, list[tuple[str, str]]], taken: set[str]) -> None:
        self.item = item
        self.previous = previous  # normalised quote -> [(label, citation line)], not yet reused
        self.used: dict[str, str] = {}  # label -> citation line
        self.new = 0
        self._next = 1 + max((int(label) for label in taken if label.isdigit()), default=0)
        self._by_quote: dict[tuple[str, int, int], str] = {}

    def cite(self, quote: str, start: int, end: int) -> str:
        key = normalise_quote(quote)
        known = self._by_quote.get((key, start, end))
        if known is not None:
            return known
        olds = self.previous.get(key)
        if olds:
            label, line = olds.pop(0)
            self.used[label] = line
            self._by_quote[(key, start, end)] = label
            return label
        label = str(self._next)
        self._next += 1
        self._by_quote[(key, start, end)] = label
        self.used[label] = format_citation(label, self.item.id, start, end, quote)
        self.new += 1
        return label


def sentences(lines: list[tuple[int, str]]) -> list[tuple[str, int, int]]:
    """The sentences of a paragraph, unwrapped: (verbatim text, first line, last line).

    Boundaries are the page parser's own (``SENTENCE_END_RE`` on the text with code spans
    blanked), so each sentence written with its reference is exactly one claim of the page.
    """
    joined = ""
    starts: list[tuple[int, int]] = []  # (offset, line number)
    for number, text in lines:
        part = text.strip()
        if not part:
            continue
        if joined:
            joined += " "
        starts.append((len(joined), number))
        joined += part
    blanked = CODESPAN_RE.sub(lambda m: "x" * len(m.group(0)), joined)

    def line_at(offset: int) -> int:
        number = starts[0][1]
        for at, n in starts:
            if at > offset:
                break
            number = n
        return number

    out = []
    begin = 0
    bounds = [m.end() for m in SENTENCE_END_RE.finditer(blanked)] + [len(joined)]
    for end in bounds:
        raw = joined[begin:end]
        text = raw.strip()
        if text:
            first = begin + (len(raw) - len(raw.lstrip()))
            last = begin + len(raw.rstrip()) - 1
            out.append((text, line_at(first), line_at(last)))
        begin = end
    return out


def _is_prose(text: str) -> bool:
    """Something a reader would call text: at least one word of letters once markup is gone."""
    return bool(WORDS_RE.search(_plain(CODESPAN_RE.sub(" x ", text)))) or bool(CODESPAN_RE.search(text))


# ---- rendering a page ------------------------------------------------------------------------


class Renderer:
    def __init__(self, doc: Document, linker: Linker, citer: Citer, withheld: Withheld = keep_all) -> None:
        self.doc = doc
        self.withheld = withheld  # sentences (and blocks) the privacy policy keeps out of pages
        self.linker = linker
        self.citer = citer
        self.lead: list[str] = []  # the first sentences, with their references

    def paragraph(self, lines: list[tuple[int, str]], markup: str = "md") -> list[str]:
        parts: list[str] = []
        found = sentences(lines)
        if len(found) == 1 and LABEL_RE.match(found[0][0]) and not self.withheld(found[0][0]):
            return [" ".join(self.linker.inline(rst_inline(found[0][0]) if markup == "rst" else found[0][0]).split())]
        for text, start, end in found:
            page_text = " ".join(self.linker.inline(rst_inline(text) if markup == "rst" else text).split())
            if not _is_prose(page_text) or self.withheld(text):
                continue
            if parts and len(_plain(page_text).split()) < 2 and not CODESPAN_RE.search(page_text):
                parts.append(page_text)  # "(RFC2109)" after a sentence: part of it, not a claim
                continue
            claim = f"{page_text}[^{self.citer.cite(text, start, end)}]"
            parts.append(claim)
            if len(self.lead) < LEAD_SENTENCES:
                self.lead.append(claim)
        return [" ".join(parts)] if parts else []

    def block(self, block: Block) -> list[str]:
        """A block kept whole, then its reference: a claim whose quote is its lines."""
        lines = [text for _, text in block.lines]
        width = min((len(t.expandtabs(4)) - len(t.expandtabs(4).lstrip()) for t in lines if t.strip()), default=0)
        body = [t.expandtabs(4)[width:] if t.strip() else "" for t in lines]
        if block.kind == "table" and block.text == "list-table":
            body = _list_table(body) or ["```rst", *body, "```"]
        elif block.kind != "code":
            body = self._inline_block([rst_inline(t) for t in body] if block.markup == "rst" else body)
        elif MYST_RE.match(body[0]):  # ```{code-block} python: a plain fence, the options dropped
            code = _trim([(0, t) for t in body[1:-1] if not re.match(r"^:[\w-]+:", t)])
            body = [f"```{block.text}", *(t for _, t in code), "```"]
        elif not FENCE_RE.match(body[0]):  # indented code: fenced on the page
            body = [f"```{block.text}", *body, "```"]
        quote = "\n".join(text for _, text in block.lines)
        if self.withheld(quote):
            return []
        label = self.citer.cite(quote, block.start, block.end)
        return [*body, "", f"[^{label}]"]

    def _inline_block(self, body: list[str]) -> list[str]:
        """Links and HTML inside a list, table or quote, line by line (fenced code inside the
        block stays as it is)."""
        out: list[str] = []
        fence: str | None = None
        run: list[str] = []  # lines outside code: a role may span two of them

        def flush() -> None:
            out.extend(self.linker.inline(line) for line in self.linker.roles("\n".join(run)).split("\n") if run)
            run.clear()

        for text in body:
            m = FENCE_RE.match(text.lstrip())
            if m and (fence is None or m.group(2)[0] == fence[0]):
                flush()
                fence = m.group(2) if fence is None else None
                out.append(text)
                continue
            if fence is not None:
                out.append(text)
            else:
                run.append(text)
        flush()
        return out

    def html(self, block: Block) -> list[str]:
        """An HTML block keeps only its sentences of text, each quoted from its line."""
        parts = []
        for number, text in block.lines:
            for run in re.split(r"<[^>]*>", text):
                run = html.unescape(run).strip()
                if len(run.split()) < 3 or not re.search(r"[.!?]", run) or run not in text:
                    continue
                for sentence, _, _ in sentences([(number, run)]):
                    if _is_prose(sentence) and len(sentence.split()) >= 3 and not self.withheld(sentence):
                        claim = f"{' '.join(self.linker.inline(sentence).split())}[^{self.citer.cite(sentence, number, number)}]"
                        parts.append(claim)
        return [" ".join(parts)] if parts else []

    def blocks(self, blocks: list[Block]) -> list[str]:
        out: list[str] = []
        for block in blocks:
            rendered = self.one(block)
            if rendered:
                if out and out[-1] != "":
                    out.append("")
                out += rendered
        return out

    def one(self, block: Block) -> list[str]:
        if block.kind == "heading":
            text = " ".join(self.linker.inline(block.text).split())
            return [f"{'#' * block.level} {text}"] if text else []
        if block.kind == "para":
            return self.paragraph(block.lines, block.markup)
        if block.kind == "group":
            return self.blocks(block.children)
        if block.kind == "html":
            return self.html(block)
        if block.kind == "api":
            return [f"_API reference: `{block.text}`_"] if block.text else []
        if block.kind == "include":  # another file's text: what the document points to, not what it says
            return [f"_Included from `{block.text}`, a file outside the document._"]
        if block.kind == "admonition":
            inner = self.blocks(block.children)
            if not inner:
                return []
            head = [f"> **{_plain(block.text)}**", ">"] if _plain(block.text) else []
            return head + [f"> {line}" if line else ">" for line in inner]
        return self.block(block)


def _sections(lines: list[str]) -> list[tuple[int, str, str]]:
    """(level, title, anchor) of every heading of a page body, numbered as ``kb.markdown`` does."""
    return [(s.level, s.title, s.anchor) for s in parse_structure("\n".join(lines)).sections]


def render_document(doc: Document, linker: Linker, existing: str | None, withheld: Withheld = keep_all) -> tuple[str, int, int]:
    """The page text for a document, the number of new claims, and of claims closed."""
    previous, history, history_labels, old_citations, meta_old = _previous(existing, doc.path)
    citer = Citer(doc.item, previous, set(old_citations))
    renderer = Renderer(doc, linker, citer, withheld)
    first_heading = next((n for n, b in enumerate(doc.blocks) if b.kind == "heading"), len(doc.blocks))
    intro_lines = renderer.blocks(doc.blocks[:first_heading])
    body_lines = renderer.blocks(doc.blocks[first_heading:])
    lead = [" ".join(renderer.lead)] if renderer.lead else []

    removed, closed = _close_missing(citer, history, doc.item.date, linker)
    for label in history_labels:
        if label in old_citations:
            citer.used.setdefault(label, old_citations[label])

    def layout(intro_in_overview: bool, outline: list[str]) -> list[str]:
        overview = [*intro_lines] if intro_in_overview else [*lead]
        if outline:
            overview += ([""] if overview else []) + ["Sections of this page:", "", *outline]
        body = [f"# {doc.title}", "", f"## {OVERVIEW}", "", *(overview or ["This document has no text of its own."]), ""]
        if intro_lines and not intro_in_overview:
            body += ["## Introduction", "", *intro_lines, ""]
        if body_lines:
            body += [*body_lines, ""]
        if removed:
            body += [f"## {REMOVED}", "", *removed, ""]
        return body

    fits = bool(intro_lines) and count_tokens("\n".join(intro_lines)) <= INTRO_IN_OVERVIEW_TOKENS
    sections = _sections(layout(fits, []))
    outline = _outline(_outline_entries(sections))
    if fits and count_tokens("\n".join(intro_lines + outline)) > OVERVIEW_TOKENS:
        fits = False
        outline = _outline(_outline_entries(_sections(layout(fits, []))))
    body = layout(fits, outline)
    if linker.definitions:
        body += [linker.definitions[k] for k in sorted(linker.definitions)] + [""]
    used_labels = set(re.findall(r"\[\^([^\]\s]+)\]", "\n".join(body)))
    citations = [citer.used[label] for label in sorted(citer.used, key=_natural) if label in used_labels]
    text = "\n".join(body) + "\n" + "\n".join(citations) + ("\n" if citations else "")
    sources = sorted({m.group(1) for c in citations if (m := re.search(r"\]:\s*(ev-[0-9a-f]+)#", c))})
    meta: dict[str, Any] = {
        "id": page_id_for_path(doc.path),
        "type": "fact",
        "title": doc.title,
        "summary": _summary_sentence(doc, renderer.lead),
        "scope": "system",
        "status": "active",
    }
    valid_from = meta_old.get("valid_from") or doc.item.date
    if valid_from:
        meta["valid_from"] = valid_from
    meta["sources"] = sources
    meta["origin"] = doc.source or doc.item.id
    meta["tags"] = [GENERATED_TAG, "document"]
    return render_page(meta, text), citer.new, closed


def _close_missing(citer: Citer, history: list[str], date: str, linker: Linker) -> tuple[list[str], int]:
    """The removed section: its earlier entries, then what the previous version cited and this
    one no longer says, under the date of this version; and how many claims were closed."""
    closed_lines: list[str] = []
    closed = 0
    for entries in citer.previous.values():
        for label, line in entries:
            cite = parse_citation(label, 0, line.split(":", 1)[1])
            closed_lines += _closed_entry(label, cite.quote, linker)
            citer.used[label] = line
            closed += 1
    removed = list(history)
    if closed_lines:
        when = f"Not in the version of {date}" if date else "Not in a later version"
        removed += ([""] if removed else []) + [f"### {when}", "", *closed_lines]
    return removed, closed


def _natural(label: str) -> tuple[object, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", label))


def page_anchors(doc: Document, linker: Linker) -> set[str]:
    """The anchors the document's page has (rendered once without the previous version)."""
    text, _, _ = render_document(doc, linker, None)
    return parse_page(text, doc.path).structure.anchors


def _outline_entries(sections: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """The document's own sections (not the title, Overview, Introduction or removed claims)."""
    out = []
    skipping = 0
    for level, title, anchor in sections:
        if skipping and level > skipping:
            continue
        skipping = 0
        if level == 1 or (level == 2 and title in (OVERVIEW, "Introduction")):
            continue
        if level == 2 and title == REMOVED:
            skipping = 2
            continue
        out.append((level, _plain(title), anchor))
    return out


def _closed_entry(label: str, quote: str, linker: Linker) -> list[str]:
    if "\n" not in quote:
        return [f"- {' '.join(linker.inline(quote).split())}[^{label}]"]
    lines = quote.split("\n")
    width = min((len(t) - len(t.lstrip()) for t in lines if t.strip()), default=0)
    body = [t[width:] for t in lines]
    if not FENCE_RE.match(body[0]):
        body = ["```", *body, "```"] if lines[0].startswith("    ") else body
    return ["", *body, "", f"[^{label}]", ""]


def _previous(
    existing: str | None, path: str
) -> tuple[dict[str, list[tuple[str, str]]], list[str], set[str], dict[str, str], dict[str, Any]]:
    """From the page the previous version made: normalised quote -> [(label, citation)] of its
    current claims, the lines of its removed section and their labels, every citation line,
    and its header."""
    if not existing:
        return {}, [], set(), {}, {}
    page = parse_page(existing, path)
    citations: dict[str, str] = {}
    history: list[str] = []
    in_removed = False
    for line in page.body.splitlines():
        m = FOOTDEF_RE.match(line)
        if m:
            citations[m.group(1)] = line
            continue
        if line.startswith("## "):
            in_removed = line[3:].strip() == REMOVED
            continue
        if in_removed:
            history.append(line)
    while history and not history[-1].strip():
        history.pop()
    history_labels = set(re.findall(r"\[\^([^\]\s]+)\]", "\n".join(history)))
    current: dict[str, list[tuple[str, str]]] = {}
    for label, line in citations.items():
        if label in history_labels:
            continue
        cite = parse_citation(label, 0, line.split(":", 1)[1])
        if cite.evidence_id:
            current.setdefault(normalise_quote(cite.quote), []).append((label, line))
    return current, history, history_labels, citations, dict(page.meta)


def _outline(headings: list[tuple[int, str, str]]) -> list[str]:
    """Nested links to the page's sections, as deep as the L1 budget allows."""
    if not headings:
        return []
    top = min(level for level, _, _ in headings)
    for depth in (2, 1, 0):
        lines = []
        indent = -1
        for level, text, anchor in headings:
            if level - top > depth:
                continue
            indent = min(level - top, indent + 1)  # a list nests one level at a time
            lines.append(f"{'  ' * indent}- [{text or anchor}](#{anchor})")
        if count_tokens("\n".join(lines)) <= OVERVIEW_TOKENS - INTRO_IN_OVERVIEW_TOKENS // 2 or depth == 0:
            break
    limit = OVERVIEW_TOKENS - INTRO_IN_OVERVIEW_TOKENS // 2
    kept: list[str] = []
    for line in lines:
        if count_tokens("\n".join([*kept, line])) > limit:
            kept.append(f"- … and {len(lines) - len(kept)} more sections below.")
            break
        kept.append(line)
    return kept


def _summary_sentence(doc: Document, lead: list[str]) -> str:
    """L0: the document's first real sentence (four words or more), else its first sentence
    however short (what the page says, not a name the gate cannot find in a claim), else a
    sentence naming the page and its first sections; at most 90 tokens."""
    texts = [_plain(re.sub(r"\[\^[^\]\s]+\]", "", claim)).strip() for claim in lead]
    for text in sorted((t for t in texts if t), key=lambda t: len(t.split()) < 4):
        text = re.sub(r"[:;,]\s*$", ".", text)
        text = text if re.search(r"[.!?。！？]$", text) else text + "."
        return _fit(text, 90)
    sections = [_plain(b.text) for b in doc.blocks if b.kind == "heading" and b.level == 2][:4]
    if sections:
        return _fit(f"The {doc.title} page, on {', '.join(sections)}.", 90)
    return _fit(f"The {doc.title} page.", 90)


def _fit(text: str, limit: int) -> str:
    text = " ".join(text.split())
    while count_tokens(text) > limit:
        text = " ".join(text.split()[:-3]) + "…"
    return text


# ---- a plan for many documents -----------------------------------------------------------------


@dataclass(frozen=True)
class DocumentPlan:
    writes: dict[str, str]
    claims: int
    closed: int


def _document_fact(text: str, path: str) -> str | None:
    try:
        page = parse_page(text, path)
    except KbError:  # a page that does not parse is nobody's document page
        return None
    if page.meta.get("origin"):
        return str(page.meta["origin"])
    for fact in page.meta.get("facts") or []:  # pages written before `origin` existed
        if isinstance(fact, dict) and fact.get("key") == "document":
            return str(fact.get("value"))
    return None


def place(item: EvidenceItem, read: ReadPage, taken: dict[str, str]) -> str:
    """The page path of a document: from its source path; the same source keeps its page; a
    path held by another document or by a page this proposer did not write gets a suffix."""
    base = page_path_for(item.source, item.id)
    source = source_path(item.source) or item.id
    for path in (base, base[:-3] + f"-{item.id[3:9]}.md"):
        owner = taken.get(path)
        if owner is not None:
            if owner == source:
                return path
            continue
        text = read(path)
        if text is None:
            return path
        if is_generated(text, path) and _document_fact(text, path) in (source, None):
            return path
    return base[:-3] + f"-{item.id[3:19]}.md"


def plan_document_pages(items: list[EvidenceItem], read: ReadPage, writes: dict[str, str], withheld: Withheld = keep_all) -> DocumentPlan:
    """Pages for documents (kind ``document``), in the order given, and the folder index pages
    above them. ``writes`` (path -> text) receives them; it is read before the repository."""

    def current(path: str) -> str | None:
        return writes[path] if path in writes else read(path)

    taken: dict[str, str] = {}
    docs: list[Document] = []
    for item in items:
        path = place(item, current, taken)
        taken[path] = source_path(item.source) or item.id
        docs.append(read_document(item, path))
    # the anchors of every page first (links to them keep only anchors that exist)
    targets = _Targets(current)
    for doc in docs:
        targets[doc.source] = (doc.path, set())
    for doc in docs:
        doc.anchors = page_anchors(doc, Linker(doc, {}))
        targets[doc.source] = (doc.path, doc.anchors)
    labels = {label: (doc.source, heading) for doc in docs for label, heading in doc.labels.items()}
    claims = closed = 0
    for doc in docs:
        text, new, shut = render_document(doc, Linker(doc, targets, labels), current(doc.path), withheld)
        writes[doc.path] = text
        claims += new
        closed += shut
        _list_in_indexes(doc.path, parse_page(text, doc.path).summary, current, writes)
    return DocumentPlan(writes, claims, closed)


class _Targets(dict[str, tuple[str, set[str]]]):
    """Source path -> (page path, anchors) of the documents of this plan; a document outside it
    is found by the page its source path names, when that page says it holds that document."""

    def __init__(self, read: ReadPage) -> None:
        super().__init__()
        self.read = read

    def get(self, key: str, default: Any = None) -> Any:  # dict's own signature
        if key in self:
            return self[key]
        path = page_path_for(key, key)
        text = self.read(path)
        if text is None or _document_fact(text, path) != key:
            return default
        return path, parse_page(text, path).structure.anchors


def _list_in_indexes(path: str, summary: str, read: ReadPage, writes: dict[str, str]) -> None:
    """List the page in its folder's index, and each folder in its parent's, up to knowledge/."""
    child_id, l0 = page_id_for_path(path), summary
    folder = posixpath.dirname(path)
    while folder.startswith("knowledge"):
        index_path = f"{folder}/index.md"
        text = writes.get(index_path) or read(index_path)
        if text is None:
            name = folder.rsplit("/", 1)[-1]
            title = "Knowledge" if folder == "knowledge" else _file_title(name)
            summary = (
                "Entry page of the shared knowledge."
                if folder == "knowledge"
                else f"Pages made from the documents in {folder.removeprefix('knowledge/')}/."
            )
            text = new_index(folder, title, summary, "system")
        writes[index_path] = upsert_index_entry(text, index_path, child_id, l0)
        child_id, l0 = page_id_for_path(index_path), parse_page(writes[index_path], index_path).summary
        if folder == "knowledge":
            break
        folder = posixpath.dirname(folder)
