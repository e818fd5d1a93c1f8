"""Reading a stored document: its front matter, title, blocks (paragraphs, code, tables, lists,
quotes, HTML, admonitions, API pointers), link references and MyST targets, and the page path
its source path names. A stored document keeps its line numbers (``kb evidence add`` stores it
verbatim), so every block carries the evidence lines it stands on.

Markdown is read with markdown-it; doc-tool constructs around it are found line by line first:
admonitions (``!!! note``, ``??? tip``, ``:::note``, MyST ```` ```{note} ````, ``.. note::``)
become admonition blocks with their content, API directives (``::: pkg.Class``,
``.. autoclass::``) an API pointer, Jinja and snippet lines are dropped, and ``{eval-rst}``
bodies are read as reStructuredText (``rst_blocks``). A ``#`` line inside a code fence is code,
never a heading.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from agents.offline.markup import fold_label, plain_text
from agents.protocols import EvidenceItem
from kb.controls import clean_label
from kb.intake import INCLUDE_RE, SNIPPET_BLOCK_RE
from kb.markdown import slugify
from kb.yamltext import YamlProblem, load_yaml

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

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

FENCE_RE = re.compile(r"^(\s{0,3})(`{3,}|~{3,})\s*([^`\s]*)(.*)$")
ADMONITION_RE = re.compile(r'^(?:!!!|\?\?\?\+?)\s*([\w-]+)?(?:\s+[\w-]+)*(?:\s+"([^"]*)")?\s*$')  # !!! note inline end "Title"
# pymdownx blocks: /// name | title, options indented below, closed by the same run of slashes
BLOCKS_OPEN_RE = re.compile(r"^(/{3,})\s*([\w-]+)\s*(?:\|\s*(.*?))?\s*$")
BLOCKS_OPTION_RE = re.compile(r"^\s+[\w-]+:")
TAB_RE = re.compile(r'^===\+?\s+"([^"]*)"\s*$')
COLON_OPEN_RE = re.compile(r"^(:{3,})\s*\{?([\w.-]+)\}?\s*(.*)$")
COLON_CLOSE_RE = re.compile(r"^:{3,}\s*$")
MYST_RE = re.compile(r"^(`{3,}|~{3,})\{([\w-]+)\}\s*(.*)$")
REST_RE = re.compile(r"^\.\.\s+([\w:-]+)::\s*(.*)$")
DROP_LINE_RE = re.compile(r"^\s*(?:\{%.*%\}|\{#.*#\}|\[TOC\]|<!--.*-->|\([^()\s]+\)=|\{:?\s*[.#][^{}]*\})\s*$")
MYST_TARGET_RE = re.compile(r"^\s*\(([^()\s]+)\)=\s*$")  # (label)= before a heading: a {ref} target
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
    files: dict[str, EvidenceItem] = field(default_factory=dict)  # the documents added with it, by source path


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


def trim_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
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
    m = INCLUDE_RE.match(text)
    if m:
        return Block("include", lines[i : i + 1], text=next(g for g in m.groups() if g).strip()), i + 1
    if SNIPPET_BLOCK_RE.match(text):
        return _snippet_block(lines, i)
    m = BLOCKS_OPEN_RE.match(text)
    if m:
        return _slash_block(lines, i, m)
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


def _slash_block(lines: list[tuple[int, str]], i: int, m: re.Match[str]) -> tuple[Block | None, int]:
    """A pymdownx block: ``/// tip | Title``, its indented options (``type: warning``), its
    content, and the closing line of the same slashes (kept in the block). An admonition, a
    ``details`` or a ``tab`` is a labelled block; ``html`` and any other block its content."""
    slashes, name = m.group(1), m.group(2).lower()
    depth, j, fence = 1, i + 1, None
    while j < len(lines):
        text = lines[j][1]
        f = FENCE_RE.match(text)
        if f and (fence is None or f.group(2)[0] == fence[0]):
            fence = f.group(2) if fence is None else None
        elif fence is None and text.strip() == slashes:
            depth -= 1
            if depth == 0:
                break
        elif fence is None and (o := BLOCKS_OPEN_RE.match(text)) and o.group(1) == slashes:
            depth += 1
        j += 1
    start = i + 1
    options: dict[str, str] = {}
    while start < min(j, len(lines)) and BLOCKS_OPTION_RE.match(lines[start][1]):
        key, _, value = lines[start][1].strip().partition(":")
        options[key] = value.strip()
        start += 1
    children = read_blocks(lines[start:j])
    end = min(j + 1, len(lines))
    title = plain_text(m.group(3) or "").strip().strip("\"'")
    kind = options.get("type", "").lower() if name in ("admonition", "details") else name
    if name in ADMONITIONS or name in ("tab", "details") or kind in ADMONITIONS:
        label = title or (kind or name).title()
        return (Block("admonition", lines[i:end], text=label, children=children) if children else None), end
    return (Block("group", lines[i:end], children=children) if children else None), end


def _snippet_block(lines: list[tuple[int, str]], i: int) -> tuple[Block | None, int]:
    """A pymdownx snippets block: ``--8<--``, one file a line, ``--8<--``; each file an include."""
    close = next((j for j in range(i + 1, len(lines)) if SNIPPET_BLOCK_RE.match(lines[j][1])), None)
    if close is None:
        return None, i + 1
    names = [(n, t.strip().strip("\"'")) for n, t in lines[i + 1 : close] if t.strip() and not t.strip().startswith(";")]
    blocks = [Block("include", [(n, t)], text=t) for n, t in names]
    return Block("group", lines[i : close + 1], children=blocks), close + 1


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
        code = trim_lines([line for line in lines[i + 1 : end] if not re.match(r"^\s*:[\w-]+:", line[1])])
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
            code = trim_lines(lines[j:close])
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
        code = trim_lines(body)
        return Block("code", code, text=argument or CODE_DIRECTIVES[name]) if code else None
    if name in ADMONITIONS:
        children = rst_blocks(([(lines[i][0], argument)] if argument else []) + inner)
        return Block("admonition", lines[i:end], text=name.title(), children=children) if children else None
    if name in CONTAINER_DIRECTIVES:
        children = rst_blocks(inner)
        label = CONTAINER_DIRECTIVES[name].format(argument).strip()
        return Block("admonition" if label else "group", lines[i:end], text=label, children=children) if children else None
    if name in TABLE_DIRECTIVES:
        return Block("table", trim_lines(lines[i:end]), text="list-table")
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
        span = trim_lines(lines[start:end])
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
                out.setdefault(fold_label(d.group(1)), d.group(2))
    return out


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


def file_title(source: str) -> str:
    parts = source_path(source).split("/")
    stem = parts[-1]
    for ext in DOC_EXTENSIONS:
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
    if stem.lower() in ("index", "readme", "_index") and len(parts) > 1:
        stem = parts[-2]
    words = re.sub(r"[-_]+", " ", stem).strip()
    return (words[:1].upper() + words[1:]) if words else "Document"


# ---- files a document includes ----------------------------------------------------------------

CODE_LANGUAGES = {
    ".py": "python", ".js": "javascript", ".ts": "typescript", ".sh": "bash", ".toml": "toml", ".yml": "yaml",
    ".yaml": "yaml", ".json": "json", ".html": "html", ".css": "css", ".go": "go", ".rs": "rust", ".java": "java",
    ".c": "c", ".h": "c", ".cpp": "cpp", ".rb": "ruby", ".sql": "sql", ".ini": "ini", ".cfg": "ini", ".console": "console",
}  # fmt: skip


def is_code_source(source: str) -> bool:
    """A source that is a program or a configuration file, not prose: it is one code block."""
    return posixpath.splitext(source_path(source).lower())[1] in CODE_LANGUAGES


def code_language(source: str) -> str:
    return CODE_LANGUAGES.get(posixpath.splitext(source_path(source).lower())[1], "")


def split_range(target: str) -> tuple[str, int, int | None]:
    """An include's file and line range: ``x.py:3:5`` (pymdownx snippets) -> (x.py, 3, 5)."""
    m = re.match(r"^(.*?):(\d+)(?::(\d+))?$", target)
    if not m:
        return target, 1, None
    return m.group(1), max(1, int(m.group(2))), int(m.group(3)) if m.group(3) else None


