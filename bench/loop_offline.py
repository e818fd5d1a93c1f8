"""Benchmark the change loop on the built-in offline agents.

Usage: python bench/loop_offline.py [--cases ../shared/data/memory-cases]

For the bundled sample and for each memory case (sessions ingested as one user's evidence):
wall time of one change (propose, gate, review, merge; the index build timed apart), model
calls (0 for the offline agents), and for the cases the recall of the key facts named in the
case's `evaluation_criteria` among the merged cited claims (pipeline.eval.keyfacts, by pattern).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import yaml

from kb.evidence import add_items
from kb.intake import prepare, prepare_messages
from kb.page import parse_page
from kb.repo import Repo
from kb.scaffold import init_repository
from kb.scopes import user_scope
from kb.sessions import read_sessions
from pipeline.eval.keyfacts import recall
from pipeline.loop import run_loop

ROOT = Path(__file__).resolve().parents[1]


def cited_claims(repo: Repo) -> str:
    """Text of every claim that carries a citation, with its quotes, in the merged pages."""
    out = []
    for page_file in sorted((repo.root / "users").rglob("*.md")) + sorted((repo.root / "knowledge").rglob("*.md")):
        rel = page_file.relative_to(repo.root).as_posix()
        page = parse_page(page_file.read_text(encoding="utf-8"), rel)
        quotes = {c.label: c.quote for c in page.structure.citations}
        for claim in page.structure.claims:
            out.append(claim.text + " " + " ".join(quotes.get(label, "") for label in claim.labels))
    return "\n".join(out)


def timed_loop(repo: Repo, ids: list[str] | None, user_speakers: dict[str, tuple[str, ...]] | None = None) -> dict:
    start = time.perf_counter()
    result = run_loop(repo, ids=ids, user_speakers=user_speakers, build_index=False)
    loop_s = time.perf_counter() - start
    from kb.retrieval.build import build_index

    start = time.perf_counter()
    build_index(repo)
    index_s = time.perf_counter() - start
    calls = result.usage.calls
    return {
        "status": result.status.value,
        "rounds": len(result.reviews),
        "claims": result.proposal.claims,
        "closed": result.proposal.closed,
        "files": len(result.proposal.files),
        "loop_s": round(loop_s, 2),
        "index_s": round(index_s, 2),
        "model_calls": calls,
    }


def bench_sample(workdir: Path) -> dict:
    repo = init_repository(workdir / "sample")
    samples = ROOT / "kb" / "samples"
    items = [prepare((samples / "travel-policy.md").read_bytes(), "travel-policy.md", "document", "system")]
    items += [
        prepare((samples / n).read_bytes(), n, "conversation", user_scope("alice"))
        for n in ("alice-2025-03-02.json", "alice-2025-06-18.json")
    ]
    add_items(repo, items)
    return {"case": "bundled sample (1 document, 2 sessions)"} | timed_loop(repo, None)


def bench_case(workdir: Path, case: Path) -> dict:
    data = yaml.safe_load(case.read_text())
    user = "user-" + case.stem.split("_")[0]
    repo = init_repository(workdir / case.stem)
    sessions = sorted(read_sessions(case).sessions, key=lambda s: s.date)
    items = [prepare_messages(list(s.messages), s.source, user_scope(user), {"session_date": s.date}) for s in sessions]
    add_items(repo, items)
    row = {"case": f"{case.parent.name}/{case.stem} ({len(sessions)} sessions)"} | timed_loop(repo, None, {user: ("the user",)})
    hit, missing = recall(data["evaluation_criteria"], cited_claims(repo))
    row |= {"key_facts": len(hit) + len(missing), "key_facts_cited": len(hit), "missing": missing}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=Path, default=ROOT.parent / "shared" / "data" / "memory-cases")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="kb-bench-loop-"))
    rows = [bench_sample(workdir)]
    if args.cases.is_dir():
        rows += [bench_case(workdir, case) for case in sorted(args.cases.rglob("*.yaml"))]
    else:
        print(f"# {args.cases} not found: memory cases skipped (see ../shared/data/README.md)")
    print(
        json.dumps({"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}", "rows": rows}, indent=2)
    )


if __name__ == "__main__":
    main()
