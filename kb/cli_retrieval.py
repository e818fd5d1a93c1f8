"""CLI commands of the serving layer: ``index build|status``, ``search``, ``read``, ``grep`` and
``eval retrieval``. Each parses arguments, calls one library function and prints its result;
``eval_app`` is exported so other evaluations can join ``kb eval``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from kb.errors import UsageError

index_app = typer.Typer(help="The serving indexes (BM25 + dense) under .kb/index.\n\nExample: kb index build", no_args_is_help=True)
eval_app = typer.Typer(help="Evaluations.\n\nExample: kb eval retrieval --corpus corpus.jsonl --queries queries.jsonl --qrels qrels/dev.tsv", no_args_is_help=True)

AsOpt = Annotated[str, typer.Option("--as", help="Principal: system, or user:<id> (sees system + that user).")]
CommitOpt = Annotated[Optional[str], typer.Option("--commit", help="Read this commit or branch (default HEAD).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")]


def _repo() -> Any:
    from kb.cli import _open

    return _open()


def _echo(text: str) -> None:
    typer.echo(text)


def _json(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2))


def _progress(stage: str, done: int, total: int) -> None:
    if sys.stderr.isatty():
        end = "\n" if done >= total else ""
        typer.echo(f"\r{stage}: {done}/{total}", err=True, nl=False)
        if end:
            typer.echo("", err=True)


# ---- index ---------------------------------------------------------------------------------


@index_app.command("build")
def index_build(
    commit: Annotated[Optional[str], typer.Option("--commit", help="Build from this commit or branch (default HEAD).")] = None,
    full: Annotated[bool, typer.Option("--full", help="Re-embed everything instead of reusing unchanged chunks.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build or update the indexes from a commit (git objects only, never the working tree).

    Only chunks whose content changed are embedded again; the new version replaces the
    served one atomically. Example: kb index build --commit main
    """
    from kb.indexing import build_index

    result = build_index(_repo(), commit=commit, full=full, progress=_progress)
    if as_json:
        _json(result.to_dict())
        return
    if result.unchanged:
        _echo(f"index already serves {result.commit[:12]} ({result.version}); nothing to do")
        return
    how = f"full rebuild ({result.reason})" if result.full else "incremental"
    _echo(
        f"built {result.version} from {result.commit[:12]}: {result.pages} pages, {result.evidence} evidence items, "
        f"{result.chunks} chunks; {how}: embedded {result.embedded}, reused {result.reused}, "
        f"removed {result.removed}, added {result.added} in {result.seconds:.1f}s"
    )
    for path, reason in result.skipped:
        _echo(f"skipped {path}: {reason}")


@index_app.command("status")
def index_status_cmd(as_json: JsonOpt = False) -> None:
    """Which commit the index serves and how far it is behind HEAD.

    Example: kb index status
    """
    from kb.indexing import index_status

    status = index_status(_repo())
    if as_json:
        _json(status.to_dict())
        return
    if status.served_commit is None:
        _echo(f"no usable index: {status.problem}; run `kb index build`")
        return
    behind = "unknown" if status.behind is None else f"{status.behind} commit(s) behind HEAD"
    if status.ahead:
        behind += f", {status.ahead} commit(s) not on HEAD"
    counts = ", ".join(f"{v} {k}" for k, v in sorted(status.counts.items()))
    _echo(f"serving {status.served_commit[:12]} ({status.version}), built {status.built_at}; {behind}")
    _echo(f"{counts}; embedder {status.embedder}")
    if status.point_in_time:
        _echo(f"point-in-time indexes (kb search --commit): {', '.join(c[:12] for c in status.point_in_time)}")
    if not status.config_matches:
        _echo("retrieval settings changed since this build: run `kb index build` to apply them")


# ---- search, read, grep --------------------------------------------------------------------