def include_targets(blocks: list[Block]) -> list[str]:
    """The files the blocks include, in order (nested blocks included)."""
    out: list[str] = []
    for block in blocks:
        if block.kind == "include":
            out.append(split_range(block.text)[0])
        out += include_targets(block.children)
    return out


def resolve_include(source: str, target: str, files: dict[str, EvidenceItem]) -> EvidenceItem | None:
    """The document added with ``source`` that an include names: the target read from the
    including file's folder, then from each folder above it (snippet tools resolve against the
    docs folder or the project root), the nearest first; None when none was added."""
    target = target.strip().strip("\"'").replace("\\", "/")
    if not target or "://" in target:
        return None
    folder = posixpath.dirname(source)
    while True:
        candidate = posixpath.normpath(posixpath.join(folder, target.lstrip("/")))
        if candidate in files and not candidate.startswith("../"):
            return files[candidate]
        if not folder:
            return None
        folder = posixpath.dirname(folder)


def read_document(item: EvidenceItem, path: str) -> Document:
    """Parse one stored document: title, blocks, link references. A program (``x.py``) is one
    code block under its file's name."""
    raw = item.text.splitlines()
    if is_code_source(item.source):
        code = trim_lines(list(enumerate(raw, 1)))
        blocks = [Block("code", code, text=code_language(item.source))] if code else []
        return Document(item, source_path(item.source), path, source_path(item.source).rsplit("/", 1)[-1] or item.id, blocks, {})
    meta, skip = _front_matter(raw)
    numbered = [(n, "" if n <= skip else text) for n, text in enumerate(raw, 1)]
    blocks = read_blocks(numbered)
    title = str(meta.get("title") or "").strip() if isinstance(meta.get("title"), str | int | float) else ""
    first_h1 = next((b for b in blocks if b.kind == "heading" and b.level == 1), None)
    if not title and first_h1 is not None:
        title = plain_text(first_h1.text)
    if first_h1 is not None and plain_text(first_h1.text) == title:
        blocks = [b for b in blocks if b is not first_h1]
    title = clean_label(title) or file_title(item.source or item.id)  # no ESC, bidi or line break in a title
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
        name = plain_text(HEADING_ATTR_RE.sub("", heading.group(1))) if heading else ""
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
