"""CLI commands of user memory: ingest sessions, show a profile, build context for an agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from kb.errors import EXIT_FINDINGS

memory_app = typer.Typer(help="Per-user memory: sessions in, cited memory out.\n\nExample: kb memory ingest --user alice chats/*.json", no_args_is_help=True)


def _echo(text: str) -> None:
    typer.echo(text)


def _open():  # noqa: ANN202
    from kb.cli import _open as open_repo

    return open_repo()


@memory_app.command("ingest")
def ingest_cmd(
    sessions: Annotated[list[Path], typer.Argument(help="Session files: chat .json/.jsonl, LoCoMo .json, case .yaml.")],
    user: Annotated[str, typer.Option(help="The user whose memory this is (users/<id>/).")],
    sample: Annotated[Optional[str], typer.Option(help="LoCoMo: which conversation of the file (index or sample_id).")] = None,
    speaker: Annotated[Optional[str], typer.Option(help="Which speaker is the user (default: 'user', or the speaker named like --user).")] = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Skip the index build after merging.")] = False,
) -> None:
    """Store sessions as dated evidence (in date order, skipping known ones), then run one
    reviewed proposal for users/<id>/.

    Example: kb memory ingest --user alice session-1.json session-2.json
    """
    from pipeline.memory import ingest

    result = ingest(_open(), user, sessions, sample, speaker, build_index=not no_index)
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    _echo(f"{result.sessions} session(s): {len(result.added)} new, {len(result.skipped)} already ingested")
    run = result.run
    if run is None:
        return
    _echo(f"proposal {run.proposal.branch}: {run.proposal.claims} claim(s), {run.proposal.closed} closed")
    if run.status == "merged" and run.merge is not None:
        _echo(f"merged as {run.merge.commit[:10]} after {len(run.reviews)} review round(s)")
    else:
        _echo(f"needs-human: {run.reason}; branch {run.proposal.branch} left unmerged")
        raise typer.Exit(EXIT_FINDINGS)


@memory_app.command("show")
def show_cmd(
    user: Annotated[str, typer.Option(help="The user.")],
    as_json: Annotated[bool, typer.Option("--json", help="Header fields and typed facts as JSON.")] = False,
) -> None:
    """Print a user's profile page (from HEAD).

    Example: kb memory show --user alice
    """
    from kb.evidence import scope_for_user
    from kb.errors import NotFoundError
    from kb.page import parse_page

    repo = _open()
    scope_for_user(user)
    head = repo.head()
    data = repo.read_at(head, f"users/{user}/profile.md") if head else None
    if data is None:
        raise NotFoundError(f"no profile for user {user!r}", hint=f"ingest sessions with `kb memory ingest --user {user} FILE...`")
    if as_json:
        page = parse_page(data, f"users/{user}/profile.md")
        _echo(json.dumps(page.meta, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        _echo(data.decode("utf-8").rstrip("\n"))


@memory_app.command("context")
def context_cmd(
    question: Annotated[str, typer.Argument(help="The user's question.")],
    user: Annotated[str, typer.Option(help="The user.")],
    budget: Annotated[int, typer.Option(help="Token budget of the whole context (tiktoken cl100k_base).")] = 2000,
    variant: Annotated[str, typer.Option(help="both (memory pages and raw evidence) | pages | raw")] = "both",
    as_json: Annotated[bool, typer.Option("--json", help="Items with sources, dates, citations and token counts.")] = False,
) -> None:
    """Build the prompt context for a user's question: profile first, then relevant memory and
    evidence, labelled with sources, marked as data, within the budget.

    Example: kb memory context --user alice "Which seat should I book?" --budget 1500
    """
    from kb.memory_context import build_context

    context = build_context(_open(), user, question, budget, variant)
    if as_json:
        _echo(json.dumps(context.to_dict(), indent=2, ensure_ascii=False, sort_keys=True))
    else:
        _echo(context.text())


def eval_memory_cmd(
    locomo: Annotated[Optional[Path], typer.Option(help="LoCoMo JSON file (e.g. ../shared/data/locomo/locomo-dev.json).")] = None,
    cases: Annotated[Optional[Path], typer.Option(help="Folder of YAML memory cases.")] = None,
    variant: Annotated[str, typer.Option(help="raw | pages | both | all")] = "all",
    k: Annotated[str, typer.Option(help="Comma-separated cut-offs.")] = "5,10",
    limit: Annotated[Optional[int], typer.Option(help="LoCoMo: only the first N conversations.")] = None,
    qa_limit: Annotated[Optional[int], typer.Option(help="LoCoMo: only the first N questions of each conversation.")] = None,
    workdir: Annotated[Optional[Path], typer.Option(help="Where to build the evaluation repositories (default: a temp dir).")] = None,
    judge: Annotated[bool, typer.Option("--judge", help="Cases: also answer with models.proposer and grade with models.judge (a third family). Opt-in; calls real models.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Per variant: overall and per-category recall@k.")] = False,
) -> None:
    """Evaluate memory without a model: LoCoMo evidence recall@k per category for raw evidence,
    memory pages, and both; key-fact recall of the memory cases.

    Example: kb eval memory --locomo ../shared/data/locomo/locomo-dev.json --variant all --k 5,10
    """
    from kb.errors import UsageError
    from pipeline.eval_memory import run_eval

    try:
        ks = sorted({int(x) for x in k.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"bad --k {k!r}", hint="use comma-separated integers, e.g. 5,10") from None
    from kb.errors import NotARepositoryError

    try:  # inside a repository, its configured agents build the evaluated memory
        config_text: str | None = (_open().root / "kb.config.yaml").read_text(encoding="utf-8")
    except NotARepositoryError:
        config_text = None
    report = run_eval(locomo, cases, variant, ks, workdir, limit, qa_limit, judge=judge, config_text=config_text)
    if as_json:
        _echo(json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False))
        return
    if "locomo" in report:
        lo = report["locomo"]
        _echo(f"LoCoMo: {lo['conversations']} conversation(s), {lo['questions']} question(s), {lo['skipped_malformed_evidence']} skipped (malformed evidence ids)")
        _echo(f"ingest: {lo['ingest']['sessions']} sessions in {lo['ingest']['seconds']} s ({lo['ingest']['sessions_per_minute']} sessions/min); index build {lo['index_build_s']} s")
        for name, v in lo["variants"].items():
            _echo(f"  {name:<6} overall {v['overall']}  context p50 {v['context_latency_ms']['p50']} ms, p95 {v['context_latency_ms']['p95']} ms")
            for cat, values in v["per_category"].items():
                _echo(f"         {cat:<16} {values}")
    if "cases" in report:
        for row in report["cases"]["cases"]:
            parts = [f"{v}: {row[v]['found']}/{row[v]['key_facts']}" + (f" (judge {row[v]['judge_score']})" if "judge_score" in row[v] else "") for v in ("raw", "pages", "both") if v in row]
            _echo(f"{row['case']}: key facts in context {', '.join(parts)}")


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
    from kb.cli_retrieval import eval_app

    eval_app.command("memory")(eval_memory_cmd)
