"""Inline markup of a source document as page Markdown, one piece of text at a time: plain text
for titles and summaries, inline HTML, reStructuredText roles and links, ``list-table`` rows.
Nothing here knows about documents or pages; links between pages are ``document_links``."""

from __future__ import annotations

import html
import re

RST_ROLE_RE = re.compile(r":([\w.:+-]+):`([^`]+)`")  # reStructuredText roles: :func:`echo`
RST_LINK_RE = re.compile(r"`([^`<]+?)\s*<([^`>]+)>`__?")
EXPLICIT_TITLE_RE = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)
INLINE_LINK_RE = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?(\s+\"[^\"]*\")?\s*\)")
REF_LINK_RE = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\[([^\]]*)\]")
TAG_RE = re.compile(r"<(/?)([A-Za-z][\w-]*)((?:\s+[^<>]*?)?)\s*(/?)>")
# an attribute list after an inline element or a heading (Python-Markdown attr_list):
# [link](x.md){.internal-link target=_blank}, **b**{: .red }, ## Title { #anchor }
_ATTR = r"""(?:[.#][\w-]+|[\w-]+=(?:"[^"]*"|'[^']*'|[^\s"'{}]+))"""
ATTR_LIST_RE = re.compile(rf"\{{:?\s*{_ATTR}(?:\s+{_ATTR})*\s*\}}")
HREF_RE = re.compile(r"""\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)


def plain_text(text: str) -> str:
    """Heading or summary text without link targets, images, tags and emphasis markers."""
    text = ATTR_LIST_RE.sub("", text)
    text = INLINE_LINK_RE.sub(lambda m: "" if m.group(1) else m.group(2), text)
    text = REF_LINK_RE.sub(lambda m: "" if m.group(1) else m.group(2), text)
    text = TAG_RE.sub("", text)
    text = re.sub(r"(?<!\w)[*_]{1,3}(?=\S)|(?<=\S)[*_]{1,3}(?!\w)", "", text)
    return " ".join(html.unescape(text).split())


def html_inline(text: str) -> str:
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
    text = RST_ROLE_RE.sub(lambda m: role_text(m.group(1), m.group(2)), text)
    text = RST_LINK_RE.sub(lambda m: f"[{m.group(1)}]({m.group(2)})", text)
    text = re.sub(r"\s*::$", ":", text.rstrip()) if text.rstrip().endswith("::") and text.strip() != "::" else text
    return re.sub(r"^(\s*)([#>])", r"\1\\\2", text)  # '#' or '>' opening a line is text in reStructuredText


def role_text(name: str, content: str) -> str:
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


def list_table(body: list[str]) -> list[str]:
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


def fold_label(label: str) -> str:
    return " ".join(label.split()).casefold()
