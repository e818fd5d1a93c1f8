"""What agent tools act on: the narrow interface between agents (which produce data) and the
program (which reads the repository and applies edits to a work branch).

The pipeline implements it over a git worktree of the work branch; tests may implement it over
a temporary repository. Every method returns plain text for the model, or raises a ``KbError``
whose message is returned to the model as the tool's error (the run goes on).
"""

from __future__ import annotations

from typing import Protocol


class ReadBackend(Protocol):
    """Read-only tools, shared by the Proposer and the Reviewer; scope rules apply inside."""

    def search(self, query: str, k: int = 8, include_evidence: bool = True) -> str: ...

    def read_doc(self, page_id: str) -> str: ...

    def read_section(self, page_id: str, anchor: str, cursor: int | None = None) -> str: ...

    def grep_docs(self, pattern: str, page_id: str | None = None, regex: bool = False) -> str: ...

    def read_evidence(self, evidence_id: str, start: int | None = None, end: int | None = None) -> str: ...

    def list_pages(self, prefix: str | None = None) -> str: ...

    def run_checks(self) -> str: ...


class WriteBackend(ReadBackend, Protocol):
    """The Proposer's write tools, confined to knowledge/ and users/ of its work branch.

    ``page_text`` is not a model tool: it gives a built-in agent the current text of a page it
    may write (None when there is none, or the path is outside its folders)."""

    def page_text(self, path: str) -> str | None: ...

    def write_page(self, path: str, content: str) -> str: ...

    def edit_page(self, path: str, old: str, new: str) -> str: ...

    def deprecate_page(self, path: str, reason: str, superseded_by: str | None = None) -> str: ...
