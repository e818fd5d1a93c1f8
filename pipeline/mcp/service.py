"""What the MCP tools do, for one principal: reads of the served repository and the two writes an
agent may make (add evidence, open a change). Transport-free: ``pipeline.mcp.server`` maps each
method to a tool. Every read is scoped inside the lookup it makes (``kb.scopes``); the principal
is fixed when the service is made, never taken from a tool's arguments.

Results are plain JSON values; each names the commit it was read from.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

import pygit2

from kb.errors import KbError, NotFoundError, UsageError
from kb.evidence import LedgerEntry, ledger_at
from kb.forgotten import is_evidence_hidden, is_hidden
from kb.page import page_id_for_path, parse_page
from kb.repo import Repo, diff_trees
from kb.scopes import PAGE_FOLDERS, SYSTEM, can_read, parse_principal, scope_for_path

MAX_EVIDENCE_LINES = 200
MAX_OVERVIEW_PAGES = 200
MAX_HISTORY = 50
REMEMBER_KINDS = ("conversation", "trajectory", "document", "tool-output")
MAX_REMEMBER_BYTES = 4 * 1024 * 1024
SEARCH_LEVELS = ("L0", "L1", "L2")
MAX_SEARCH_DEPTH = 200  # hits of one kind a cursor may page through
L0_HIT_FIELDS = ("kind", "id", "path", "title", "summary", "anchor", "line_start", "line_end", "score", "scope", "status")


def _query_key(principal: str, text: str, mode: str, include_evidence: bool, at: str | None) -> str:
    """What a search cursor is bound to besides its commit: who asked what, how."""
    asked = json.dumps([principal, text, mode, include_evidence, at or ""], ensure_ascii=False)
    return hashlib.sha256(asked.encode("utf-8")).hexdigest()[:16]


def _make_cursor(key: str, commit: str, offset: int) -> str:
    raw = json.dumps({"q": key, "c": commit, "o": offset}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("ascii")).decode("ascii").rstrip("=")


def _open_cursor(cursor: str, key: str) -> tuple[int, str]:
    """(offset, commit) of a cursor ``_make_cursor`` made for the query ``key``; UsageError else."""
    try:
        fields = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset, commit, made_for = int(fields["o"]), str(fields["c"]), str(fields["q"])
    except (ValueError, TypeError, KeyError, binascii.Error):
        raise UsageError("not a kb_search cursor", hint="pass the next_cursor a kb_search result returned") from None
    if made_for != key or offset < 1:
        raise UsageError(
            "this cursor is from another search", hint="pass a cursor only with the query, mode, include_evidence and at it came from"
        )
    return offset, commit


@dataclass(frozen=True)
class KbService:
    repo: Repo
    principal: str

    @property
    def scopes(self) -> tuple[str, ...]:
        return parse_principal(self.principal)

    @property
    def user(self) -> str | None:
        return self.principal.split(":", 1)[1] if self.principal.startswith("user:") else None

    def _at(self, commit: str | None) -> pygit2.Commit:
        target = self.repo.resolve(commit) if commit else self.repo.head()
        if target is None:
            raise NotFoundError("the repository has no commits yet", hint="add evidence first: kb evidence add FILE")
        return target

    def _commit(self, commit: str | None) -> str:
        return str(self._at(commit).id)

    # ---- reads ----------------------------------------------------------------------------

    def overview(self, commit: str | None = None) -> dict[str, Any]:
        """The L0 map: every folder the principal may see, with its pages' one-line summaries."""
        head = self._at(commit)
        sha = str(head.id)
        files = self.repo.tree_files(head, PAGE_FOLDERS)
        folders: dict[str, list[dict[str, str]]] = {}
        shown = 0
        for path in sorted(files):
            if not path.endswith(".md") or not can_read(self.scopes, scope_for_path(path)):
                continue
            data = self.repo.read_blob(files[path])
            if is_hidden(self.repo, path, data):
                continue
            if shown >= MAX_OVERVIEW_PAGES:
                break
            try:
                summary = parse_page(data, path).summary
            except KbError:
                summary = "(unreadable page)"
            folders.setdefault(path.rpartition("/")[0], []).append({"page": page_id_for_path(path), "summary": summary})
            shown += 1
        return {
            "commit": sha,
            "principal": self.principal,
            "folders": [{"folder": name, "pages": pages} for name, pages in folders.items()],
            "truncated": shown >= MAX_OVERVIEW_PAGES,
        }

    def search(
        self,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        include_evidence: bool = False,
        at: str | None = None,
        commit: str | None = None,
        level: str = "L2",
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """Hits at ``level`` (L0: the page's summary; L1: plus its outline; L2: plus the matching
        passage). ``next_cursor`` continues with the next ``k`` hits (of each kind) of the same
        query at the same commit; it holds no state, so any server over the repository takes it."""
        from kb.retrieval.search import make_query, open_searcher

        if level not in SEARCH_LEVELS:
            raise UsageError(f"unknown level {level!r}", hint="use L0, L1 or L2")
        q = make_query(query, self.principal, k, at, mode, include_evidence, False)
        key = _query_key(self.principal, q.text, mode, include_evidence, at)
        offset = 0
        if cursor is not None:
            offset, at_commit = _open_cursor(cursor, key)
            if commit is not None and self._commit(commit) != at_commit:
                raise UsageError(f"this cursor is from commit {at_commit[:12]}, not {commit}", hint="search again without the cursor")
            commit = at_commit
        searcher = open_searcher(self.repo, commit)
        sha = searcher.manifest.source_commit
        deeper = replace(q, k=offset + k + 1)  # one more of each kind tells whether a next page exists
        found = searcher.search(deeper)
        more = False
        hits = []
        for kind in ("page", "evidence"):
            of_kind = [h for h in found if h.kind == kind]
            hits += of_kind[offset : offset + k]
            more = more or len(of_kind) > offset + k
        more = more and offset + k < MAX_SEARCH_DEPTH
        return {
            "commit": sha,
            "query": q.text,
            "mode": mode,
            "level": level,
            "dense_pending": searcher.dense_pending,
            "hits": [self._hit_at(h.to_dict(), level, sha) for h in hits],
            "next_cursor": _make_cursor(key, sha, offset + k) if more else None,
        }

    def _hit_at(self, hit: dict[str, Any], level: str, sha: str) -> dict[str, Any]:
        from kb.retrieval.reading import read_page

        if level == "L2":
            return hit
        short = {name: hit[name] for name in L0_HIT_FIELDS}
        if level == "L1":
            outline: list[dict[str, Any]] = []
            if hit["kind"] == "page":
                try:
                    view = read_page(self.repo, hit["id"], self.principal, sha, "L0")
                    outline = [asdict(entry) for entry in view.outline]
                except NotFoundError:
                    pass
            short["outline"] = outline
        return short

    def read(
        self,
        page: str,
        level: str = "L0",
        section: str | None = None,
        cursor: str | None = None,
        max_tokens: int = 1000,
        commit: str | None = None,
    ) -> dict[str, Any]:
        from kb.retrieval.reading import read_page, read_section

        sha = self._commit(commit)
        if section:
            view = read_section(self.repo, page, section, self.principal, sha, cursor, max_tokens)
        else:
            view = read_page(self.repo, page, self.principal, sha, level, cursor, max_tokens)
        return {"commit": sha, **view.to_dict()}

    def grep(
        self, pattern: str, page: str | None = None, regex: bool = False, ignore_case: bool = False, commit: str | None = None
    ) -> dict[str, Any]:
        from kb.retrieval.reading import grep

        sha = self._commit(commit)
        return {"commit": sha, **grep(self.repo, pattern, self.principal, sha, page, regex, ignore_case).to_dict()}

    def _ledger(self, sha: str) -> list[LedgerEntry]:
        return ledger_at(self.repo, self.repo.resolve(sha))

    def evidence(self, reference: str, commit: str | None = None) -> dict[str, Any]:
        """Lines of an evidence item (``ev-…`` or ``ev-…#L3-L4``), to verify a citation."""
        from kb.citations import parse_span

        sha = self._commit(commit)
        ident, _, lines = reference.strip().partition("#")
        span = parse_span(reference.strip()) if lines else None
        if lines and span is None:
            raise UsageError(f"bad line span {lines!r}", hint="write ev-<id>#L3-L4, or the id alone")
        unknown = NotFoundError(f"unknown evidence id {ident!r}", hint="ids are in search hits (include_evidence) and page citations")
        entry = next((e for e in self._ledger(sha) if e.id == ident), None)
        if entry is None or not can_read(self.scopes, entry.scope):
            raise unknown
        text = (self.repo.read_at(self.repo.resolve(sha), entry.path) or b"").decode("utf-8")
        if is_evidence_hidden(self.repo, entry.id, entry.scope, text):
            raise unknown
        all_lines = text.split("\n")
        if all_lines and all_lines[-1] == "":
            all_lines.pop()
        first, last = (span.start, span.end) if span else (1, len(all_lines))
        if first < 1 or first > max(len(all_lines), 1) or last < first:
            raise NotFoundError(f"{entry.id} has {len(all_lines)} lines; L{first}-L{last} is not among them", hint="ask for lines 1..N")
        last = min(last, len(all_lines), first + MAX_EVIDENCE_LINES - 1)
        return {
            "commit": sha,
            "id": entry.id,
            "kind": entry.kind,
            "scope": entry.scope,
            "source": entry.source,
            "lines": [{"line": n, "text": all_lines[n - 1]} for n in range(first, last + 1)],
            "total_lines": len(all_lines),
        }

    def memory_context(self, question: str, budget: int = 2000, commit: str | None = None) -> dict[str, Any]:
        """The user's memory context from the served index version (or the one of ``commit``);
        the result names the commit that version was built from."""
        from kb.memory_context import build_context
        from kb.retrieval.search import open_searcher

        if self.user is None:
            raise UsageError("a memory context is a user's", hint="connect as the user (kb mcp --as user:ID, or a user's token)")
        searcher = open_searcher(self.repo, self._commit(commit) if commit else None)
        context = build_context(self.repo, self.user, question, budget, searcher=searcher)
        return {**context.to_dict(), "commit": searcher.manifest.source_commit}

    def history(self, page: str, limit: int = 20, commit: str | None = None) -> dict[str, Any]:
        """A page's changes on the default branch (or up to ``commit``), newest first, with the
        merge's verdicts."""
        from kb.retrieval.reading import load_page

        sha = self._commit(commit)
        parsed, _ = load_page(self.repo, page, self.principal, sha)
        path = parsed.path
        changes: list[dict[str, Any]] = []
        walker = self.repo.git.walk(self._at(commit).id, pygit2.enums.SortMode.TOPOLOGICAL)
        walker.simplify_first_parent()
        for change in walker:
            if len(changes) >= min(max(limit, 1), MAX_HISTORY):
                break
            before = change.parents[0] if change.parents else None
            if _blob_at(change, path) == (_blob_at(before, path) if before is not None else None):
                continue
            trailers = _trailers(change.message)
            changes.append(
                {
                    "commit": str(change.id),
                    "time": change.commit_time,
                    "subject": change.message.splitlines()[0] if change.message else "",
                    "verdicts": trailers.get("Kb-Verdicts", ""),
                    "reviewers": trailers.get("Kb-Reviewer-Model", ""),
                    "evidence": trailers.get("Kb-Evidence", ""),
                }
            )
        return {"commit": sha, "page": page_id_for_path(path), "changes": changes}

    def change_status(self, branch: str) -> dict[str, Any]:
        """A work branch's state: its head, whether it is merged, and the signed verdicts on the head."""
        from pipeline.records import reviews_of

        name = branch if branch.startswith("kb/") else f"kb/{branch}"
        unknown = NotFoundError(f"unknown branch {name!r}", hint="kb_propose returns the branch name")
        ref = self.repo.git.references.get(f"refs/heads/{name}")
        if ref is None:
            raise unknown
        head = ref.peel(pygit2.Commit)
        main = self._at(None)
        if not all(can_read(self.scopes, scope) for scope in self._branch_scopes(main, head)):
            raise unknown
        reviews = reviews_of(self.repo, str(head.id))
        merged = head.id == main.id or self.repo.git.descendant_of(main.id, head.id)
        return {
            "branch": name,
            "head": str(head.id),
            "merged": merged,
            "reviews": [
                {
                    "reviewer": r.reviewer_model,
                    "family": r.reviewer_family,
                    "verdict": r.verdict,
                    "comments": [c.get("message", "") for c in r.comments],
                }
                for r in reviews
            ],
        }

    def _branch_scopes(self, main: pygit2.Commit, head: pygit2.Commit) -> set[str]:
        base = self.repo.git.merge_base(main.id, head.id)
        old = self.repo.git[base].peel(pygit2.Commit).tree if base is not None else main.tree
        diff = diff_trees(old, head.tree)
        changed = {p for d in diff.deltas for p in (d.old_file.path, d.new_file.path)}
        return {scope for path in changed if (scope := scope_for_path(path)) is not None} or {SYSTEM}

    # ---- writes ---------------------------------------------------------------------------

    def remember(self, content: str, kind: str = "conversation", source: str = "", name: str = "") -> dict[str, Any]:
        """Add one item to the evidence log, in the principal's scope (content-addressed: the same
        content twice is one item)."""
        from agents.privacy_detector import detector_for
        from kb.evidence import add_items
        from kb.intake import prepare

        if kind not in REMEMBER_KINDS:
            raise UsageError(f"unknown evidence kind {kind!r}", hint=f"use one of: {', '.join(REMEMBER_KINDS)}")
        data = content.encode("utf-8")
        if not data.strip():
            raise UsageError("nothing to remember: the content is empty", hint="send the conversation, document or tool output")
        if len(data) > MAX_REMEMBER_BYTES:
            raise UsageError("the content is over 4 MiB", hint="split it into several items")
        scope = self.user and f"user:{self.user}" or SYSTEM
        default_name = {"conversation": "conversation.md", "trajectory": "trajectory.md"}.get(kind, f"{kind}.md")
        privacy = self.repo.config.privacy
        item = prepare(
            data,
            name or default_name,
            kind,
            scope,
            source or "mcp",
            allow=self.repo.config.secrets.allow,
            privacy=privacy,
            detector=detector_for(privacy),
        )
        result = add_items(self.repo, [item])
        ids = [e.id for e in result.added] or list(result.duplicates)
        return {"evidence_id": ids[0] if ids else "", "added": bool(result.added), "commit": self._commit(None)}

    def forget(self, evidence_id: str | None, user: str | None, match: str | None, confirm: str | None) -> dict[str, Any]:
        """Plan a forgetting (what ``kb forget --dry-run`` lists) and its confirmation code; with
        ``confirm`` equal to that code, run it. Only the admin principal (``system``) may."""
        from pipeline.forget import Target
        from pipeline.forget import forget as run_forget

        if self.principal != SYSTEM:
            raise UsageError("forgetting needs the admin principal", hint="an operator runs kb forget, or an admin token with kb:forget")
        if sum(x is not None for x in (evidence_id, user, match)) != 1:
            raise UsageError("name exactly one of evidence_id, user, match", hint='e.g. {"user": "alice"}')
        target = Target(user, evidence_id, match)
        head = self._commit(None)
        plan = run_forget(self.repo, target, True).plan
        code = forget_code(plan, head)
        if confirm is None:
            return {"commit": head, "plan": plan, "confirm": code, "done": False}
        if confirm != code:
            raise UsageError("the confirmation code does not match the current plan", hint="call kb_forget without confirm for a new plan")
        result = run_forget(self.repo, target, False)
        return {"commit": result.commit or head, "plan": result.plan, "record": result.record, "done": True}

    def propose(self, evidence_ids: list[str]) -> dict[str, Any]:
        """Open a change for evidence the principal may read: a work branch (or a PR on the forge)."""
        from pipeline.propose import propose

        if not evidence_ids:
            raise UsageError("no evidence ids", hint="pass the ids kb_remember returned")
        sha = self._commit(None)
        known = {e.id: e for e in self._ledger(sha)}
        for ident in evidence_ids:
            entry = known.get(ident)
            if entry is None or not can_read(self.scopes, entry.scope):
                raise NotFoundError(f"unknown evidence id {ident!r}", hint="pass the ids kb_remember returned")
        proposal = propose(self.repo, list(evidence_ids))
        return {"branch": proposal.branch, "claims": proposal.claims, "base": sha, "merged": False}


def forget_code(plan: dict[str, Any], head: str) -> str:
    """The confirmation code of a forget plan: it changes when the plan or the repository does."""
    import hashlib

    stable = {key: plan.get(key) for key in ("kind", "evidence", "deleted_pages", "edited_pages", "redacted")}
    return hashlib.sha256(json.dumps([stable, head], sort_keys=True, default=str).encode()).hexdigest()[:12]


def _blob_at(commit: pygit2.Commit, path: str) -> pygit2.Oid | None:
    try:
        return commit.tree[path].id
    except KeyError:
        return None


def _trailers(message: str) -> dict[str, str]:
    from pipeline.records import parse_trailers

    return parse_trailers(message)
