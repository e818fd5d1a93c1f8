"""Telling subscribers that a new commit is served: the ``subscriptions/listen`` bus of ``kb mcp``.

A client opens a listen stream (MCP 2026-07-28; the SDK's ``Client.listen``) naming the resources
it follows (``kb://page/{path}``, its ``/l0`` and ``/l1`` views, ``kb://overview``) and whether it
wants ``resources/list_changed``. The SDK's ``ListenHandler`` serves the stream; this bus is what
it subscribes to. The bus records, for each stream, the principal of the request that opened it
(the stdio server's one principal, or the HTTP bearer token's), and a watcher task polls what the
server serves: the default branch's head (what pages and the overview are read from) and the
index version ``CURRENT`` names (what searches answer from). When either moves, the bus diffs
the pages between the last commit it announced and the new head and tells each stream only
about pages its principal may read: another user's page never produces a frame on the stream,
not even for a client that names its URI. Leaving the stream is unsubscribing.

Events are level triggers ("this changed, read it again"): a stream gets ``resources/updated``
for each visible page that changed (the three URIs of it), for ``kb://overview`` when any visible
page did, and ``resources/list_changed`` when a visible page was added or removed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pygit2
from mcp.server.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent

from kb.errors import KbError
from kb.page import page_id_for_path
from kb.repo import Repo, diff_trees
from kb.scopes import PAGE_FOLDERS, can_read, parse_principal, scope_for_path

OVERVIEW_URI = "kb://overview"
POLL_SECONDS = 0.5

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PageChange:
    page: str  # page id, e.g. knowledge/travel/visas
    scope: str
    kind: str  # added | modified | deleted


def page_uris(page: str) -> tuple[str, ...]:
    return (f"kb://page/{page}", f"kb://page/{page}/l0", f"kb://page/{page}/l1")


def changed_pages(repo: Repo, old: str | None, new: str) -> list[PageChange]:
    """The pages that differ between commits ``old`` and ``new`` (every page of ``new`` when
    ``old`` is None), each with the scope its path decides."""
    new_commit = repo.git[new].peel(pygit2.Commit)
    old_tree = repo.git[old].peel(pygit2.Commit).tree if old else None
    changes: list[PageChange] = []
    if old_tree is None:
        files = repo.tree_files(new_commit, PAGE_FOLDERS)
        deltas = [(path, "added") for path in files]
    else:
        status = {pygit2.enums.DeltaStatus.ADDED: "added", pygit2.enums.DeltaStatus.DELETED: "deleted"}
        deltas = []
        for delta in diff_trees(old_tree, new_commit.tree).deltas:
            kind = status.get(delta.status, "modified")
            for path in {delta.old_file.path, delta.new_file.path}:
                deltas.append((path, kind))
    for path, kind in deltas:
        scope = scope_for_path(path)
        if path.endswith(".md") and path.startswith(PAGE_FOLDERS) and scope is not None:
            changes.append(PageChange(page_id_for_path(path), scope, kind))
    return changes


def events_for(changes: list[PageChange], scopes: tuple[str, ...]) -> list[ServerEvent]:
    """What one principal is told about ``changes``: only the pages it may read."""
    visible = [c for c in changes if can_read(scopes, c.scope)]
    if not visible:
        return []
    events: list[ServerEvent] = [ResourceUpdated(uri=OVERVIEW_URI)]
    for change in visible:
        events.extend(ResourceUpdated(uri=uri) for uri in page_uris(change.page))
    if any(c.kind != "modified" for c in visible):
        events.append(ResourcesListChanged())
    return list(dict.fromkeys(events))


@dataclass
class _Listener:
    deliver: Callable[[ServerEvent], None]
    scopes: tuple[str, ...]


@dataclass
class ServedBus:
    """A ``SubscriptionBus`` (``mcp.server.subscriptions``) that scopes what each stream hears.

    ``principal_of`` names the principal of the request being served (called when a stream
    subscribes, inside that request), or None when it may not read (no token, no ``kb:read``):
    such a stream hears nothing.
    """

    repo: Repo
    principal_of: Callable[[], str | None]
    interval: float = POLL_SECONDS
    _listeners: dict[object, _Listener] = field(default_factory=dict)
    _watcher: asyncio.Task[None] | None = None
    _announced: str | None = None  # the head the last announcement (or the first look) was about
    _served: tuple[str | None, str | None] = (None, None)

    async def publish(self, event: ServerEvent) -> None:
        """An event for every stream (the SDK's ``ctx.notify_*``); kb itself announces changes with
        ``announce``, which scopes them."""
        for listener in list(self._listeners.values()):
            listener.deliver(event)
        await asyncio.sleep(0)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        principal = self.principal_of()
        token = object()
        self._listeners[token] = _Listener(listener, parse_principal(principal) if principal else ())
        if self._watcher is None or self._watcher.done():
            self._served = self.served()
            self._announced = self._served[0]
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

        def unsubscribe() -> None:
            self._listeners.pop(token, None)
            if not self._listeners and self._watcher is not None:
                self._watcher.cancel()
                self._watcher = None

        return unsubscribe

    def served(self) -> tuple[str | None, str | None]:
        """(the default branch's head, the commit of the index version CURRENT names)."""
        from kb.retrieval.store import index_store

        head = self.repo.head()
        try:
            manifest = index_store(self.repo).current_manifest()
        except (KbError, OSError, ValueError):
            manifest = None
        return (str(head.id) if head is not None else None, manifest.source_commit if manifest is not None else None)

    def check(self) -> None:
        """Look once: if a new commit or index version is served, announce what changed."""
        now = self.served()
        if now == self._served:
            return
        self._served = now
        head = now[0]
        if head is None or head == self._announced:
            return
        changes = changed_pages(self.repo, self._announced, head)
        self._announced = head
        self.announce(changes)

    def announce(self, changes: list[PageChange]) -> None:
        for listener in list(self._listeners.values()):
            for event in events_for(changes, listener.scopes):
                listener.deliver(event)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.check()
            except (KbError, pygit2.GitError, KeyError, ValueError, OSError):
                logger.exception("kb mcp: could not look for a new served commit; trying again")
