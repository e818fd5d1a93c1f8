"""`kb eval memory`: how well memory brings back what a question needs, without a model.

- LoCoMo: each conversation is ingested for both speakers (every session an evidence item of
  each speaker's scope), memory is built by the configured agents (the offline ones by
  default) through the normal reviewed loop, and for every QA item the context for the
  speaker it asks about is retrieved. Score: evidence recall@k, the share of the gold turns
  (``D1:3``...) that the first k retrieved items cite (memory chunks through their citations,
  evidence snippets through their line spans), per category; the profile counts for the
  memory variants. QA items whose evidence ids are malformed or point to no turn are skipped
  and counted.
- Memory cases: the recall of the key facts of each case's ``evaluation_criteria``
  (pipeline.eval.keyfacts) in the context returned for its ``user_question``.
"""

from __future__ import annotations

import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.citations import LINE_PAIR_RE
from kb.errors import UsageError
from kb.evidence import ledger_at
from kb.memory_context import VARIANTS, ContextItem, build_context
from kb.progress import report
from kb.repo import Repo
from kb.scaffold import init_repository
from pipeline.eval.inputs import load_case, load_locomo
from pipeline.eval.keyfacts import recall as keyfact_recall

TURN_RE = re.compile(r"^\[[^\]]*\] [^:(]+ \((D\d+:\d+)\): ")
DIA_RE = re.compile(r"^D\d+:\d+$")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass
class VariantScore:
    hits: dict[int, list[float]] = field(default_factory=dict)  # k -> per-question recall
    by_category: dict[int, dict[int, list[float]]] = field(default_factory=dict)  # cat -> k -> recalls

    def add(self, category: int, k: int, value: float) -> None:
        self.hits.setdefault(k, []).append(value)
        self.by_category.setdefault(category, {}).setdefault(k, []).append(value)

    def summary(self) -> dict[str, Any]:
        mean = lambda xs: round(sum(xs) / len(xs), 4) if xs else None  # noqa: E731
        return {
            "overall": {f"recall@{k}": mean(v) for k, v in sorted(self.hits.items())},
            "per_category": {
                f"{c} {CATEGORIES.get(c, '')}".strip(): {f"recall@{k}": mean(v) for k, v in sorted(ks.items())}
                | {"n": len(next(iter(ks.values())))}
                for c, ks in sorted(self.by_category.items())
            },
        }


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def turn_map(repo: Repo) -> dict[str, dict[int, str]]:
    """evidence id -> {line number: LoCoMo turn id} from the stored conversation lines."""
    head = repo.head()
    out: dict[str, dict[int, str]] = {}
    if head is None:
        return out
    for entry in ledger_at(repo, head):
        lines = (repo.read_at(head, entry.path) or b"").decode("utf-8").splitlines()
        out[entry.id] = {n: m.group(1) for n, line in enumerate(lines, 1) if (m := TURN_RE.match(line))}
    return out


def turns_of(item: ContextItem, turns: dict[str, dict[int, str]]) -> set[str]:
    found: set[str] = set()
    for cite in item.cites:
        ev, _, span = cite.partition("#")
        m = LINE_PAIR_RE.match(span)
        if not m:
            continue
        lines = turns.get(ev, {})
        found.update(lines[n] for n in range(int(m.group(1)), int(m.group(2)) + 1) if n in lines)
    return found


