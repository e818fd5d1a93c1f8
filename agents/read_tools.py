"""The agents' read tools over the retrieval layer: ``search``, ``read_doc``, ``read_section``,
``grep_docs``, ``read_evidence``, ``list_pages``, ``run_checks``, as plain text for a model.

``RepoReader`` implements ``agents.backend.ReadBackend`` for any repository view (the main
branch, or a work branch's worktree) and any principal; every read is scoped inside the lookup
(``kb.scopes``). It needs nothing from ``pipeline``, so any host of the tools (the change loop,
a server) can use it as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pygit2

from kb.errors import IndexMissingError, KbError, NotFoundError
from kb.evidence import LedgerEntry, ledger_at
from kb.forgotten import is_evidence_hidden, is_hidden
from kb.page import page_id_for_path, parse_page
from kb.repo import Repo
from kb.retrieval.reading import grep, read_page, read_section
from kb.scopes import PAGE_FOLDERS, can_read, parse_principal, scope_for_path

MAX_EVIDENCE_LINES = 200
MAX_LIST = 200


@dataclass
class RepoReader:
    """Read tools for ``principal`` on ``view`` (pages and evidence at its HEAD); ``search``
    uses ``repo``'s serving index; ``checks`` answers ``run_checks``."""

    repo: Repo  # the main repository: its serving index answers `search`
    view: Repo  # where pages and evidence are read (a worktree of a work branch, or repo itself)
    principal: str
    checks: Callable[[], str]

    @property
    def scopes(self) -> tuple[str, ...]:
        return parse_principal(self.principal)

    def before_read(self) -> None:
        """Hook for writers: make pending writes visible to the reads that follow."""

    def _head(self) -> pygit2.Commit:
        self.before_read()
        head = self.view.head()
        if head is None:
            raise NotFoundError("the repository has no commits yet")
        return head

    def search(self, query: str, k: int = 8, include_evidence: bool = True) -> str:
        from kb.retrieval.search import make_query, search

        try:
            hits = search(self.repo, make_query(query, self.principal, k=k, include_evidence=include_evidence))
        except IndexMissingError:
            return "no search index is built yet on the main branch; use list_pages and grep_docs"
        if not hits:
            return "no results"
        out = []
        for h in hits:
            where = (
                f"{h.id}#L{h.line_start}-L{h.line_end}"
                if h.kind == "evidence"
                else f"{h.id}#{h.anchor} (lines {h.line_start}-{h.line_end})"
            )
            snippet = " ".join(h.text.split())[:300]
            out.append(f"- [{h.kind}] {where}: {h.title} | {h.summary}\n  {snippet}")
        return "\n".join(out)

    def read_doc(self, page_id: str) -> str:
        view = read_page(self.view, page_id, self.principal, str(self._head().id), level="L1")
        outline = "\n".join(
            f"  {'#' * o.level} {o.title}  (#{o.anchor}, lines {o.line}-{o.end_line}, {o.tokens} tokens)" for o in view.outline
        )
        more = f"\n(more: read_section with cursor {view.next_cursor})" if view.next_cursor else ""
        return f"{view.id}: {view.title}\nstatus {view.status}, valid {view.valid_from or '-'}..{view.valid_to or '-'}\nL0: {view.summary}\nsections:\n{outline}\nL1 (lines {view.line_start}-{view.line_end}):\n{view.text}{more}"

    def read_section(self, page_id: str, anchor: str, cursor: int | None = None) -> str:
        view = read_section(self.view, page_id, anchor, self.principal, str(self._head().id), cursor=str(cursor) if cursor else None)
        numbered = "\n".join(f"{view.line_start + i}: {line}" for i, line in enumerate(view.text.splitlines()))
        more = f"\n(more: cursor {view.next_cursor})" if view.next_cursor else ""
        return f"{view.id}#{view.anchor} lines {view.line_start}-{view.line_end}:\n{numbered}{more}"

    def grep_docs(self, pattern: str, page_id: str | None = None, regex: bool = False) -> str:
        result = grep(self.view, pattern, self.principal, str(self._head().id), page_id, regex, ignore_case=True)
        if not result.hits:
            return "no matches"
        lines = [f"{h.page}#{h.anchor} L{h.line}: {h.text.strip()[:200]}" for h in result.hits]
        return "\n".join(lines) + ("\n(more matches not shown)" if result.truncated else "")

    def _ledger(self) -> list[LedgerEntry]:
        return ledger_at(self.view, self._head())

    def read_evidence(self, evidence_id: str, start: int | None = None, end: int | None = None) -> str:
        entry = next((e for e in self._ledger() if e.id == evidence_id), None)
        if entry is None or not can_read(self.scopes, entry.scope):
            raise NotFoundError(f"unknown evidence id {evidence_id!r}")
        data = self.view.read_at(self._head(), entry.path)
        if is_evidence_hidden(self.repo, entry.id, entry.scope, (data or b"").decode("utf-8")):
            raise NotFoundError(f"unknown evidence id {evidence_id!r}")  # being forgotten
        lines = (data or b"").decode("utf-8").splitlines()
        first = max(1, start or 1)
        last = min(len(lines), end or len(lines), first + MAX_EVIDENCE_LINES - 1)
        if first > len(lines):
            raise NotFoundError(f"{evidence_id} has {len(lines)} lines; L{first} does not exist")
        body = "\n".join(f"L{n}: {lines[n - 1]}" for n in range(first, last + 1))
        more = f"\n(lines {last + 1}-{len(lines)} not shown: call again with start={last + 1})" if last < len(lines) else ""
        return f"{entry.id} ({entry.kind}, {entry.scope}, {entry.lines} lines, source {entry.source}):\n{body}{more}"

    def list_pages(self, prefix: str | None = None) -> str:
        files = self.view.tree_files(self._head(), PAGE_FOLDERS)
        rows = []
        for path in sorted(files):
            if not path.endswith(".md") or not can_read(self.scopes, scope_for_path(path)) or (prefix and not path.startswith(prefix)):
                continue
            if is_hidden(self.repo, path, self.view.read_blob(files[path])):
                continue  # being forgotten
            try:
                summary = parse_page(self.view.read_blob(files[path]), path).summary
            except KbError:
                summary = "(unreadable page)"
            rows.append(f"- {page_id_for_path(path)}: {summary}")
            if len(rows) >= MAX_LIST:
                rows.append("(more pages not shown: give a prefix)")
                break
        return "\n".join(rows) or "no pages"

    def run_checks(self) -> str:
        self.before_read()
        return self.checks()
