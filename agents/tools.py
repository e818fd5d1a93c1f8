"""Agent tools: their argument models, their JSON schemas for the model, and the dispatcher.

Each tool's parameters schema is generated from a pydantic model (``model_json_schema()``) and
every call the model makes is validated against that same model before anything runs. Read and
write tools act on a backend (``agents.backend``); ``comment`` is collected and the terminal
tools (``submit``, ``verdict``) end a run, their validated arguments being the run's result.

The Proposer gets the read tools, the write tools and ``submit``; the Reviewer gets the read tools,
``comment`` and ``verdict``, and no way to write. Whatever a backend returns, and any error it
raises, reaches the model as untrusted data (``agents.untrusted``): it may quote pages and
evidence. An exception that is not a ``KbError`` (a bug in a tool) does not end the run either:
the model gets one bounded line naming it, the ``agents.tools`` logger gets the exception and the
run record the traceback.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Self

import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.backend import ReadBackend, WriteBackend
from agents.llm import ToolCall
from agents.schemas import ReviewComment, Submission, Verdict
from agents.untrusted import wrap_untrusted
from kb.errors import KbError
from kb.ids import EVIDENCE_ID_PATTERN as ID_PATTERN

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

EVIDENCE_ID_PATTERN = f"^{ID_PATTERN}$"  # docs/format.md, "Evidence"
INTERNAL_DETAIL_CHARS = 200  # of an unexpected exception's message, for the model
INTERNAL_TRACE_CHARS = 4000  # of its traceback, for the run record (under .kb/runs, never committed)

_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())  # a library: the application decides where logs go

Role = Literal["read", "write", "collect", "terminal"]
Status = Literal["ok", "error", "invalid", "collected", "terminal"]


class _Args(BaseModel):
    # strict: "8" is not 8 and "true" is not True; the model gets the error and fixes its call.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def source(self) -> str:
        """Where the tool's output comes from, for the untrusted-data label."""
        raise NotImplementedError


class SearchArgs(_Args):
    query: str = Field(min_length=1, description="What to look for, in words (BM25 + dense retrieval).")
    k: int = Field(default=8, ge=1, le=50, description="How many hits to return.")
    include_evidence: bool = Field(default=True, description="Search the raw evidence too, not only pages.")

    def source(self) -> str:
        return f"search: {self.query}"


class ReadDocArgs(_Args):
    page_id: str = Field(min_length=1, description="Page id, e.g. users/alice/travel-preferences")

    def source(self) -> str:
        return self.page_id


class ReadSectionArgs(_Args):
    page_id: str = Field(min_length=1, description="Page id, e.g. knowledge/travel/policy")
    anchor: str = Field(min_length=1, description="Section anchor from read_doc's outline, e.g. flights")
    cursor: int | None = Field(default=None, ge=0, description="Continuation cursor from a previous read_section of a long section.")

    def source(self) -> str:
        return f"{self.page_id}#{self.anchor}"


class GrepDocsArgs(_Args):
    pattern: str = Field(min_length=1, description="Literal text to find (or a regular expression if regex is true).")
    page_id: str | None = Field(default=None, description="Search only this page; all readable pages when omitted.")
    regex: bool = Field(default=False, description="Treat pattern as a Python regular expression.")

    def source(self) -> str:
        return f"grep_docs: {self.pattern}" + (f" in {self.page_id}" if self.page_id else "")


class ReadEvidenceArgs(_Args):
    evidence_id: str = Field(pattern=EVIDENCE_ID_PATTERN, description="Evidence id, e.g. ev-4c1d2e0f9a8b7c6d (no #L suffix).")
    start: int | None = Field(default=None, ge=1, description="First line to read (1-based); from the start when omitted.")
    end: int | None = Field(default=None, ge=1, description="Last line to read (inclusive); to the end when omitted.")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.start is not None and self.end is not None and self.end < self.start:
            raise ValueError(f"end ({self.end}) is before start ({self.start})")
        return self

    def source(self) -> str:
        if self.start is None and self.end is None:
            return self.evidence_id
        return f"{self.evidence_id}#L{self.start or 1}-" + (f"L{self.end}" if self.end is not None else "end")


class ListPagesArgs(_Args):
    prefix: str | None = Field(default=None, description="Only pages whose path starts with this, e.g. users/alice/")

    def source(self) -> str:
        return f"list_pages: {self.prefix or ''}".rstrip()


class RunChecksArgs(_Args):
    def source(self) -> str:
        return "run_checks"


class WritePageArgs(_Args):
    path: str = Field(min_length=1, description="Repository path of the page, e.g. users/alice/travel-preferences.md")
    content: str = Field(
        min_length=1,
        description="The whole page: YAML frontmatter between --- lines, then the Markdown body.",
    )

    def source(self) -> str:
        return f"write_page: {self.path}"


