"""A cycle's plan and what its jobs do: the batches of a scope, the jobs of a batch in order, and
the branch name a batch's change gets (from a hash of its inputs).

``plan_cycle`` and ``run_jobs`` are pure: a commit in, a plan or the jobs' results out.
"""

from __future__ import annotations

import hashlib

import pygit2

from kb.errors import UsageError
from kb.evidence import ledger_at
from kb.repo import Repo
from pipeline.consolidate.conflicts import qualify_conflicts
from pipeline.consolidate.dedupe import merge_duplicates
from pipeline.consolidate.jobs import regenerate_index, regrounding, repair_links, retire_expired, rewrite_l0
from pipeline.consolidate.model import ModelJobs
from pipeline.consolidate.record import Batch, BatchKind, Cycle, Entry
from pipeline.consolidate.result import JobResult
from pipeline.consolidate.structure import merge_tiny, rewrite_l1, split_oversized
from pipeline.consolidate.view import CommitView, Texts, folder_of, root_of, span_key
from pipeline.workspace import BRANCH_PREFIX

JOBS_VERSION = "1"  # part of every branch name: new job logic may propose again on the same pages


def scope_roots(scope: str, view: CommitView) -> list[str]:
    """``all``, ``knowledge`` or ``users/<id>`` -> the scope roots it names (that have pages)."""
    roots = sorted({root_of(p) for p in view.files})
    if scope == "all":
        return roots
    if scope == "knowledge" or (scope.startswith("users/") and scope.count("/") == 1 and len(scope) > 6):
        if scope not in roots:
            raise UsageError(f"scope {scope!r} has no pages", hint=f"scopes with pages: all, {', '.join(roots)}")
        return [scope]
    raise UsageError(f"invalid scope {scope!r}", hint="use all, knowledge, or users/<id>")


def plan_cycle(repo: Repo, head: pygit2.Commit, scope: str, batch_pages: int, started: str) -> Cycle:
    """The plan and the empty coverage record of a new cycle from ``head``."""
    view = CommitView(repo, head)
    roots = scope_roots(scope, view)
    in_scope = [p for p in sorted(view.files) if root_of(p) in roots]
    folders: dict[str, list[str]] = {}
    for path in in_scope:
        folders.setdefault(folder_of(path), []).append(path)
    batches: list[Batch] = []
    for folder, paths in sorted(folders.items()):
        for n in range(0, len(paths), batch_pages):
            chunk = paths[n : n + batch_pages]
            batches.append(Batch(id=f"pages:{folder}:{n // batch_pages + 1}", kind=BatchKind.PAGES, folder=folder, pages=chunk))
    for root in roots:
        batches.append(Batch(id=f"duplicates:{root}", kind=BatchKind.DUPLICATES, root=root, pages=[]))
        batches.append(Batch(id=f"conflicts:{root}", kind=BatchKind.CONFLICTS, root=root, pages=[]))
    pages: dict[str, Entry] = {}
    claims: dict[str, Entry] = {}
    for path in in_scope:
        pages[path] = Entry()
        page = view.page(path)
        if page is None:
            continue
        cites = {c.label: c for c in page.structure.citations if c.evidence_id}
        for claim in page.structure.claims:
            for label in claim.labels:
                cite = cites.get(label)
                span = span_key(cite.evidence_id or "", cite.start, cite.end) if cite else ""
                claims[f"{path}#{label}"] = Entry(cites=span)
    cycle_id = f"{started[:10]}-{hashlib.sha256((str(head.id) + scope).encode()).hexdigest()[:8]}"
    ledger = ledger_at(repo, head)
    return Cycle(
        cycle=cycle_id,
        base=str(head.id),
        scope=scope,
        started_at=started,
        evidence_count=len(ledger),
        batch_pages=batch_pages,
        batches=batches,
        pages=pages,
        claims=claims,
    )


def run_jobs(
    view: CommitView, batch: Batch, today: str, model: ModelJobs | None = None, frozen: frozenset[str] = frozenset()
) -> list[tuple[str, JobResult]]:
    """The batch's jobs in order on ``view``, each seeing the texts the ones before it wrote;
    with ``model``, the jobs also ask it what the offline checks cannot decide. ``frozen`` pages
    (withdrawn after a review) are neither read as candidates nor written."""
    texts = Texts(view)
    config = view.repo.config.consolidation
    out: list[tuple[str, JobResult]] = []

    def run(name: str, result: JobResult) -> None:
        texts.edits.update(result.changes)
        out.append((name, result))

    if batch.kind is BatchKind.PAGES:
        folder = str(batch.folder)
        paths = [p for p in batch.pages if p in view.files and p not in frozen]
        run("re-verification", regrounding(texts, paths, model))
        run("links", repair_links(texts, paths, view.ids))
        run("retirement", retire_expired(texts, paths, today))
        run(
            "split",
            split_oversized(texts, paths, config.page_tokens, frozen, view.repo.config.budgets.l1_tokens, config.max_diff_lines // 2),
        )
        run("outlines", rewrite_l1(texts, paths))
        run("summaries", rewrite_l0(texts, paths, model=model))
        if f"{folder}/index.md" in view.files and f"{folder}/index.md" not in frozen:
            run("index", regenerate_index(texts, folder))
    else:
        paths = [p for p in sorted(view.files) if root_of(p) == batch.root and p not in frozen]
        if batch.kind is BatchKind.DUPLICATES:
            dedupe = merge_duplicates(texts, paths, today, model)
            run("dedupe", dedupe)
            tiny = merge_tiny(texts, paths, config.tiny_claims, today, frozen)
            run("tiny pages", tiny)
            changed = sorted(set(dedupe.changes) | set(tiny.changes))
            summaries = rewrite_l0(texts, changed, model=model)  # an L0 may name what was merged away
            run("summaries", summaries)
            for folder in sorted({folder_of(p) for p in set(summaries.changes) | set(tiny.changes)}):
                if f"{folder}/index.md" in view.files and f"{folder}/index.md" not in frozen:
                    run("index", regenerate_index(texts, folder))
        else:
            run("conflicts", qualify_conflicts(texts, paths))
    return out


def branch_for(batch: Batch, view: CommitView, changes: dict[str, str]) -> str:
    """A name from a hash of the job's inputs (the batch, its pages' blobs, what it would write):
    the same inputs give the same branch, so a rerun never opens a second one."""
    digest = hashlib.sha256()
    digest.update(f"{JOBS_VERSION}\n{batch.id}\n".encode())
    for path in sorted(set(batch.pages) | set(changes)):
        digest.update(f"{path} {view.files.get(path, '')}\n".encode())
    for path, text in sorted(changes.items()):
        digest.update(f"{path}\n{text}\n".encode())
    return f"{BRANCH_PREFIX}consolidate-{batch.kind.value}-{digest.hexdigest()[:12]}"
