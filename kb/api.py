"""The Python API of kb's core: what a program embedding kb calls, with the same behaviour as
the CLI (scopes enforced inside retrieval, errors as ``KbError`` with a message, a hint and an
exit code). Everything here is stable; modules not named here are internals.

    from kb import api

    repo = api.init_repository(Path("my-kb"))        # or api.open_repo(path)
    item = api.prepare(b"...", "notes.md", "document", api.user_scope(None))
    api.add_items(repo, [item])
    api.build_index(repo)                            # BuildResult; .summary() is one line
    hits = api.search(repo, api.make_query("window seat", principal="user:alice", k=5))
    view = api.read_page(repo, "users/alice/profile", principal="user:alice", level="L1")
    context = api.build_context(repo, "alice", "Which seat should I book?", budget=1500)

The change loop (``pipeline.propose``, ``pipeline.review``, ``pipeline.merge``,
``pipeline.loop.run_loop``, ``pipeline.memory.ingest``) and the checks (``ci.run.run_checks``)
build on this package and are documented in docs/architecture.md; importing them here would
turn the layers upside down.
"""

from __future__ import annotations

from kb.config import Config, load_config, parse_config
from kb.errors import KbError
from kb.evidence import AddResult, LedgerEntry, add_items, ledger_at, list_entries, show_item
from kb.intake import KINDS, Message, PreparedItem, prepare, prepare_messages
from kb.memory_context import MemoryContext, build_context, read_profile
from kb.page import Page, parse_page, render_page
from kb.repo import Repo, open_repo
from kb.retrieval.build import BuildResult, IndexStatus, build_index, index_status
from kb.retrieval.reading import GrepResult, PageView, grep, read_page, read_section
from kb.retrieval.search import Hit, make_query, open_searcher, search
from kb.scaffold import init_repository
from kb.scopes import parse_principal, scope_for_path, user_scope

__all__ = [
    "KINDS",
    "AddResult",
    "BuildResult",
    "Config",
    "GrepResult",
    "Hit",
    "IndexStatus",
    "KbError",
    "LedgerEntry",
    "MemoryContext",
    "Message",
    "Page",
    "PageView",
    "PreparedItem",
    "Repo",
    "add_items",
    "build_context",
    "build_index",
    "grep",
    "index_status",
    "init_repository",
    "ledger_at",
    "list_entries",
    "load_config",
    "make_query",
    "open_repo",
    "open_searcher",
    "parse_config",
    "parse_page",
    "parse_principal",
    "prepare",
    "prepare_messages",
    "read_page",
    "read_profile",
    "read_section",
    "render_page",
    "scope_for_path",
    "search",
    "show_item",
    "user_scope",
]
