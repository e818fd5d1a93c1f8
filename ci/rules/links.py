"""Every internal link and anchor resolves, and no page links into a scope its readers cannot see."""

from __future__ import annotations

import posixpath

from ci.findings import Finding
from ci.rules import selected_pages
from ci.selection import Selection
from ci.snapshot import Snapshot
from kb.page import Page, page_id_for_path
from kb.scopes import scope_for_path, visible_from


def _resolve_md(page_path: str, target: str) -> str:
    folder = posixpath.dirname(page_path)
    return posixpath.normpath(posixpath.join(folder, target)) if target else page_path


def check_page(snapshot: Snapshot, page: Page) -> list[Finding]:
    out = []
    own_scope = scope_for_path(page.path)
    for link in page.structure.links:
        if link.kind == "wiki":
            target_id = link.target.removesuffix(".md")
            target_path = target_id + ".md"
            shown = f"[[{link.target}{'#' + link.anchor if link.anchor else ''}]]"
        else:
            target_path = _resolve_md(page.path, link.target)
            shown = f"({link.target}{'#' + link.anchor if link.anchor else ''})"
            if target_path.startswith("../") or target_path == "..":
                out.append(Finding(page.path, link.line, "link.outside", f"link {shown} points outside the repository"))
                continue
            if not target_path.endswith(".md"):
                if not (snapshot.root / target_path).exists():
                    out.append(Finding(page.path, link.line, "link.broken", f"link {shown}: no file {target_path}"))
                continue
        if not snapshot.has_page(target_path):
            out.append(
                Finding(
                    page.path,
                    link.line,
                    "link.broken",
                    f"link {shown}: no page `{page_id_for_path(target_path)}`",
                    hint="fix the target or create the page",
                )
            )
            continue
        if not visible_from(own_scope, scope_for_path(target_path)):
            out.append(
                Finding(
                    page.path,
                    link.line,
                    "link.scope",
                    f"link {shown} points into another scope ({scope_for_path(target_path)})",
                    hint="pages may link only to system pages and pages of their own user",
                )
            )
            continue
        if link.anchor:
            target = page if target_path == page.path else snapshot.page_by_id(page_id_for_path(target_path))
            if target is not None and link.anchor not in target.structure.anchors:
                out.append(
                    Finding(
                        page.path,
                        link.line,
                        "link.anchor",
                        f"link {shown}: `{page_id_for_path(target_path)}` has no section `#{link.anchor}`",
                        hint="anchors are heading slugs; `kb read PAGE` lists them",
                    )
                )
    return out


def check(snapshot: Snapshot, selection: Selection) -> list[Finding]:
    out: list[Finding] = []
    for page in selected_pages(snapshot, selection):
        out.extend(check_page(snapshot, page))
    return out
