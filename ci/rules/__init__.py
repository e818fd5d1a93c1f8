"""One module per rule family. Each exposes ``check(snapshot, selection) -> list[Finding]``."""

from __future__ import annotations

from collections.abc import Iterator

from ci.selection import Selection
from ci.snapshot import Snapshot
from kb.page import Page


def selected_pages(snapshot: Snapshot, selection: Selection) -> Iterator[Page]:
    """The selected pages that parse (a page that does not is reported by the frontmatter rule)."""
    for path in selection.pages:
        page = snapshot.page(path)
        if isinstance(page, Page):
            yield page
