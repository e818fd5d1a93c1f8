"""An in-memory test double for the agents' backend protocols, and the evidence id it knows."""

from __future__ import annotations

from kb.errors import ConflictError, NotFoundError, PathError


class FakeBackend:
    """An in-memory ReadBackend + WriteBackend that records each call as (method, arguments).

    Pages are keyed by path (``knowledge/x.md``), evidence by id (a list of lines). Failures are
    the backend's own KbErrors, as the real one raises them: unknown ids, edits that do not match
    exactly once, writes outside knowledge/ and users/.
    """

    def __init__(self, pages: dict[str, str] | None = None, evidence: dict[str, list[str]] | None = None) -> None:
        self.pages = dict(pages or {})
        self.evidence = dict(evidence or {})
        self.calls: list[tuple[str, dict[str, object]]] = []

    def called(self) -> list[str]:
        return [name for name, _ in self.calls]

    def search(self, query: str, k: int = 8, include_evidence: bool = True) -> str:
        self.calls.append(("search", {"query": query, "k": k, "include_evidence": include_evidence}))
        hits = [path for path, text in sorted(self.pages.items()) if query.lower() in text.lower()]
        return "\n".join(hits[:k]) or "no hits"

    def read_doc(self, page_id: str) -> str:
        self.calls.append(("read_doc", {"page_id": page_id}))
        return self._page(f"{page_id}.md")

    def read_section(self, page_id: str, anchor: str, cursor: int | None = None) -> str:
        self.calls.append(("read_section", {"page_id": page_id, "anchor": anchor, "cursor": cursor}))
        return self._page(f"{page_id}.md")

    def grep_docs(self, pattern: str, page_id: str | None = None, regex: bool = False) -> str:
        self.calls.append(("grep_docs", {"pattern": pattern, "page_id": page_id, "regex": regex}))
        return "\n".join(path for path, text in sorted(self.pages.items()) if pattern in text) or "no hits"

    def read_evidence(self, evidence_id: str, start: int | None = None, end: int | None = None) -> str:
        self.calls.append(("read_evidence", {"evidence_id": evidence_id, "start": start, "end": end}))
        if evidence_id not in self.evidence:
            raise NotFoundError(f"unknown evidence {evidence_id}", hint="use search to find evidence ids")
        lines = self.evidence[evidence_id]
        first, last = start or 1, end or len(lines)
        return "\n".join(f"L{number}: {lines[number - 1]}" for number in range(first, min(last, len(lines)) + 1))

    def list_pages(self, prefix: str | None = None) -> str:
        self.calls.append(("list_pages", {"prefix": prefix}))
        return "\n".join(path for path in sorted(self.pages) if path.startswith(prefix or ""))

    def run_checks(self) -> str:
        self.calls.append(("run_checks", {}))
        return "no findings"

    def write_page(self, path: str, content: str) -> str:
        self.calls.append(("write_page", {"path": path, "content": content}))
        if not path.startswith(("knowledge/", "users/")):
            raise PathError(f"{path}: writes are confined to knowledge/, users/")
        self.pages[path] = content
        return f"wrote {path}"

    def edit_page(self, path: str, old: str, new: str) -> str:
        self.calls.append(("edit_page", {"path": path, "old": old, "new": new}))
        text = self._page(path)
        count = text.count(old)
        if count != 1:
            raise ConflictError(f"{path}: the old text occurs {count} times, not exactly once")
        self.pages[path] = text.replace(old, new)
        return f"edited {path}"

    def deprecate_page(self, path: str, reason: str, superseded_by: str | None = None) -> str:
        self.calls.append(("deprecate_page", {"path": path, "reason": reason, "superseded_by": superseded_by}))
        self._page(path)
        return f"deprecated {path}"

    def _page(self, path: str) -> str:
        if path not in self.pages:
            raise NotFoundError(f"no page {path}")
        return self.pages[path]


EVIDENCE_ID = "ev-4c1d2e0f9a8b7c6d"
