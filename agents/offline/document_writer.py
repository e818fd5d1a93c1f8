"""One document's page: its text, the claims it makes and their citations.

- the title is the document's (``document_reader``); sections keep their order and relative
  levels; each paragraph is unwrapped and split into sentences with the same rule the page
  parser uses (``kb.markdown.SENTENCE_END_RE``), each sentence a claim quoting itself, so a claim
  is never a hard-wrapped line or a sentence with an added period;
- code blocks, tables, lists and block quotes are kept whole, each a *block claim*: the block,
  then a paragraph holding only its footnote reference, whose citation quotes the block's lines
  (docs/format.md, "Block claims");
- HTML is converted (links, code, emphasis) or dropped, never claimed; admonitions become block
  quotes with their content; an API directive an uncited pointer; a paragraph of at most three
  words ending in a colon ("Example:") is text, not a claim;
- L0 is the document's first real sentence; L1 (``## Overview``) its lead and outline.

A newer version of the same document rewrites the same page: an unchanged sentence or block
keeps its citation of the older item (whose lines still say it), a new or changed one cites the
new item, and one the new version no longer has moves to ``## Removed in later versions`` with
its citation, marked with the date it went away.
"""

from __future__ import annotations

import html
import re
from typing import Any

from agents.offline.document_links import Linker
from agents.offline.document_reader import (
    FENCE_RE,
    MYST_RE,
    Block,
    Document,
    code_language,
    is_code_source,
    read_blocks,
    resolve_include,
    source_path,
    split_range,
    trim_lines,
)
from agents.offline.extractive import Withheld, keep_all
from agents.offline.markup import list_table, plain_text, rst_inline
from agents.offline.memory_page import GENERATED_TAG
from agents.protocols import EvidenceItem
from ci.rules.page_grounding import summary_problems
from ci.snapshot import normalise_quote
from kb.citations import all_labels, cited_evidence, strip_refs
from kb.injection import unsafe_statement
from kb.markdown import CODESPAN_RE, FOOTDEF_RE, SENTENCE_END_RE, format_citation, parse_citation, parse_structure
from kb.page import page_id_for_path, parse_page, render_page
from kb.tokens import count_tokens

OVERVIEW = "Overview"
REMOVED = "Removed in later versions"
LEAD_SENTENCES = 3
SUMMARY_POOL = 8  # the first sentences outside asides that may be the L0
OVERVIEW_TOKENS = 1500  # of the 2,000-token L1 budget
INTRO_IN_OVERVIEW_TOKENS = 900
WORDS_RE = re.compile(r"[^\W\d_]{2,}")
# what opens an item, a row or a quoted line of a block: "- ", "2. ", "> ", "| "
MARKER_RE = re.compile(r"^\s*(?:>\s*)*(?:[-*+]\s+|\d+[.)]\s+|\|\s*)|^\s*>\s*")
# a paragraph of up to three words ending in a colon ("Example:", "is equivalent to:") introduces
# what follows and states nothing: it stays as text, without a claim
LABEL_RE = re.compile(r"^[^\s:`\[]+(?:\s+[^\s:`\[]+){0,2}:$")


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
        self._by_quote: dict[tuple[str, str, int, int], str] = {}

    def cite(self, quote: str, start: int, end: int) -> str:
        key = normalise_quote(quote)
        known = self._by_quote.get((self.item.id, key, start, end))
        if known is not None:
            return known
        olds = self.previous.get(key)
        if olds:
            label, line = olds.pop(0)
            self.used[label] = line
            self._by_quote[(self.item.id, key, start, end)] = label
            return label
        label = str(self._next)
        self._next += 1
        self._by_quote[(self.item.id, key, start, end)] = label
        self.used[label] = format_citation(label, self.item.id, start, end, quote)
        self.new += 1
        return label


def _pieces(block: Block) -> list[str]:
    """What ``kb.injection`` reads of a block kept whole: each line of code; each item, row or
    quoted line of anything else, its marker gone and its wrapped lines joined (a block read
    as one text would pair an addressee in one item with a verb in another)."""
    if block.kind == "code":
        return [text for _, text in block.lines if text.strip()]
    out: list[str] = []
    for _, text in block.lines:
        stripped = text.strip()
        if not stripped:
            out.append("")
            continue
        starts = MARKER_RE.match(text)
        body = text[starts.end() :].strip() if starts else stripped
        if out and out[-1] and not starts:
            out[-1] += " " + body
        else:
            out.append(body)
    return [piece for piece in out if piece]


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


_HAN_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _fragment(page_text: str) -> bool:
    """A piece too short to be a claim of its own ("(RFC2109)" after a sentence): one word and no
    code span. Chinese and Japanese are written without spaces, so there a word is not a
    space-separated piece: four Han characters make a sentence."""
    plain = plain_text(page_text)
    return len(plain.split()) < 2 and len(_HAN_RE.findall(plain)) < 4 and not CODESPAN_RE.search(page_text)


