"""The offline Proposer's revision: it cannot rewrite a claim, so it withdraws what the review
flagged (the claim on a flagged line, with its citation if no other claim uses it) and marks a
page with conflicting current facts as disputed. A model Proposer revises by itself instead."""

from __future__ import annotations

import re

from agents.backend import WriteBackend
from agents.schemas import Comment
from kb.errors import FormatError
from kb.page import parse_page, render_page

REF_RE = re.compile(r"\[\^([^\]\s]+)\]")


def withdraw_flagged(backend: WriteBackend, comments: tuple[Comment, ...]) -> int:
    """Apply the offline fixes; returns how many edits were made."""
    by_path: dict[str, list[Comment]] = {}
    for comment in comments:
        by_path.setdefault(comment.path, []).append(comment)
    edits = 0
    for path, items in sorted(by_path.items()):
        text = backend.page_text(path)
        if text is None:
            continue
        try:
            page = parse_page(text, path)
        except FormatError:
            continue
        lines = text.split("\n")
        drop_lines = {c.line for c in items if c.line > page.header_lines and lines[c.line - 1].lstrip().startswith(("-", "*"))}
        labels_dropped: set[str] = set()
        for n in drop_lines:
            labels_dropped.update(REF_RE.findall(lines[n - 1]))
        kept = [line for n, line in enumerate(lines, 1) if n not in drop_lines]
        still_used = {label for line in kept if not line.startswith("[^") for label in REF_RE.findall(line)}
        kept = [line for line in kept if not (line.startswith("[^") and line[2 : line.index("]")] in labels_dropped - still_used)]
        new_text = "\n".join(kept)
        if any(c.kind == "conflict" for c in items):
            page2 = parse_page(new_text, path)
            meta = dict(page2.meta)
            meta["status"] = "disputed"
            new_text = render_page(meta, page2.body)
        if new_text != text:
            backend.write_page(path, new_text)
            edits += 1
    return edits