class EditPageArgs(_Args):
    path: str = Field(min_length=1, description="Repository path of an existing page.")
    old: str = Field(min_length=1, description="Exact text to replace; must occur exactly once in the page.")
    new: str = Field(description="Replacement text (may be empty to delete).")

    def source(self) -> str:
        return f"edit_page: {self.path}"


class DeprecatePageArgs(_Args):
    path: str = Field(min_length=1, description="Repository path of the page to deprecate.")
    reason: str = Field(min_length=1, description="Why the page no longer holds, citing evidence ids.")
    superseded_by: str | None = Field(default=None, description="Id of the page that replaces it, if any.")

    def source(self) -> str:
        return f"deprecate_page: {self.path}"


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    arguments: type[BaseModel]
    role: Role
    # For read and write tools: performs the call on the backend and returns its text.
    run: Callable[[Any, Any], str] | None = None

    def spec(self) -> dict[str, Any]:
        """The tool in the OpenAI / litellm ``tools`` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.arguments.model_json_schema(),
            },
        }


def _search(backend: ReadBackend, args: SearchArgs) -> str:
    return backend.search(args.query, k=args.k, include_evidence=args.include_evidence)


def _read_doc(backend: ReadBackend, args: ReadDocArgs) -> str:
    return backend.read_doc(args.page_id)


def _read_section(backend: ReadBackend, args: ReadSectionArgs) -> str:
    return backend.read_section(args.page_id, args.anchor, cursor=args.cursor)


def _grep_docs(backend: ReadBackend, args: GrepDocsArgs) -> str:
    return backend.grep_docs(args.pattern, page_id=args.page_id, regex=args.regex)


def _read_evidence(backend: ReadBackend, args: ReadEvidenceArgs) -> str:
    return backend.read_evidence(args.evidence_id, start=args.start, end=args.end)


def _list_pages(backend: ReadBackend, args: ListPagesArgs) -> str:
    return backend.list_pages(prefix=args.prefix)


def _run_checks(backend: ReadBackend, _args: RunChecksArgs) -> str:
    return backend.run_checks()


def _write_page(backend: WriteBackend, args: WritePageArgs) -> str:
    return backend.write_page(args.path, args.content)


def _edit_page(backend: WriteBackend, args: EditPageArgs) -> str:
    return backend.edit_page(args.path, args.old, args.new)


def _deprecate_page(backend: WriteBackend, args: DeprecatePageArgs) -> str:
    return backend.deprecate_page(args.path, args.reason, superseded_by=args.superseded_by)


READ_TOOLS: tuple[Tool, ...] = (
    Tool(
        "search",
        "Search pages (and, by default, raw evidence) you may read. Returns ranked hits with page "
        "id or evidence id, section anchor, line and a snippet.",
        SearchArgs,
        "read",
        _search,
    ),
    Tool(
        "read_doc",
        "Read a page's header, L0 summary and outline: section anchors with their sizes. Use read_section for the text of a section.",
        ReadDocArgs,
        "read",
        _read_doc,
    ),
    Tool(
        "read_section",
        "Read one section of a page, with file line numbers. Long sections come in parts: pass the returned cursor to continue.",
        ReadSectionArgs,
        "read",
        _read_section,
    ),
    Tool(
        "grep_docs",
        "Find literal text (or a regex) in pages; returns each hit with page id, section anchor and line number.",
        GrepDocsArgs,
        "read",
        _grep_docs,
    ),
    Tool(
        "read_evidence",
        "Read raw evidence lines, numbered as citations use them (ev-<id>#L<start>-L<end>). Quote from here verbatim. "
        "To check a claim, read a few lines before and after its cited span: who speaks, when, under which condition.",
        ReadEvidenceArgs,
        "read",
        _read_evidence,
    ),
    Tool(
        "list_pages",
        "List pages (id and L0 summary), optionally under a path prefix.",
        ListPagesArgs,
        "read",
        _list_pages,
    ),
    Tool(
        "run_checks",
        "Run the deterministic kb checks (format, links, indexes, budgets, citations, secrets) on the work branch and return the findings.",
        RunChecksArgs,
        "read",
        _run_checks,
    ),
)

WRITE_TOOLS: tuple[Tool, ...] = (
    Tool(
        "write_page",
        "Create a page or replace it whole. Only under the folders this task allows.",
        WritePageArgs,
        "write",
        _write_page,
    ),
    Tool(
        "edit_page",
        "Replace one exact piece of text in a page. Fails unless `old` occurs exactly once; "
        "include enough surrounding text to make it unique.",
        EditPageArgs,
        "write",
        _edit_page,
    ),
    Tool(
        "deprecate_page",
        "Mark a page deprecated (status: deprecated, valid_to today, superseded_by), keeping its history. Use it instead of deleting.",
        DeprecatePageArgs,
        "write",
        _deprecate_page,
    ),
)

SUBMIT = Tool(
    "submit",
    "Finish: the change is complete, checks have run, and it is ready for review. Ends your turn.",
    Submission,
    "terminal",
)
COMMENT = Tool(
    "comment",
    "Record one review problem: the page path and line of the claim, the fault (meaning_changed, over_generalisation, "
    "unsupported_inference, ...), the evidence line(s) that show it (ev-<id>#L<n>) and what would fix it. "
    "Call it once per problem.",
    ReviewComment,
    "collect",
)
VERDICT = Tool(
    "verdict",
    "Finish the review: approve only if every added or changed claim is supported by its cited "
    "evidence; otherwise request_changes. Ends your review.",
    Verdict,
    "terminal",
)

PROPOSER_TOOLS: tuple[Tool, ...] = (*READ_TOOLS, *WRITE_TOOLS, SUBMIT)
REVIEWER_TOOLS: tuple[Tool, ...] = (*READ_TOOLS, COMMENT, VERDICT)


def tool_specs(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The ``tools`` argument of a completion request."""
    return [tool.spec() for tool in tools]


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call came to: the text the model gets back, and for some tools a payload."""

    status: Status  # ok, error (the backend refused), invalid (the call itself), collected, terminal
    text: str
    payload: BaseModel | None = None  # the validated Comment, Submission or Verdict
    traceback: str | None = None  # a programming error in the tool: for the run record, not the model

    @property
    def invalid(self) -> bool:
        return self.status == "invalid"


def dispatch(tools: Sequence[Tool], backend: ReadBackend, call: ToolCall) -> ToolOutcome:
    """Validate one tool call and perform it; never raises for anything the model did wrong."""
    by_name = {tool.name: tool for tool in tools}
    tool = by_name.get(call.name)
    if tool is None:
        names = ", ".join(sorted(by_name))
        return ToolOutcome("invalid", f"error: there is no tool named {call.name!r}. Available tools: {names}.")
    parsed = parse_arguments(tool, call.arguments)
    if isinstance(parsed, str):
        return ToolOutcome("invalid", parsed)
    if tool.role == "collect":
        return ToolOutcome("collected", f"{tool.name} recorded.", parsed)
    if tool.role == "terminal":
        return ToolOutcome("terminal", f"{tool.name} recorded.", parsed)
    assert tool.run is not None, f"{tool.name} is a {tool.role} tool without a backend action"
    assert isinstance(parsed, _Args)
    try:
        text = tool.run(backend, parsed)
    except KbError as exc:
        message = f"error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else "")
        return ToolOutcome("error", wrap_untrusted(message, parsed.source()))
    except Exception as exc:  # a bug in a tool must not end the run: the model hears of it, the log keeps it
        _log.error("tool %s raised %s", tool.name, type(exc).__name__, exc_info=exc)
        detail = " ".join(str(exc).split())[:INTERNAL_DETAIL_CHARS]
        message = (
            f"error: {tool.name} failed with an internal error ({type(exc).__name__}: {detail}). "
            "This is a fault in the tool, not necessarily in your call: try other arguments or another tool."
        )
        trace = "".join(traceback.format_exception(exc))[-INTERNAL_TRACE_CHARS:]
        return ToolOutcome("error", wrap_untrusted(message, parsed.source()), traceback=trace)
    return ToolOutcome("ok", wrap_untrusted(text, parsed.source()))


def parse_arguments(tool: Tool, arguments: str) -> BaseModel | str:
    """The validated arguments of a call, or the error text to send back to the model."""
    # Some servers send "" rather than "{}" for a call without arguments.
    raw = arguments if arguments.strip() else "{}"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return (
            f"error: the arguments of {tool.name} are not valid JSON ({exc}). "
            f"Call {tool.name} again with one JSON object matching its parameters schema."
        )
    if not isinstance(data, dict):
        return (
            f"error: the arguments of {tool.name} must be a JSON object, not {type(data).__name__}. "
            f"Call {tool.name} again with one JSON object matching its parameters schema."
        )
    try:
        return tool.arguments.model_validate(data, strict=True)
    except pydantic.ValidationError as exc:
        problems = "\n".join(f"- {_location(error)}: {error['msg']}" for error in exc.errors())
        return (
            f"error: invalid arguments for {tool.name}:\n{problems}\nCall {tool.name} again with arguments matching its parameters schema."
        )


def _location(error: ErrorDetails) -> str:
    location = ".".join(str(part) for part in error.get("loc", ()))
    return location or "arguments"
