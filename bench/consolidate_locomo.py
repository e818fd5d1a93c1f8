"""Consolidation benchmark (issue 15): one cycle over user memory built from LoCoMo conversations.

Usage: python bench/consolidate_locomo.py [--locomo ../shared/data/locomo/locomo-dev.json]
       [--conversations 3] [--k 10] [--json] [--keep DIR]

The memory is built once, as ``kb eval memory`` builds it (``pipeline.eval.memory``: each
conversation ingested for both speakers through the reviewed loop, the configured agents: the
offline ones here), and its index built. Then, on the same questions:

- before: pages and claims under ``users/``, evidence recall@k of every LoCoMo QA item
  (``measure_locomo``, the helper behind ``kb eval memory``), for the memory variants;
- one consolidation cycle over the whole repository (``run_consolidation``, rerun until the
  cycle is complete or stops making progress), timed, and the index rebuilt;
- after: the same figures, plus what the cycle found (duplicates and the other kinds), what the
  offline jobs skipped, how many branches it merged, and its wall time per 1,000 pages in scope.

Figures are given for all conversations together and for each one (pages, claims, recall).

Recall must not drop. The data are third-party (``../shared/data``, see its README); the script
says so when they are absent.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kb.repo import Repo
from kb.retrieval.build import build_index
from pipeline.consolidate.cycle import run_consolidation
from pipeline.consolidate.record import current_cycle
from pipeline.consolidate.status import RunStatus, cycle_status
from pipeline.consolidate.view import CommitView
from pipeline.eval.inputs import load_locomo
from pipeline.eval.memory import eval_repository, ingest_locomo, measure_locomo, slug

VARIANTS = ["pages", "both"]


def census(repo: Repo, prefix: str = "users/") -> dict[str, int]:
    """Pages (by status) and claims under ``prefix`` at HEAD."""
    head = repo.head()
    assert head is not None
    view = CommitView(repo, head)
    pages = list(view.pages(prefix))
    statuses = Counter(p.status for p in pages)
    return {
        "pages": len(pages),
        "current_pages": sum(n for s, n in statuses.items() if s not in ("deprecated", "archived")),
        "deprecated_pages": statuses.get("deprecated", 0),
        "claims": sum(len(p.structure.claims) for p in pages),
    }


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def recall(repo: Repo, samples: list[dict[str, Any]], ks: list[int]) -> dict[str, Any]:
    """Evidence recall@k of every QA item, over all conversations and per conversation."""
    hits: dict[str, dict[int, list[float]]] = {v: {k: [] for k in ks} for v in VARIANTS}
    per: dict[str, Any] = {}
    questions = skipped = 0
    for sample in samples:
        scores, _, asked, left = measure_locomo(repo, [sample], VARIANTS, ks)
        questions, skipped = questions + asked, skipped + left
        per[str(sample.get("sample_id"))] = {"questions": asked} | {v: scores[v].summary()["overall"] for v in VARIANTS}
        for v in VARIANTS:
            for k in ks:
                hits[v][k] += scores[v].hits.get(k, [])
    overall = {v: {f"recall@{k}": _mean(hits[v][k]) for k in ks} for v in VARIANTS}
    return {"questions": questions, "skipped": skipped, "per_conversation": per} | overall


def run(locomo: Path, conversations: int, ks: list[int], workdir: Path) -> dict[str, Any]:
    repo = eval_repository(workdir / "locomo", None)
    t0 = time.perf_counter()
    samples, ingest_stats = ingest_locomo(repo, locomo, load_locomo(locomo), conversations)
    build_index(repo)
    built_s = time.perf_counter() - t0
    users = {str(s.get("sample_id")): f"users/{slug(str(s.get('sample_id')))}-" for s in samples}
    before = census(repo) | {"recall": recall(repo, samples, ks), "per_conversation": {c: census(repo, p) for c, p in users.items()}}

    t0 = time.perf_counter()
    runs = []
    for _ in range(20):  # each run resumes the cycle; caps may stop one early
        report = run_consolidation(repo, scope="all", max_changes=10**6, build_index=False)
        runs.append(report)
        if report.status is not RunStatus.OPEN or not (report.batches_done or report.merged):
            break
    cycle_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    build_index(repo)
    reindex_s = time.perf_counter() - t1
    status = cycle_status(repo)
    found = [f for r in runs for f in r.found]
    after = census(repo) | {"recall": recall(repo, samples, ks), "per_conversation": {c: census(repo, p) for c, p in users.items()}}
    record = current_cycle(repo)
    in_scope = len(record.pages) if record else 0
    return {
        "locomo": str(locomo),
        "conversations": [s.get("sample_id") for s in samples],
        "ingest": ingest_stats | {"with_index_s": round(built_s, 1)},
        "before": before,
        "after": after,
        "cycle": {
            "id": status["cycle"],
            "status": status["status"],
            "runs": len(runs),
            "coverage": status["coverage"],
            "actions": status["actions"],
            "merged_branches": sum(len(r.merged) for r in runs),
            "left_for_a_person": sorted({b for r in runs for b in r.needs_human}),
            "found": dict(sorted(Counter(f"{f.kind}{'' if f.fixed else ' (not fixed)'}" for f in found).items())),
            "duplicates_found": sum(1 for f in found if f.kind == "duplicate"),
            "skipped": sorted({s for r in runs for s in r.skipped}),
            "pages_in_scope": in_scope,
            "seconds": round(cycle_s, 1),
            "seconds_per_1000_pages": round(cycle_s / max(1, in_scope) * 1000, 1),
            "index_rebuild_s": round(reindex_s, 1),
        },
    }


def lines(out: dict[str, Any], ks: list[int]) -> list[str]:
    b, a, c = out["before"], out["after"], out["cycle"]
    rows = [
        f"LoCoMo {', '.join(map(str, out['conversations']))}: {out['ingest']['sessions']} sessions ingested "
        f"({out['ingest']['with_index_s']} s with the index), {b['recall']['questions']} questions",
        f"{'':28}{'before':>10}{'after':>10}",
        *(
            f"{name:28}{b[key]:>10}{a[key]:>10}"
            for name, key in (
                ("pages under users/", "pages"),
                ("  current", "current_pages"),
                ("  deprecated", "deprecated_pages"),
                ("claims", "claims"),
            )
        ),
    ]
    for v in VARIANTS:
        for k in ks:
            rows.append(f"{f'recall@{k} ({v})':28}{b['recall'][v][f'recall@{k}']:>10}{a['recall'][v][f'recall@{k}']:>10}")
    for conv, counts in b["per_conversation"].items():
        after_counts, rb, ra = a["per_conversation"][conv], b["recall"]["per_conversation"][conv], a["recall"]["per_conversation"][conv]
        rows.append(
            f"  {conv}: pages {counts['pages']} -> {after_counts['pages']} ({after_counts['current_pages']} current), "
            f"claims {counts['claims']} -> {after_counts['claims']}, {rb['questions']} questions, "
            + ", ".join(f"recall@{k} {v} {rb[v][f'recall@{k}']} -> {ra[v][f'recall@{k}']}" for v in VARIANTS for k in ks)
        )
    rows += [
        f"cycle {c['id']}: {c['status']}, coverage {c['coverage']['percent']}% ({c['coverage']['covered']}/{c['coverage']['total']}) in {c['runs']} run(s)",
        f"actions: {', '.join(f'{n} {k}' for k, n in c['actions'].items())}",
        f"found: {', '.join(f'{n} {k}' for k, n in c['found'].items()) or 'nothing'}; duplicates found: {c['duplicates_found']}",
        f"branches merged: {c['merged_branches']}; left for a person: {len(c['left_for_a_person'])}",
        *(f"skipped: {line}" for line in c["skipped"]),
        f"cycle wall time {c['seconds']} s for {c['pages_in_scope']} pages in scope = {c['seconds_per_1000_pages']} s per 1,000 pages "
        f"(index rebuild afterwards {c['index_rebuild_s']} s)",
    ]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--locomo", type=Path, default=Path("../shared/data/locomo/locomo-dev.json"))
    parser.add_argument("--conversations", type=int, default=3, help="first N conversations (0: all)")
    parser.add_argument("--k", default="10", help="comma-separated cut-offs")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, help="build the repository in this (new) folder and keep it, to compare trees")
    args = parser.parse_args()
    if not args.locomo.is_file():
        print(f"no LoCoMo file at {args.locomo}: pass --locomo (third-party data, see ../shared/data/README)", file=sys.stderr)
        return 2
    ks = [int(k) for k in args.k.split(",")]
    if args.keep is not None:
        out = run(args.locomo, args.conversations or 0, ks, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="kb-bench-consolidate-") as tmp:
            out = run(args.locomo, args.conversations or 0, ks, Path(tmp))
    print(json.dumps(out, indent=1) if args.json else "\n".join(lines(out, ks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
