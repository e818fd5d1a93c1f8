"""``kb eval retrieval|memory|gate``: measuring retrieval and memory on public data sets, and the gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kb.cli.common import JsonOpt, echo, open_repo, parse_cutoffs, print_json, progress
from kb.errors import UsageError

if TYPE_CHECKING:
    from kb.config import Config

eval_app = typer.Typer(
    help="Evaluations.\n\nExample: kb eval retrieval --corpus corpus.jsonl --queries queries.jsonl --qrels qrels/dev.tsv",
    no_args_is_help=True,
)


def _eval_config(chunk_tokens: int | None, chunk_overlap: int | None, rrf_k: int | None) -> Config:
    from kb.config import Config
    from kb.errors import ConfigError, NotARepositoryError

    try:
        config = open_repo().config
    except (NotARepositoryError, ConfigError):
        config = Config(version=1)
    changes = {k: v for k, v in {"chunk_tokens": chunk_tokens, "chunk_overlap": chunk_overlap, "rrf_k": rrf_k}.items() if v is not None}
    if changes:
        config = config.model_copy(update={"retrieval": config.retrieval.model_copy(update=changes)})
    return config


@eval_app.command("retrieval")
def eval_retrieval(
    corpus: Annotated[Path, typer.Option("--corpus", help="BEIR corpus.jsonl ({_id, title, text} per line).")],
    queries: Annotated[Path, typer.Option("--queries", help="BEIR queries.jsonl ({_id, text} per line).")],
    qrels: Annotated[Path, typer.Option("--qrels", help="Judgments .tsv: query-id, corpus-id, score.")],
    mode: Annotated[str, typer.Option("--mode", help="hybrid | bm25 | dense | all")] = "all",
    k: Annotated[str, typer.Option("--k", help="Cut-off(s), e.g. 10 or 10,100.")] = "10",
    workdir: Annotated[Path | None, typer.Option("--workdir", help="Keep the index here; a rerun re-embeds nothing.")] = None,
    chunk_tokens: Annotated[int | None, typer.Option("--chunk-tokens", help="Override retrieval.chunk_tokens.")] = None,
    chunk_overlap: Annotated[int | None, typer.Option("--chunk-overlap", help="Override retrieval.chunk_overlap.")] = None,
    rrf_k: Annotated[int | None, typer.Option("--rrf-k", help="Override retrieval.rrf_k.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Recall@k, MRR@k and nDCG@k of BM25, dense and hybrid on BEIR files, side by side.

    Uses the product's chunker, analyzer, embedder and fusion; a document counts once (best
    chunk). Example: kb eval retrieval --corpus c.jsonl --queries q.jsonl --qrels dev.tsv --k 10,100
    """
    from kb.errors import NotARepositoryError
    from kb.retrieval.embed_cache import with_cache
    from kb.retrieval.embedder import make_embedder
    from pipeline.eval.beir import EVAL_MODES, run_eval

    modes = list(EVAL_MODES) if mode == "all" else [mode]
    if any(m not in EVAL_MODES for m in modes):
        raise UsageError(f"unknown mode {mode!r}", hint="use hybrid, bm25, dense or all")
    config = _eval_config(chunk_tokens, chunk_overlap, rrf_k)
    embedder = make_embedder(config.retrieval.embedder)
    try:  # inside a repository, the evaluation shares its embedding cache
        embedder = with_cache(embedder, open_repo().state_dir)
    except NotARepositoryError:
        pass
    reports, info = run_eval(corpus, queries, qrels, config, modes, parse_cutoffs(k), workdir, embedder, progress)
    if as_json:
        for report in reports:
            typer.echo(json.dumps(report.to_dict() | {"info": info}, sort_keys=True))
        return
    keys = list(reports[0].metrics)
    echo(
        f"{info['queries']} queries, {info['documents']} documents, {info['chunks']} chunks ({info['embedded']} embedded this run), embedder {info['embedder']}"
    )
    echo(f"{'metric':<12}" + "".join(f"{r.mode:>10}" for r in reports))
    for key in keys:
        echo(f"{key:<12}" + "".join(f"{r.metrics[key]:>10.4f}" for r in reports))


