"""`kb eval gate`: a mutation benchmark of the gate and the Reviewer on real merged pages.

1. Material nobody here wrote (LoCoMo conversations, documentation files, or the bundled
   sample) goes through the offline change loop into a fresh repository: `kb init`,
   `evidence add`, `kb run`; the pages merged on main are what gets mutated.
2. Every operator of ``pipeline.eval.mutations`` lists the edits it can make on those pages;
   ``per_operator`` of them are drawn with the seed.
3. Each edit is one work branch from main, committed with the Proposer's trailers (evidence it
   adds is committed on the branch first), then judged as `kb review` and `kb merge` judge it:
   the gate and the configured Reviewer (the offline one here), then the merge gate. An edit is
   *caught* when it would not merge; a faithful control that would not merge is a false positive.
   A merged edit is undone (main reset) before the next one.

The report counts, per category and per operator, caught and missed edits, and per rule how
often it fired first and at all (on mutations and on controls).
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from kb.errors import KbError, UsageError
from kb.evidence import add_items, load_ledger
from kb.intake import PreparedItem, prepare
from kb.repo import Repo
from kb.scaffold import init_repository
from kb.scopes import PAGE_FOLDERS, scope_for_path, user_scope
from pipeline.eval.mutations import CATEGORIES, OPERATORS, Corpus, Mutant, PageView, collect_proper_nouns

SAMPLES = Path(__file__).resolve().parents[2] / "kb" / "samples"


@dataclass(frozen=True)
class Material:
    """What the merged pages are built from."""

    locomo: Path | None = None
    conversations: int = 1  # LoCoMo: the first N conversations
    sessions: int | None = 6  # LoCoMo: the first N sessions of each (None: all)
    docs: tuple[Path, ...] = ()  # documentation files, added as system documents
    sample: bool = False  # the bundled sample (kb/samples): one policy, two sessions of alice

    @property
    def empty(self) -> bool:
        return self.locomo is None and not self.docs and not self.sample


@dataclass(frozen=True)
class Judged:
    operator: str
    category: str
    path: str
    note: str
    caught: bool
    stage: str  # gate | review | merge | "" (merged)
    rule: str  # what stopped it first: a gate rule id, reviewer:<kind>, merge:<message>
    rules: tuple[str, ...]  # every gate rule with an error, and reviewer comment kinds


@dataclass
class GateBenchReport:
    seed: int
    per_operator: int
    material: dict[str, Any]
    results: list[Judged] = field(default_factory=list)
    seconds: float = 0.0

    def rows(self, key: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for r in self.results:
            row = out.setdefault(getattr(r, key), {"category": r.category, "n": 0, "caught": 0})
            row["n"] += 1
            row["caught"] += int(r.caught)
        for row in out.values():
            row["rate"] = round(row["caught"] / row["n"], 4) if row["n"] else None
        return out

    def by_rule(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for r in self.results:
            kind = "control" if r.category == "control" else "mutation"
            for rule in r.rules:
                out.setdefault(rule, {"first_mutation": 0, "first_control": 0, "any_mutation": 0, "any_control": 0})[f"any_{kind}"] += 1
            if r.caught:
                out.setdefault(r.rule, {"first_mutation": 0, "first_control": 0, "any_mutation": 0, "any_control": 0})[f"first_{kind}"] += 1
        return dict(sorted(out.items()))

    def summary(self) -> dict[str, Any]:
        faults = [r for r in self.results if r.category != "control"]
        controls = [r for r in self.results if r.category == "control"]
        rate = lambda xs, caught: round(sum(r.caught == caught for r in xs) / len(xs), 4) if xs else None  # noqa: E731
        return {
            "mutations": len(faults),
            "caught": sum(r.caught for r in faults),
            "catch_rate": rate(faults, True),
            "controls": len(controls),
            "rejected_controls": sum(r.caught for r in controls),
            "false_positive_rate": rate(controls, True) if controls else None,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "drawn_per_operator": self.per_operator,
            "material": self.material,
            "seconds": round(self.seconds, 1),
            "summary": self.summary(),
            "per_category": self.rows("category"),
            "per_operator": self.rows("operator"),
            "per_rule": self.by_rule(),
            "missed": [asdict(r) for r in self.results if not r.caught and r.category != "control"],
            "false_positives": [asdict(r) for r in self.results if r.caught and r.category == "control"],
        }


# ---- building the merged pages ---------------------------------------------------------------


def _trimmed_locomo(path: Path, conversations: int, sessions: int | None, workdir: Path) -> Path:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: cannot read a LoCoMo JSON file ({exc})", hint="pass the locomo10.json format") from None
    samples = (data if isinstance(data, list) else [data])[:conversations]
    if sessions is not None:
        for sample in samples:
            conv = sample.get("conversation", {})
            for key in [k for k in conv if k.startswith("session_")]:
                number = key.split("_")[1]
                if number.isdigit() and int(number) > sessions:
                    del conv[key]
    out = workdir / "locomo-subset.json"
    out.write_text(json.dumps(samples), encoding="utf-8")
    return out


def build_material(workdir: Path, material: Material) -> tuple[Repo, dict[str, Any]]:
    """A fresh repository whose main holds the pages the offline loop merged from ``material``."""
    from pipeline.eval.inputs import load_locomo
    from pipeline.eval.memory import ingest_locomo
    from pipeline.loop import RunStatus, run_loop

    repo = init_repository(workdir / "repo")
    info: dict[str, Any] = {"documents": [], "skipped": [], "locomo": None}
    items: list[PreparedItem] = []
    if material.sample:
        items.append(prepare((SAMPLES / "travel-policy.md").read_bytes(), "travel-policy.md", "document", "system"))
        for name in ("alice-2025-03-02.json", "alice-2025-06-18.json"):
            items.append(prepare((SAMPLES / name).read_bytes(), name, "conversation", user_scope("alice")))
        info["documents"].append("bundled sample (kb/samples)")
    for doc in material.docs:
        try:
            items.append(prepare(doc.read_bytes(), doc.name, "document", "system", source=doc.name))
            info["documents"].append(str(doc))
        except (OSError, KbError) as exc:  # a file with a secret, not UTF-8...: said, not fatal
            info["skipped"].append(f"{doc}: {getattr(exc, 'message', exc)}")
    if items:
        add_items(repo, items)
        result = run_loop(repo, build_index=False)
        if result.status is not RunStatus.MERGED:
            raise UsageError(
                f"the offline loop did not merge the material: {result.reason}", hint="run `kb run` on that repository to see why"
            )
    if material.locomo is not None:
        subset = _trimmed_locomo(material.locomo, material.conversations, material.sessions, workdir)
        _, stats = ingest_locomo(repo, subset, load_locomo(subset), None)
        info["locomo"] = {
            "file": str(material.locomo),
            "conversations": material.conversations,
            "sessions_per_conversation": material.sessions,
        } | stats
    return repo, info


def load_corpus(repo: Repo) -> Corpus:
    evidence = {}
    for entry in load_ledger(repo.root):
        evidence[entry.id] = (repo.root / entry.path).read_text(encoding="utf-8").splitlines()
    pages = {}
    for folder in PAGE_FOLDERS:
        for file in sorted((repo.root / folder).rglob("*.md")):
            pages[file.relative_to(repo.root).as_posix()] = file.read_text(encoding="utf-8")
    return Corpus(evidence, pages, collect_proper_nouns(evidence))


# ---- drawing and judging the edits -------------------------------------------------------------


def draw_mutants(corpus: Corpus, seed: int, per_operator: int, operators: list[str] | None = None) -> list[Mutant]:
    """Every operator's candidate edits over every page, ``per_operator`` of each drawn with the seed."""
    views = [v for path, text in sorted(corpus.pages.items()) if (v := PageView.of(path, text)) is not None]
    chosen: list[Mutant] = []
    for name, (_category, operator) in OPERATORS.items():
        if operators and name not in operators:
            continue
        candidates = [m for view in views for m in operator(view, corpus)]
        random.Random(f"{seed}:{name}").shuffle(candidates)
        chosen.extend(candidates[:per_operator])
    return chosen


