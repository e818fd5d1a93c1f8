"""Folder index pages as the offline Proposer writes them: ``- [[child]]: L0`` entries."""

from __future__ import annotations

import re

from kb.page import parse_page, render_page


def upsert_index_entry(text: str, path: str, child_id: str, l0: str) -> str:
    """Add or refresh ``- [[child]]: L0`` in a folder index page, keeping everything else."""
    page = parse_page(text, path)
    line = f"- [[{child_id}]]: {l0}"
    pattern = re.compile(rf"^\s*[-*+]\s+\[\[{re.escape(child_id)}(?:[#|][^\]]*)?\]\].*$", re.M)
    body = page.body
    if pattern.search(body):
        body = pattern.sub(lambda _: line, body, count=1)
    else:
        entries = list(re.finditer(r"^\s*[-*+]\s+\[\[[^\]]+\]\].*$", body, re.M))
        if entries:
            end = entries[-1].end()
            body = body[:end] + "\n" + line + body[end:]
        else:
            body = body.rstrip("\n") + ("\n\n## Pages\n\n" if "## Pages" not in body else "\n\n") + line + "\n"
    return render_page(page.meta, body)


def new_index(folder: str, title: str, summary: str, scope: str) -> str:
    meta = {"id": f"{folder}/index", "type": "index", "title": title, "summary": summary, "scope": scope, "status": "active"}
    return render_page(meta, f"# {title}\n\n## Overview\n\n{summary}\n\n## Pages\n\n")