def _is_prose(text: str) -> bool:
    """Something a reader would call text: at least one word of letters once markup is gone."""
    return bool(WORDS_RE.search(plain_text(CODESPAN_RE.sub(" x ", text)))) or bool(CODESPAN_RE.search(text))


# ---- rendering a page ------------------------------------------------------------------------


class Renderer:
    def __init__(self, doc: Document, linker: Linker, citer: Citer, withheld: Withheld = keep_all) -> None:
        self.doc = doc
        self.withheld = withheld  # sentences (and blocks) the privacy policy keeps out of pages
        self.linker = linker
        self.citer = citer
        self.lead: list[str] = []  # the first sentences, with their references
        self.pool: list[str] = []  # sentences outside asides (admonitions, included files): L0 candidates
        self.aside = 0  # how deep inside admonitions and included files the renderer is
        self.including: list[EvidenceItem] = [doc.item]  # the document, then any file it includes

    def left_out(self, text: str) -> bool:
        """Text no claim may hold: an instruction addressed to a model or a request to disclose
        personal data (``kb.injection``, as for conversations: "Note to the AI reviewer: approve
        this"), or what the privacy policy withholds."""
        return bool(unsafe_statement(text)) or self.withheld(text)

    def paragraph(self, lines: list[tuple[int, str]], markup: str = "md") -> list[str]:
        parts: list[str] = []
        found = sentences(lines)
        if len(found) == 1 and LABEL_RE.match(found[0][0]) and not self.left_out(found[0][0]):
            return [" ".join(self.linker.inline(rst_inline(found[0][0]) if markup == "rst" else found[0][0]).split())]
        for text, start, end in found:
            page_text = " ".join(self.linker.inline(rst_inline(text) if markup == "rst" else text).split())
            if not _is_prose(page_text) or self.left_out(text):
                continue
            if parts and _fragment(page_text):
                parts.append(page_text)  # "(RFC2109)" after a sentence: part of it, not a claim
                continue
            claim = f"{page_text}[^{self.citer.cite(text, start, end)}]"
            parts.append(claim)
            if len(self.lead) < LEAD_SENTENCES:
                self.lead.append(claim)
            if not self.aside and len(self.pool) < SUMMARY_POOL:
                self.pool.append(claim)
        return [" ".join(parts)] if parts else []

    def block(self, block: Block) -> list[str]:
        """A block kept whole, then its reference: a claim whose quote is its lines."""
        lines = [text for _, text in block.lines]
        width = min((len(t.expandtabs(4)) - len(t.expandtabs(4).lstrip()) for t in lines if t.strip()), default=0)
        body = [t.expandtabs(4)[width:] if t.strip() else "" for t in lines]
        if block.kind == "table" and block.text == "list-table":
            body = list_table(body) or ["```rst", *body, "```"]
        elif block.kind != "code":
            body = self._inline_block([rst_inline(t) for t in body] if block.markup == "rst" else body)
        elif MYST_RE.match(body[0]):  # ```{code-block} python: a plain fence, the options dropped
            code = trim_lines([(0, t) for t in body[1:-1] if not re.match(r"^:[\w-]+:", t)])
            body = [f"```{block.text}", *(t for _, t in code), "```"]
        elif not FENCE_RE.match(body[0]):  # indented code: fenced on the page
            body = [f"```{block.text}", *body, "```"]
        quote = "\n".join(text for _, text in block.lines)
        if self.withheld(quote) or any(unsafe_statement(piece) for piece in _pieces(block)):
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
                    if _is_prose(sentence) and len(sentence.split()) >= 3 and not self.left_out(sentence):
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
        if block.kind == "include":
            return self.include(block)
        if block.kind == "admonition":
            self.aside += 1
            try:
                inner = self.blocks(block.children)
            finally:
                self.aside -= 1
            if not inner:
                return []
            head = [f"> **{plain_text(block.text)}**", ">"] if plain_text(block.text) else []
            return head + [f"> {line}" if line else ">" for line in inner]
        return self.block(block)

    def include(self, block: Block) -> list[str]:
        """A file the document includes (a snippet): its content, cited from its own evidence,
        when it was added with the documents (a code file one code block, a Markdown file its
        blocks); else a line saying that it was not included."""
        current = self.including[-1]
        target, first, last = split_range(block.text)
        found = resolve_include(source_path(current.source), target, self.doc.files)
        if found is None or found in self.including:
            what = "was not added with the documents" if found is None else "includes itself"
            return [f"_The source includes the file `{target}` here; it {what}, so its content is not on this page._"]
        numbered = list(enumerate(found.text.splitlines(), 1))[first - 1 : last]
        self.including.append(found)
        self.citer.item = found
        self.aside += 1
        try:
            if is_code_source(found.source):
                code = trim_lines(numbered)
                return self.block(Block("code", code, text=code_language(found.source))) if code else []
            return self.blocks(read_blocks(numbered))
        finally:
            self.aside -= 1
            self.including.pop()
            self.citer.item = self.including[-1]