@eval_app.command("memory")
def memory(
    locomo: Annotated[Path | None, typer.Option(help="LoCoMo JSON file (e.g. ../shared/data/locomo/locomo-dev.json).")] = None,
    cases: Annotated[Path | None, typer.Option(help="Folder of YAML memory cases.")] = None,
    variant: Annotated[str, typer.Option(help="raw | pages | both | all")] = "all",
    k: Annotated[str, typer.Option(help="Comma-separated cut-offs.")] = "5,10",
    limit: Annotated[int | None, typer.Option(help="LoCoMo: only the first N conversations.")] = None,
    qa_limit: Annotated[int | None, typer.Option(help="LoCoMo: only the first N questions of each conversation.")] = None,
    workdir: Annotated[Path | None, typer.Option(help="Where to build the evaluation repositories (default: a temp dir).")] = None,
    judge: Annotated[
        bool,
        typer.Option(
            "--judge",
            help="Cases: also answer with models.proposer and grade with models.judge (a third family). Opt-in; calls real models.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Per variant: overall and per-category recall@k.")] = False,
) -> None:
    """Evaluate memory without a model: LoCoMo evidence recall@k per category for raw evidence,
    memory pages, and both; key-fact recall of the memory cases.

    Example: kb eval memory --locomo ../shared/data/locomo/locomo-dev.json --variant all --k 5,10
    """
    from kb.errors import NotARepositoryError
    from pipeline.eval.memory import report_lines, run_eval

    try:  # inside a repository, its configured agents build the evaluated memory
        config_text: str | None = (open_repo().root / "kb.config.yaml").read_text(encoding="utf-8")
    except NotARepositoryError:
        config_text = None
    report = run_eval(locomo, cases, variant, parse_cutoffs(k), workdir, limit, qa_limit, judge=judge, config_text=config_text)
    if as_json:
        print_json(report)
        return
    for line in report_lines(report):
        echo(line)


@eval_app.command("gate")
def gate(
    locomo: Annotated[Path | None, typer.Option(help="LoCoMo JSON file whose conversations become memory pages.")] = None,
    conversations: Annotated[int, typer.Option(help="LoCoMo: the first N conversations.")] = 1,
    sessions: Annotated[int, typer.Option(help="LoCoMo: the first N sessions of each conversation (0: all).")] = 6,
    docs: Annotated[list[Path] | None, typer.Option("--docs", help="A documentation file (Markdown or text); repeat the option.")] = None,
    sample: Annotated[bool, typer.Option("--sample", help="Also the bundled sample (one policy, two sessions).")] = False,
    seed: Annotated[int, typer.Option(help="Which edits are drawn.")] = 0,
    per_operator: Annotated[int, typer.Option("--per-operator", help="Edits drawn per operator.")] = 6,
    operator: Annotated[list[str] | None, typer.Option("--operator", help="Only this operator; repeat the option.")] = None,
    workdir: Annotated[Path | None, typer.Option(help="Keep the built repository here (an empty folder; default: a temp dir).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Mutation benchmark of the gate and the Reviewer: seeded unfaithful edits and faithful
    controls of pages the offline loop merged from real material, each judged as `kb review`
    and `kb merge` would; catch rate per category, operator and rule, and false positives.

    Example: kb eval gate --locomo ../shared/data/locomo/locomo-dev.json --docs README.md --seed 0
    """
    from pipeline.eval.gate import Material, report_lines, run_gate_bench

    if conversations < 1 or sessions < 0:
        raise UsageError("--conversations must be at least 1 and --sessions at least 0", hint="e.g. --conversations 2 --sessions 3")
    material = Material(locomo, conversations, sessions or None, tuple(docs or ()), sample)
    report = run_gate_bench(material, seed, per_operator, workdir, operator)
    if as_json:
        print_json(report.to_dict())
        return
    for line in report_lines(report):
        echo(line)
