"""``kb mcp``: the knowledge base as an MCP server (the official SDK's ``MCPServer``), over stdio
or Streamable HTTP.

Tools read the served repository as one principal. Over stdio the principal is the one the
server was started as (``--as``); over HTTP it comes from the bearer token (``pipeline.mcp.auth``),
never from a tool argument, and each tool needs its scope (``kb:read``, ``kb:remember``,
``kb:propose``, ``kb:forget``). Writes (``kb_remember``, ``kb_propose``, ``kb_forget``) are listed
only when the server was started with them enabled; no tool edits a page or merges a change, and
``kb_forget`` returns a plan that only the admin principal can run, with its confirmation code.

Every result is JSON inside an untrusted-data block (``agents.untrusted``) naming the tool and the
commit it was read from; an error is an MCP error result holding the CLI's ``error:``/``hint:``
lines, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from agents.untrusted import UNTRUSTED_RULES, wrap_untrusted
from kb.errors import KbError
from kb.repo import Repo
from pipeline.mcp.service import KbService

READ, REMEMBER, PROPOSE, FORGET = "kb:read", "kb:remember", "kb:propose", "kb:forget"
SCOPES = (READ, REMEMBER, PROPOSE, FORGET)

INSTRUCTIONS = (
    "kb is a reviewed, cited knowledge base and user memory. Start with kb_overview or kb_search, "
    "then kb_read a page at L0 (summary and outline), L1 or one section; kb_evidence shows the "
    "lines a citation names. " + UNTRUSTED_RULES
)


@dataclass(frozen=True)
class ServerOptions:
    principal: str = "system"  # stdio: the one principal; HTTP: the tokens decide
    writes: bool = False
    http: bool = False


class ToolFailure(Exception):
    """A tool's failure as the client sees it: the CLI's one-line error and hint."""


def listening_principal(options: ServerOptions) -> str | None:
    """The principal a listen stream opened in this request hears about, if it may read."""
    try:
        principal, granted = _principal_and_scopes(options)
    except ToolFailure:
        return None
    return principal if READ in granted else None


def _principal_and_scopes(options: ServerOptions) -> tuple[str, frozenset[str]]:
    if not options.http:
        return options.principal, frozenset(SCOPES)
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    if token is None or not token.subject:
        raise ToolFailure("error: no verified bearer token on this request\nhint: send Authorization: Bearer <token>")
    return token.subject, frozenset(token.scopes)


def _run(repo: Repo, options: ServerOptions, tool: str, scope: str, call: Callable[[KbService], dict[str, Any]]) -> str:
    principal, granted = _principal_and_scopes(options)
    if scope not in granted:
        raise ToolFailure(f"error: {tool} needs the {scope} scope, which this token does not have\nhint: ask for a token with {scope}")
    try:
        result = call(KbService(repo, principal))
    except KbError as err:
        hint = f"\nhint: {err.hint}" if err.hint else ""
        raise ToolFailure(f"error: {err}{hint}") from None
    source = f"{tool}@{result.get('commit') or result.get('head') or 'kb'}"
    return wrap_untrusted(json.dumps(result, ensure_ascii=False, sort_keys=True), source)


Commit = Annotated[str | None, Field(description="Read the repository as of this commit or branch (default: the served one).")]
Level = Literal["L0", "L1", "L2"]


def build_server(repo: Repo, options: ServerOptions, **server_args: Any) -> Any:
    """The MCP server over ``repo``; ``server_args`` go to ``MCPServer`` (auth settings over HTTP)."""
    from mcp.server import MCPServer
    from mcp_types import ToolAnnotations

    from pipeline.mcp.subscriptions import ServedBus

    bus = ServedBus(repo, lambda: listening_principal(options))
    server = MCPServer(name="kb", instructions=INSTRUCTIONS, subscriptions=bus, **server_args)
    reading = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    adding = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    def run(tool: str, scope: str, call: Callable[[KbService], dict[str, Any]]) -> str:
        try:
            return _run(repo, options, tool, scope, call)
        except ToolFailure as failure:
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError(str(failure)) from None

    @server.tool(description="The map of what you may read: folders with their pages' one-line summaries (L0).", annotations=reading)
    def kb_overview(commit: Commit = None) -> str:
        return run("kb_overview", READ, lambda s: s.overview(commit))

    @server.tool(
        description="Search pages (hybrid BM25 + dense). Each hit: page, section, lines and, by level, its L0 summary, L1 outline or L2 passage.",
        annotations=reading,
    )
    def kb_search(
        query: Annotated[str, Field(description="What to look for.")],
        k: Annotated[int, Field(ge=1, le=50, description="Number of pages.")] = 10,
        mode: Literal["hybrid", "bm25", "dense"] = "hybrid",
        include_evidence: Annotated[bool, Field(description="Also search raw evidence.")] = False,
        at: Annotated[str | None, Field(description="Only pages valid on this date (YYYY-MM-DD).")] = None,
        commit: Commit = None,
        level: Level = "L2",
        cursor: Annotated[str | None, Field(description="The next_cursor a previous search returned: its next k hits.")] = None,
    ) -> str:
        return run("kb_search", READ, lambda s: s.search(query, k, mode, include_evidence, at, commit, level, cursor))

    @server.tool(
        description="Read a page: L0 (summary + outline), L1 (+ overview), L2 (all), or one section; long text has a cursor.",
        annotations=reading,
    )
    def kb_read(
        page: Annotated[str, Field(description="Page id, e.g. knowledge/travel-policy.")],
        level: Level = "L0",
        section: Annotated[str | None, Field(description="A section anchor from the outline.")] = None,
        cursor: Annotated[str | None, Field(description="The cursor a previous read returned.")] = None,
        max_tokens: Annotated[int, Field(ge=50, le=8000)] = 1000,
        commit: Commit = None,
    ) -> str:
        return run("kb_read", READ, lambda s: s.read(page, level, section, cursor, max_tokens, commit))

    @server.tool(description="Lines of pages matching a text (or a Python regex), with page, section and line.", annotations=reading)
    def kb_grep(
        pattern: Annotated[str, Field(max_length=1000)],
        page: Annotated[str | None, Field(description="Only this page.")] = None,
        regex: bool = False,
        ignore_case: bool = False,
        commit: Commit = None,
    ) -> str:
        return run("kb_grep", READ, lambda s: s.grep(pattern, page, regex, ignore_case, commit))

    @server.tool(
        description="Lines of an evidence item, e.g. ev-5e807233ce749f70#L3-L4: check what a citation quotes.", annotations=reading
    )
    def kb_evidence(reference: Annotated[str, Field(description="ev-<16 hex>[#L<a>-L<b>]")], commit: Commit = None) -> str:
        return run("kb_evidence", READ, lambda s: s.evidence(reference, commit))

    @server.tool(
        description="Your memory for a question: profile, relevant pages and past turns, cited, within a token budget.", annotations=reading
    )
    def kb_memory_context(question: str, budget: Annotated[int, Field(ge=100, le=32000)] = 2000, commit: Commit = None) -> str:
        return run("kb_memory_context", READ, lambda s: s.memory_context(question, budget, commit))

    @server.tool(description="A page's reviewed changes on the default branch, newest first, with their verdicts.", annotations=reading)
    def kb_history(page: str, limit: Annotated[int, Field(ge=1, le=50)] = 20, commit: Commit = None) -> str:
        return run("kb_history", READ, lambda s: s.history(page, limit, commit))

    @server.tool(description="A change's state: its head, merged or not, and the signed review verdicts and comments.", annotations=reading)
    def kb_change_status(branch: Annotated[str, Field(description="The branch kb_propose returned, e.g. kb/20261202-…")]) -> str:
        return run("kb_change_status", READ, lambda s: s.change_status(branch))

    if options.writes:

        @server.tool(
            description="Add a conversation, trajectory, document or tool output to your evidence log (same content: same id).",
            annotations=adding,
        )
        def kb_remember(
            content: Annotated[str, Field(description="The text (a conversation as '[time] speaker: text' lines, JSON or Markdown).")],
            kind: Literal["conversation", "trajectory", "document", "tool-output"] = "conversation",
            source: Annotated[str, Field(max_length=200, description="Where it came from.")] = "",
        ) -> str:
            return run("kb_remember", REMEMBER, lambda s: s.remember(content, kind, source))

        @server.tool(
            description="Open a change from evidence ids: a reviewed branch (or PR) that a merge may later accept; never writes main.",
            annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False),
        )
        def kb_propose(evidence_ids: Annotated[list[str], Field(min_length=1, max_length=50)]) -> str:
            return run("kb_propose", PROPOSE, lambda s: s.propose(evidence_ids))

        @server.tool(
            description="Forget a user, an evidence item or a text everywhere: returns the plan and a code; call again with confirm=code to run it (admin only).",
            annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
        )
        def kb_forget(
            evidence_id: str | None = None,
            user: str | None = None,
            match: Annotated[str | None, Field(max_length=1000)] = None,
            confirm: Annotated[str | None, Field(description="The code of the plan to run.")] = None,
        ) -> str:
            return run("kb_forget", FORGET, lambda s: s.forget(evidence_id, user, match, confirm))

    _add_resources(server, repo, options)
    return server


def _add_resources(server: Any, repo: Repo, options: ServerOptions) -> None:
    # The /l0 and /l1 templates come first: the page template's {+path} would match them too.
    def read(tool: str, call: Callable[[KbService], dict[str, Any]]) -> str:
        try:
            return _run(repo, options, tool, READ, call)
        except ToolFailure as failure:
            from mcp.server.mcpserver.exceptions import ResourceError

            raise ResourceError(str(failure)) from None

    @server.resource("kb://overview", description="The map of the pages you may read (what kb_overview returns).", mime_type="text/plain")
    def overview_resource() -> str:
        return read("kb://overview", lambda s: s.overview())

    @server.resource("kb://page/{+path}/l0", description="A page's summary and outline.", mime_type="text/plain")
    def page_l0(path: str) -> str:
        return read("kb://page/l0", lambda s: s.read(path, "L0"))

    @server.resource("kb://page/{+path}/l1", description="A page's overview.", mime_type="text/plain")
    def page_l1(path: str) -> str:
        return read("kb://page/l1", lambda s: s.read(path, "L1"))

    @server.resource("kb://page/{+path}", description="A page (L2).", mime_type="text/plain")
    def page_resource(path: str) -> str:
        return read("kb://page", lambda s: s.read(path, "L2", max_tokens=8000))

    @server.resource("kb://evidence/{reference}", description="An evidence item's lines.", mime_type="text/plain")
    def evidence_resource(reference: str) -> str:
        return read("kb://evidence", lambda s: s.evidence(reference))
