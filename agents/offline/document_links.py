"""Links of one document as links of its page: to another source document's page (with an anchor
that page has), MyST ``{ref}``/``{doc}`` roles to the pages they name, reference links inline;
anything that leads nowhere inside the knowledge base becomes its text."""

from __future__ import annotations

import posixpath
import re

from agents.offline.document_reader import DOC_EXTENSIONS, Document
from agents.offline.markup import (
    ATTR_LIST_RE,
    EXPLICIT_TITLE_RE,
    INLINE_LINK_RE,
    REF_LINK_RE,
    fold_label,
    html_inline,
    plain_text,
    role_text,
)
from kb.markdown import CODESPAN_RE, slugify

# MyST roles ({func}`echo`, {ref}`text <label>`), matched with the code spans so that a code span
# holding braces (`--{on}/--{off}`) is never read as a role
ROLE_RE = re.compile(r"(\{[\w.:+-]+\})?`([^`]+)`")
SHORTCUT_LINK_RE = re.compile(r"(?<![\]!\\])\[([^\[\]]+)\](?![\[(:])")
URL_RE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)


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
            return role_text(name, m.group(2))
        explicit = EXPLICIT_TITLE_RE.match(m.group(2))
        text, target = (explicit.group(1).strip(), explicit.group(2).strip()) if explicit else (m.group(2).strip(), m.group(2).strip())
        href = self.href(target) if name == "doc" else self._label_href(target)
        return f"[{text}]({href})" if href else text

    def _label_href(self, label: str) -> str | None:
        found = self.labels.get(label)
        if found is None:
            return None
        source, heading = found
        anchor = slugify(plain_text(heading)) if heading else ""
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
            url = self.doc.references.get(fold_label(label))
            if url is None:
                return m.group(0)
            if URL_RE.match(url):  # kept as a reference link: its definition goes on the page
                self.definitions[fold_label(label)] = f"[{label}]: {url}"
                return m.group(0)
            return f"{m.group(1)}[{m.group(2)}]({url})"

        def shortcut(m: re.Match[str]) -> str:
            url = self.doc.references.get(fold_label(m.group(1)))
            if url is None:
                return m.group(0)
            if URL_RE.match(url):
                self.definitions[fold_label(m.group(1))] = f"[{m.group(1)}]: {url}"
                return m.group(0)
            return f"[{m.group(1)}]({url})"

        text = ATTR_LIST_RE.sub("", text)  # code spans are hidden: `{.x}` in code stays
        text = REF_LINK_RE.sub(ref_link, text)
        text = SHORTCUT_LINK_RE.sub(shortcut, text)
        text = html_inline(text)

        def link(m: re.Match[str]) -> str:
            if m.group(1):  # an image: its alt text, if any, is all a page can keep
                return ""
            target = self.href(m.group(3))
            label = m.group(2)
            return f"[{label}]({target})" if target is not None else label

        text = INLINE_LINK_RE.sub(link, text)
        return text.replace("[^", "[\\^").replace("[[", "[\\[")