def _rules_of(review: Any) -> tuple[str, ...]:
    rules = [f.rule for f in review.gate.errors]
    rules += [f"reviewer:{c.kind}" for c in review.comments if c.kind != "gate"]
    return tuple(dict.fromkeys(rules))


def judge(repo: Repo, mutant: Mutant, number: int) -> Judged:
    """Propose ``mutant`` as a work branch from main, then `kb review` and `kb merge` it."""
    from pipeline.merge import merge_branch
    from pipeline.propose import trailers_for
    from pipeline.review import review_branch
    from pipeline.roles import make_agents
    from pipeline.workspace import open_workspace, remove_workspace

    agents = make_agents(repo.config)
    main = repo.head()
    assert main is not None
    branch = f"kb/mutant-{number:04d}-{mutant.operator.replace('_', '-')}"
    workspace = open_workspace(repo, branch, base=str(main.id))
    evidence: set[str] = set()
    if mutant.evidence is not None:
        add_items(workspace.view, [mutant.evidence])
        evidence.add(mutant.evidence.id)
    for path, text in mutant.files.items():
        target = workspace.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        before = repo.read_at(main, path)
        # the evidence the page cites, before and after the edit: what a proposer names (a page
        # broken past parsing still belongs to the scope of the evidence it cited)
        for view in (PageView.of(path, text), PageView.of(path, before.decode("utf-8")) if before else None):
            if view is not None:
                evidence.update(d.evidence_id for d in view.defs.values())
    if not evidence:  # an index page cites nothing: a proposer names evidence of its scope
        scopes = {scope_for_path(path) for path in mutant.files}
        evidence.update(next(([e.id] for e in load_ledger(repo.root) if e.scope in scopes), []))
    trailers = trailers_for(tuple(sorted(evidence)), str(main.id), agents.proposer.identity, 1)
    workspace.commit(f"Propose: {mutant.operator} ({mutant.note})", trailers, allow_empty=True)
    stage, rule = "", ""
    rules: tuple[str, ...] = ()
    try:
        review = review_branch(repo, branch, 1, agents)
        rules = _rules_of(review)
        if review.gate.errors:
            stage, rule = "gate", review.gate.errors[0].rule
        elif review.verdict != "approve":
            stage, rule = "review", next((f"reviewer:{c.kind}" for c in review.comments), "reviewer")
        else:
            try:
                merge_branch(repo, branch, build_index=False)
            except KbError as exc:
                stage, rule = "merge", f"merge:{exc.message[:60]}"
    except KbError as exc:  # the change cannot even be reviewed: it would not merge
        stage, rule = "review", f"error:{exc.message[:60]}"
    finally:
        if repo.head().id != main.id:  # type: ignore[union-attr]
            repo.git.reset(main.id, pygit2.enums.ResetMode.HARD)
        remove_workspace(repo, branch)
        if branch in repo.git.branches.local:
            repo.git.branches.local.delete(branch)
    return Judged(mutant.operator, mutant.category, mutant.path, mutant.note, bool(stage), stage, rule, rules)