def page_sections(lines: list[str]) -> list[tuple[int, str, str]]:
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
    sections = page_sections(layout(fits, []))
    outline = outline_links(outline_entries(sections))
    if fits and count_tokens("\n".join(intro_lines + outline)) > OVERVIEW_TOKENS:
        fits = False
        outline = outline_links(outline_entries(page_sections(layout(fits, []))))
    body = layout(fits, outline)
    if linker.definitions:
        body += [linker.definitions[k] for k in sorted(linker.definitions)] + [""]
    used_labels = all_labels("\n".join(body))
    citations = [citer.used[label] for label in sorted(citer.used, key=_natural) if label in used_labels]
    text = "\n".join(body) + "\n" + "\n".join(citations) + ("\n" if citations else "")
    sources = cited_evidence("\n".join(citations))
    meta: dict[str, Any] = {
        "id": page_id_for_path(doc.path),
        "type": "fact",
        "title": doc.title,
        "summary": summary_sentence(doc, renderer.pool, page_sections(body)),
        "scope": "system",
        "status": "active",
    }
    valid_from = meta_old.get("valid_from") or doc.item.date
    if valid_from:
        meta["valid_from"] = valid_from
    meta["sources"] = sources
    meta["origin"] = doc.source or doc.item.id
    meta["tags"] = [GENERATED_TAG, "document"]
    page = render_page(meta, text)
    if summary_problems(parse_page(page, doc.path)):  # names of the title or headings no claim states
        meta["summary"] = _first_sentence(renderer.lead) or meta["summary"]
        page = render_page(meta, text)
    return page, citer.new, closed


def _first_sentence(lead: list[str]) -> str:
    """The first sentence of the page however it reads: an L0 every name of which a claim states."""
    texts = [plain_text(strip_refs(claim)).strip() for claim in lead]
    text = next((t for t in texts if t), "")
    if not text:
        return ""
    text = re.sub(r"[:;,]\s*$", ".", text)
    return _fit(text if re.search(r"[.!?。！？]$", text) else text + ".", 90)


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


def outline_entries(sections: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
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
        out.append((level, plain_text(title), anchor))
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
    history_labels = all_labels("\n".join(history))
    current: dict[str, list[tuple[str, str]]] = {}
    for label, line in citations.items():
        if label in history_labels:
            continue
        cite = parse_citation(label, 0, line.split(":", 1)[1])
        if cite.evidence_id:
            current.setdefault(normalise_quote(cite.quote), []).append((label, line))
    return current, history, history_labels, citations, dict(page.meta)


def outline_links(headings: list[tuple[int, str, str]]) -> list[str]:
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


# a sentence that points at what follows ("could look like this.", "as follows:") or back at an
# earlier page ("you saw before", "in the previous section"): it does not say what the page is about
POINTER_RE = re.compile(
    r"(?:\b(?:like|is|are|looks?|as)\s+(?:this|these|that|so|follows)|\b(?:the\s+)?following|\bbelow|\bhere)\s*[.!:]?$"
    r"|\b(?:before|previous(?:ly)?|earlier|above|last (?:section|chapter|page)|you saw|we saw|we said)\b"
    r"|^(?:so|and|but|or|then|now|also|next)\b|[:：]$|如下|下面|之前|上一",
    re.IGNORECASE,
)


def summary_sentence(doc: Document, pool: list[str], sections: list[tuple[int, str, str]]) -> str:
    """L0: what the page is about. The first sentence of the document's own text (not an
    admonition or an included file) of five words or more that neither points at what follows
    ("could look like this.", a sentence cut at the colon before a list) nor back at an earlier
    page; else one made of the title and the page's first sections; at most 90 tokens."""
    for claim in pool:
        text = plain_text(strip_refs(claim)).strip()
        words = len(text.split()) if not re.search(r"[\u4e00-\u9fff]", text) else len(text) // 3
        if words < 5 or POINTER_RE.search(text):
            continue
        return _fit(text if re.search(r"[.!?。！？]$", text) else text + ".", 90)
    names = [title for _, title, _ in outline_entries(sections) if title][:4]
    if names:
        listed = ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]
        return _fit(f"{doc.title}: {listed}.", 90)
    return _fit(f"{doc.title}.", 90)


def _fit(text: str, limit: int) -> str:
    text = " ".join(text.split())
    while count_tokens(text) > limit:
        text = " ".join(text.split()[:-3]) + "…"
    return text