def ingest_locomo(repo: Repo, path: Path, samples: list[dict[str, Any]], limit: int | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from pipeline.memory import ingest

    samples = samples[:limit] if limit else samples
    sessions = 0
    start = time.perf_counter()
    report("ingest speakers", 0, 2 * len(samples))
    for n, sample in enumerate(samples):
        conv = sample["conversation"]
        for m, speaker in enumerate((conv["speaker_a"], conv["speaker_b"])):
            report("ingest speakers", 2 * n + m, 2 * len(samples))
            user = slug(f"{sample.get('sample_id', 'conv')}-{speaker}")
            result = ingest(repo, user, [path], sample=str(sample.get("sample_id")), speaker=speaker, build_index=False)
            sessions += result.sessions
            if result.run is not None and result.run.merge is None:
                raise UsageError(
                    f"memory for {user} was not merged: {result.run.reason}", hint="run `kb memory ingest` on that conversation to see why"
                )
    report("ingest speakers", 2 * len(samples), 2 * len(samples))
    seconds = time.perf_counter() - start
    return samples, {
        "sessions": sessions,
        "seconds": round(seconds, 2),
        "sessions_per_minute": round(sessions / seconds * 60, 1) if seconds else None,
    }


def eval_repository(path: Path, config_text: str | None) -> Repo:
    """A fresh repository for an evaluation, with the caller's configuration when given (so
    memory is built by the configured agents; the offline ones otherwise)."""
    repo = init_repository(path)
    if config_text is not None:
        (repo.root / "kb.config.yaml").write_text(config_text, encoding="utf-8")
        repo.commit_worktree_paths(["kb.config.yaml"], "eval: use the caller's configuration\n")
        repo = Repo(repo.root)
    return repo


def measure_locomo(
    repo: Repo, samples: list[dict[str, Any]], variants: list[str], ks: list[int], qa_limit: int | None = None
) -> tuple[dict[str, VariantScore], dict[str, list[float]], int, int]:
    """Evidence recall@k of every QA item of ``samples`` on ``repo``'s memory as it is now (its
    index built): scores and context latencies per variant, questions asked, items skipped."""
    from kb.retrieval.search import open_searcher

    searcher = open_searcher(repo)
    turns = turn_map(repo)
    scores = {v: VariantScore() for v in variants}
    skipped = 0
    latencies: dict[str, list[float]] = {v: [] for v in variants}
    questions = 0
    for sample in samples:
        conv = sample["conversation"]
        valid_turns = {t.get("dia_id") for k, v in conv.items() if re.fullmatch(r"session_[0-9]+", k) for t in v or []}
        speakers = (conv["speaker_a"], conv["speaker_b"])
        for qa in sample["qa"][:qa_limit] if qa_limit else sample["qa"]:
            gold = {e.strip() for e in qa.get("evidence") or []}
            if not gold or not all(DIA_RE.match(e) and e in valid_turns for e in gold):
                skipped += 1
                continue
            named = [s for s in speakers if s.split()[0].lower() in qa["question"].lower()]
            user = slug(f"{sample.get('sample_id', 'conv')}-{named[0] if len(named) == 1 else speakers[0]}")
            questions += 1
            for variant in variants:
                t0 = time.perf_counter()
                context = build_context(repo, user, qa["question"], budget=10**6, variant=variant, k=max(ks), searcher=searcher)
                latencies[variant].append(time.perf_counter() - t0)
                base = set()
                if variant != "raw":
                    base = set().union(*(turns_of(i, turns) for i in context.items if i.kind == "profile")) if context.items else set()
                for k in ks:
                    covered = base.union(*(turns_of(i, turns) for i in context.ranked[:k])) if context.ranked else base
                    scores[variant].add(int(qa["category"]), k, len(gold & covered) / len(gold))
    return scores, latencies, questions, skipped


def eval_locomo(
    path: Path,
    variants: list[str],
    ks: list[int],
    workdir: Path,
    limit: int | None = None,
    qa_limit: int | None = None,
    config_text: str | None = None,
) -> dict[str, Any]:
    from kb.retrieval.build import build_index

    checked = load_locomo(path)
    repo = eval_repository(workdir / "locomo", config_text)
    samples, ingest_stats = ingest_locomo(repo, path, checked, limit)
    start = time.perf_counter()
    build_index(repo, progress=report)
    index_s = time.perf_counter() - start
    scores, latencies, questions, skipped = measure_locomo(repo, samples, variants, ks, qa_limit)
    pct = lambda xs, q: round(statistics.quantiles(xs, n=100)[q - 1] * 1000, 1) if len(xs) >= 2 else None  # noqa: E731
    return {
        "locomo": str(path),
        "conversations": len(samples),
        "questions": questions,
        "skipped_malformed_evidence": skipped,
        "ingest": ingest_stats,
        "index_build_s": round(index_s, 2),
        "variants": {
            v: scores[v].summary() | {"context_latency_ms": {"p50": pct(latencies[v], 50), "p95": pct(latencies[v], 95)}} for v in variants
        },
    }


def eval_cases(
    folder: Path, variants: list[str], workdir: Path, budget: int = 2000, judge: bool = False, config_text: str | None = None
) -> dict[str, Any]:
    """Key-fact recall of each case's context; with ``judge``, also a model's answer and its grade.
    ``config_text`` (the caller's kb.config.yaml) chooses the agents that build the memory."""
    from kb.retrieval.build import build_index
    from kb.retrieval.search import open_searcher
    from pipeline.memory import ingest

    cases = sorted(folder.rglob("*.yaml"))
    if not cases:
        raise UsageError(f"no .yaml case files under {folder}", hint="pass a folder that holds the YAML case files")
    loaded = {case: load_case(case) for case in cases}  # every file checked before any work
    repo = eval_repository(workdir / "cases", config_text)
    users = {}
    for n, case in enumerate(cases):
        # a neutral id ("user-a" -> "User A"): a name made from the case's title ("Bank Account
        # Setup") would put the question's own words into every claim about the user
        user = f"user-{chr(ord('a') + n % 26)}{'' if n < 26 else chr(ord('a') + n // 26 - 1)}"
        users[case] = user
        report("ingest cases", n, len(cases))
        ingest(repo, user, [case], build_index=False)
    report("ingest cases", len(cases), len(cases))
    build_index(repo, progress=report)
    searcher = open_searcher(repo)
    rows = []
    for case in cases:
        data = loaded[case]
        row: dict[str, Any] = {"case": f"{case.parent.name}/{case.name}", "question": data["user_question"]}
        for variant in variants:
            context = build_context(repo, users[case], data["user_question"], budget=budget, variant=variant, searcher=searcher)
            hit, missing = keyfact_recall(data["evaluation_criteria"], context.text())
            row[variant] = {
                "key_facts": len(hit) + len(missing),
                "found": len(hit),
                "recall": round(len(hit) / max(1, len(hit) + len(missing)), 3),
                "missing": missing,
                "tokens": context.tokens,
            }
            if judge:
                from pipeline.eval.judge import answer_and_judge

                judged = answer_and_judge(repo.config, data["user_question"], context.text(), data["evaluation_criteria"])
                row[variant] |= {
                    "answer": judged.answer,
                    "judge_score": judged.score,
                    "judge_reason": judged.reason,
                    "answer_model": judged.answer_model,
                    "judge_model": judged.judge_model,
                }
        rows.append(row)
    return {"cases": rows, "budget": budget}


def run_eval(
    locomo: Path | None,
    cases: Path | None,
    variant: str,
    ks: list[int],
    workdir: Path | None = None,
    limit: int | None = None,
    qa_limit: int | None = None,
    judge: bool = False,
    config_text: str | None = None,
) -> dict[str, Any]:
    if locomo is None and cases is None:
        raise UsageError("nothing to evaluate", hint="pass --locomo FILE and/or --cases DIR")
    variants = list(VARIANTS) if variant == "all" else [variant]
    if any(v not in VARIANTS for v in variants):
        raise UsageError(f"unknown variant {variant!r}", hint="use raw, pages, both or all")
    work = workdir or Path(tempfile.mkdtemp(prefix="kb-eval-memory-"))
    out: dict[str, Any] = {"workdir": str(work)}
    if locomo is not None:
        out["locomo"] = eval_locomo(locomo, variants, ks, work, limit, qa_limit, config_text)
    if cases is not None:
        out["cases"] = eval_cases(cases, variants, work, judge=judge, config_text=config_text)
    return out


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report of ``run_eval`` as lines for people."""
    out: list[str] = []
    if "locomo" in report:
        lo = report["locomo"]
        out.append(
            f"LoCoMo: {lo['conversations']} conversation(s), {lo['questions']} question(s), {lo['skipped_malformed_evidence']} skipped (malformed evidence ids)"
        )
        out.append(
            f"ingest: {lo['ingest']['sessions']} sessions in {lo['ingest']['seconds']} s ({lo['ingest']['sessions_per_minute']} sessions/min); index build {lo['index_build_s']} s"
        )
        for name, v in lo["variants"].items():
            out.append(
                f"  {name:<6} overall {v['overall']}  context p50 {v['context_latency_ms']['p50']} ms, p95 {v['context_latency_ms']['p95']} ms"
            )
            for cat, values in v["per_category"].items():
                out.append(f"         {cat:<16} {values}")
    if "cases" in report:
        for row in report["cases"]["cases"]:
            parts = [
                f"{v}: {row[v]['found']}/{row[v]['key_facts']}" + (f" (judge {row[v]['judge_score']})" if "judge_score" in row[v] else "")
                for v in ("raw", "pages", "both")
                if v in row
            ]
            out.append(f"{row['case']}: key facts in context {', '.join(parts)}")
    return out