def run_gate_bench(
    material: Material,
    seed: int = 0,
    per_operator: int = 6,
    workdir: Path | None = None,
    operators: list[str] | None = None,
) -> GateBenchReport:
    if material.empty:
        raise UsageError("no material to build pages from", hint="pass --locomo FILE and/or --docs FILE, or --sample")
    unknown = sorted(set(operators or []) - set(OPERATORS))
    if unknown:
        raise UsageError(f"unknown operator {unknown[0]!r}", hint=f"choose from: {', '.join(OPERATORS)}")
    if per_operator < 1:
        raise UsageError("--per-operator must be at least 1", hint="pass --per-operator N with N >= 1")
    start = time.perf_counter()
    temp = workdir is None
    root = Path(tempfile.mkdtemp(prefix="kb-eval-gate-")) if workdir is None else workdir
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        if any(workdir.iterdir()):
            raise UsageError(f"{workdir} is not empty", hint="pass an empty or new folder as --workdir")
    try:
        repo, info = build_material(root, material)
        corpus = load_corpus(repo)
        info["pages"] = len(corpus.pages)
        info["evidence_items"] = len(corpus.evidence)
        report = GateBenchReport(seed, per_operator, info)
        for number, mutant in enumerate(draw_mutants(corpus, seed, per_operator, operators), 1):
            report.results.append(judge(repo, mutant, number))
    finally:
        if temp:
            shutil.rmtree(root, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    return report


def report_lines(report: GateBenchReport) -> list[str]:
    data = report.to_dict()
    s = data["summary"]
    pct = lambda x: "-" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    m = data["material"]
    lines = [
        f"material: {m['pages']} merged pages from {m['evidence_items']} evidence items; seed {report.seed}, "
        f"{report.per_operator} per operator; {data['seconds']} s",
        f"mutations caught: {s['caught']}/{s['mutations']} ({pct(s['catch_rate'])}); "
        f"controls rejected: {s['rejected_controls']}/{s['controls']} ({pct(s['false_positive_rate'])})",
        "",
        f"{'category':<12}{'n':>5}{'caught':>8}{'rate':>9}",
    ]
    for category in CATEGORIES:
        row = data["per_category"].get(category)
        if row:
            label = "rejected" if category == "control" else "caught"
            lines.append(f"{category:<12}{row['n']:>5}{row['caught']:>8}{pct(row['rate']):>9}  ({label})")
    lines += ["", f"{'operator':<32}{'category':<12}{'n':>4}{'caught':>8}{'rate':>9}"]
    for name, row in data["per_operator"].items():
        lines.append(f"{name:<32}{row['category']:<12}{row['n']:>4}{row['caught']:>8}{pct(row['rate']):>9}")
    lines += ["", f"{'rule (stopped it first / fired at all)':<44}{'mutations':>12}{'controls':>12}"]
    for rule, row in data["per_rule"].items():
        lines.append(
            f"{rule[:44]:<44}{row['first_mutation']:>5} /{row['any_mutation']:>4}{row['first_control']:>6} /{row['any_control']:>4}"
        )
    return lines
