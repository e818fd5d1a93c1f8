"""Folder index pages: every folder has an index.md listing exactly its children, each with its L0.

A listing entry is a list item that starts with a wikilink: ``- [[knowledge/a/b]]: <L0>``.
A page not listed in its folder's index is an orphan.
"""

from __future__ import annotations

import re

from ci.findings import Finding
from ci.selection import Selection
from ci.snapshot import Snapshot, normalise_quote
from kb.page import Page

ENTRY_RE = re.compile(r"^\s*[-*+]\s+\[\[([^\]#|]+)(?:#[^\]|]*)?(?:\|[^\]]*)?\]\]\s*[:\-–—]?\s*(.*)$")


def children_of(snapshot: Snapshot, folder: str) -> dict[str, str]:
    """Child page id -> path: pages directly in ``folder`` and the index.md of each subfolder."""
    return snapshot.folder_children.get(folder, {})


def listing(page: Page) -> list[tuple[str, str, int]]:
    """(target id, text after the link, file line) for each listing entry of an index page."""
    entries = []
    in_fence = False
    for n, line in enumerate(page.body.splitlines(), start=page.header_lines + 1):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = ENTRY_RE.match(line)
        if match:
            entries.append((match.group(1).strip().removesuffix(".md"), match.group(2), n))
    return entries


def check_folder(snapshot: Snapshot, folder: str) -> list[Finding]:
    index_path = f"{folder}/index.md"
    children = children_of(snapshot, folder)
    if not snapshot.has_page(index_path):
        out = [
            Finding(
                index_path,
                1,
                "index.missing",
                f"folder {folder}/ has no index.md",
                hint="create it with `type: index` and list every page of the folder",
            )
        ]
        out += [Finding(path, 1, "index.orphan", f"not reachable: {folder}/ has no index.md") for path in children.values()]
        return out
    index = snapshot.page(index_path)
    if not isinstance(index, Page):
        return []  # reported by the frontmatter rule
    out = []
    listed: dict[str, int] = {}
    for target, text, line in listing(index):
        if target in listed:
            out.append(Finding(index_path, line, "index.duplicate", f"`{target}` is listed twice"))
            continue
        listed[target] = line
        if target not in children:
            out.append(
                Finding(
                    index_path,
                    line,
                    "index.extra",
                    f"lists `{target}`, which is not a page of this folder",
                    hint="list only the folder's pages and subfolder indexes",
                )
            )
            continue
        child = snapshot.page(children[target])
        if isinstance(child, Page) and child.summary and normalise_quote(child.summary) not in normalise_quote(text):
            out.append(
                Finding(
                    index_path,
                    line,
                    "index.summary",
                    f"the entry for `{target}` does not show its L0 summary",
                    hint=f"write: - [[{target}]]: {child.summary}",
                )
            )
    for child_id, path in sorted(children.items()):
        if child_id not in listed:
            out.append(
                Finding(index_path, 1, "index.unlisted", f"does not list `{child_id}`", hint=f"add: - [[{child_id}]]: <its summary>")
            )
            out.append(Finding(path, 1, "index.orphan", f"not listed in {index_path}"))
    return out


def check(snapshot: Snapshot, selection: Selection) -> list[Finding]:
    out: list[Finding] = []
    for folder in selection.folders:
        out.extend(check_folder(snapshot, folder))
    return out