def search_cmd(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    principal: AsOpt = "system",
    k: Annotated[int, typer.Option("--k", help="Number of pages (and of evidence hits).")] = 10,
    at: Annotated[Optional[str], typer.Option("--at", help="Only pages valid on this date (YYYY-MM-DD).")] = None,
    mode: Annotated[str, typer.Option("--mode", help="hybrid | bm25 | dense")] = "hybrid",
    include_evidence: Annotated[bool, typer.Option("--include-evidence", help="Also search raw evidence.")] = False,
    include_deprecated: Annotated[bool, typer.Option("--include-deprecated", help="Include deprecated pages.")] = False,
    commit: Annotated[
        Optional[str],
        typer.Option("--commit", help="Search the repository as it was at this commit or branch (a point-in-time index is built on first use)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Search the served index: pages with section, lines and L0 (hybrid BM25 + dense).

    With --commit, search as of that commit: the served index if it serves that commit, else a
    point-in-time index under .kb/index/at/ built on first use from the served one plus the
    chunks that differ (the served index is not changed).

    Example: kb search "travel preferences" --as user:alice --k 5
    """
    from kb.search import make_query, open_searcher

    q = make_query(query, principal, k, at, mode, include_evidence, include_deprecated)
    searcher = open_searcher(_repo(), commit, _progress)
    hits = searcher.search(q)
    if as_json:
        _json({"query": q.text, "principal": principal, "mode": mode, "commit": searcher.manifest.source_commit, "hits": [h.to_dict() for h in hits]})
        return
    if not hits:
        _echo("no results")
    for n, hit in enumerate(hits, 1):
        ranks = ", ".join(f"{name} #{rank}" for name, rank in sorted(hit.ranks.items()))
        where = f"{hit.id}#{hit.anchor}" if hit.anchor else hit.id
        _echo(f"{n:>2}. [{hit.kind}] {where}  L{hit.line_start}-{hit.line_end}  score {hit.score:.4f} ({ranks})")
        if hit.kind == "page":
            _echo(f"    {hit.title}: {hit.summary}")
        else:
            _echo(f"    {hit.title}: {hit.text.splitlines()[0][:160] if hit.text else ''}")


def read_cmd(
    page: Annotated[str, typer.Argument(help="Page id or path, e.g. knowledge/acme or users/alice/travel.md.")],
    level: Annotated[str, typer.Option("--level", help="L0 (summary + outline) | L1 (+ overview) | L2 (whole page).")] = "L0",
    section: Annotated[Optional[str], typer.Option("--section", help="Read this section (anchor) instead of a level.")] = None,
    cursor: Annotated[Optional[str], typer.Option("--cursor", help="Continue where the previous read stopped.")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Bound on the text returned.")] = 1000,
    principal: AsOpt = "system",
    commit: CommitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Read a page progressively: L0 with an outline of sections (anchors, token sizes), then
    L1/L2 or one section, in bounded pieces with a cursor.

    Example: kb read knowledge/acme --section finances
    """
    from kb.disclosure import read_page, read_section

    repo = _repo()
    if section is not None:
        view = read_section(repo, page, section, principal, commit, cursor, max_tokens)
    else:
        view = read_page(repo, page, principal, commit, level, cursor, max_tokens)
    if as_json:
        _json(view.to_dict())
        return
    validity = f"  valid {view.valid_from or '...'} to {view.valid_to or '...'}" if view.valid_from or view.valid_to else ""
    _echo(f"{view.title}  ({view.id}, {view.type}, {view.status}, {view.scope}{validity}, {view.tokens} tokens)")
    _echo(f"L0: {view.summary}")
    if view.level in ("L0", "L1"):
        _echo("outline:")
        for entry in view.outline:
            _echo(f"  {'  ' * (entry.level - 1)}{entry.title}  #{entry.anchor}  L{entry.line}-{entry.end_line}  {entry.tokens} tokens")
    if view.text:
        label = f"#{view.anchor}" if view.anchor else view.level
        _echo(f"--- {label} L{view.line_start}-{view.line_end}")
        _echo(view.text)
    if view.next_cursor:
        _echo(f"--- more: --cursor {view.next_cursor}")


def grep_cmd(
    pattern: Annotated[str, typer.Argument(help="Text to find (literal unless --regex).")],
    page: Annotated[Optional[str], typer.Option("--page", help="Only this page.")] = None,
    regex: Annotated[bool, typer.Option("--regex", help="PATTERN is a Python regular expression.")] = False,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="Case-insensitive.")] = False,
    principal: AsOpt = "system",
    commit: CommitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Find lines in pages: each hit with page, section anchor and line.

    Example: kb grep "window seat" --as user:alice
    """
    from kb.disclosure import grep

    result = grep(_repo(), pattern, principal, commit, page, regex, ignore_case)
    if as_json:
        _json(result.to_dict())
        return
    if not result.hits:
        _echo("no matches")
    for hit in result.hits:
        where = f"#{hit.anchor}" if hit.anchor else ""
        _echo(f"{hit.path}:{hit.line}  {hit.page}{where}  {hit.text.strip()}")
    if result.truncated:
        _echo(f"(stopped after {len(result.hits)} matches; narrow the pattern or use --page)")


# ---- eval ----------------------------------------------------------------------------------


def _cutoffs(text: str) -> list[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"invalid --k {text!r}", hint="use a number or a comma-separated list, e.g. --k 10,100") from None
    if not values or values[0] < 1:
        raise UsageError(f"invalid --k {text!r}", hint="cut-offs are positive numbers")
    return values


def _eval_config(chunk_tokens: int | None, chunk_overlap: int | None, rrf_k: int | None) -> Any:
    from kb.config import Config
    from kb.errors import ConfigError, NotARepositoryError

    try:
        config = _repo().config
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
    workdir: Annotated[Optional[Path], typer.Option("--workdir", help="Keep the index here; a rerun re-embeds nothing.")] = None,
    chunk_tokens: Annotated[Optional[int], typer.Option("--chunk-tokens", help="Override retrieval.chunk_tokens.")] = None,
    chunk_overlap: Annotated[Optional[int], typer.Option("--chunk-overlap", help="Override retrieval.chunk_overlap.")] = None,
    rrf_k: Annotated[Optional[int], typer.Option("--rrf-k", help="Override retrieval.rrf_k.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Recall@k, MRR@k and nDCG@k of BM25, dense and hybrid on BEIR files, side by side.

    Uses the product's chunker, analyzer, embedder and fusion; a document counts once (best
    chunk). Example: kb eval retrieval --corpus c.jsonl --queries q.jsonl --qrels dev.tsv --k 10,100
    """
    from kb.beir import EVAL_MODES, run_eval
    from kb.embedder import make_embedder

    modes = list(EVAL_MODES) if mode == "all" else [mode]
    if any(m not in EVAL_MODES for m in modes):
        raise UsageError(f"unknown mode {mode!r}", hint="use hybrid, bm25, dense or all")
    config = _eval_config(chunk_tokens, chunk_overlap, rrf_k)
    reports, info = run_eval(corpus, queries, qrels, config, modes, _cutoffs(k), workdir, make_embedder(config.retrieval.embedder), _progress)
    if as_json:
        for report in reports:
            typer.echo(json.dumps(report.to_dict() | {"info": info}, sort_keys=True))
        return
    keys = list(reports[0].metrics)
    _echo(f"{info['queries']} queries, {info['documents']} documents, {info['chunks']} chunks ({info['embedded']} embedded this run), embedder {info['embedder']}")
    _echo(f"{'metric':<12}" + "".join(f"{r.mode:>10}" for r in reports))
    for key in keys:
        _echo(f"{key:<12}" + "".join(f"{r.metrics[key]:>10.4f}" for r in reports))


def register(app: typer.Typer) -> None:
    """Add the serving-layer commands to the ``kb`` app."""
    app.add_typer(index_app, name="index")
    app.add_typer(eval_app, name="eval")
    app.command("search")(search_cmd)
    app.command("read")(read_cmd)
    app.command("grep")(grep_cmd)
