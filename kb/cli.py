"""The ``kb`` command: the composition root. Each command parses its arguments, calls one
library function and prints the result. Heavy libraries are imported inside commands so that
``kb --help`` stays fast. One handler maps ``KbError`` to ``error:``/``hint:`` lines and an exit
code; anything else is a bug, written to a crash log.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Annotated, Optional

import click
import typer

from kb.errors import EXIT_BUG, EXIT_FINDINGS, KbError, UsageError

app = typer.Typer(
    name="kb",
    help="Git-backed Markdown knowledge base and user memory for AI agents.\n\nExample: kb init my-kb && cd my-kb && kb evidence add chat.json --kind conversation --user alice",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
evidence_app = typer.Typer(help="The append-only evidence log.\n\nExample: kb evidence list", no_args_is_help=True)
app.add_typer(evidence_app, name="evidence")

_state: dict[str, Path | None] = {"repo": None}

RepoOpt = Annotated[Optional[Path], typer.Option("--repo", help="Repository root (default: found from the current directory upward).", envvar="KB_REPO")]


@app.callback()
def _root(repo: RepoOpt = None) -> None:
    _state["repo"] = repo


def _open():  # noqa: ANN202 - returns kb.repo.Repo; imported lazily
    from kb.repo import open_repo

    return open_repo(_state["repo"])


def _echo(text: str) -> None:
    typer.echo(text)


# ---- init ------------------------------------------------------------------------------


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="Folder to create the repository in.")] = Path("."),
    name: Annotated[Optional[str], typer.Option(help="Repository name (default: folder name).")] = None,
) -> None:
    """Create a knowledge repository: config, evidence/, knowledge/index.md, users/, first commit.

    Example: kb init my-kb
    """
    from kb.scaffold import init_repository

    repo = init_repository(path, name)
    _echo(f"initialised kb repository in {repo.root}")


# ---- evidence --------------------------------------------------------------------------


@evidence_app.command("add")
def evidence_add(
    files: Annotated[list[Path], typer.Argument(help="Files to add (JSON/JSONL chats, Markdown, text).")],
    kind: Annotated[str, typer.Option(help="conversation | trajectory | document | tool-output")] = "document",
    user: Annotated[Optional[str], typer.Option(help="Scope the items to this user (user:<id>); default system.")] = None,
    source: Annotated[Optional[str], typer.Option(help="Where the material came from (default: file name).")] = None,
) -> None:
    """Append files to the evidence log (atomic, deduplicated by content, committed).

    Example: kb evidence add chat.json --kind conversation --user alice
    """
    from kb.evidence import add_items, prepare, scope_for_user

    repo = _open()
    scope = scope_for_user(user)
    items = []
    for file in files:
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            raise UsageError(f"{file}: no such file") from None
        except IsADirectoryError:
            raise UsageError(f"{file}: is a folder; pass files") from None
        items.append(prepare(data, file.name, kind, scope, source or file.name))
    result = add_items(repo, items)
    for entry in result.added:
        _echo(f"added {entry.id}  {entry.kind}  {entry.scope}  {entry.lines} lines  {entry.path}")
    for dup in result.duplicates:
        _echo(f"skipped {dup}  (already in the log)")


@evidence_app.command("show")
def evidence_show(
    evidence_id: Annotated[str, typer.Argument(metavar="ID", help="Evidence id (ev-...), optionally with #L3-L5.")],
    lines: Annotated[Optional[str], typer.Option(help="Line range A-B.")] = None,
) -> None:
    """Print an evidence item with line numbers.

    Example: kb evidence show ev-9f2c4e1ab07d3c55 --lines 3-5
    """
    from kb.evidence import find_entry, load_ledger, parse_span, read_content, slice_lines

    repo = _open()
    ident, _, span = evidence_id.partition("#")
    entry = find_entry(load_ledger(repo.root), ident)
    content = read_content(repo.root, entry)
    start, end = parse_span(lines or span) if (lines or span) else (1, max(entry.lines, 1))
    _echo(f"# {entry.id}  {entry.kind}  {entry.scope}  added {entry.added_at}  source {entry.source}")
    for number, text in slice_lines(content, start, end, entry.id):
        _echo(f"{number:>5}  {text}")


@evidence_app.command("list")
def evidence_list(
    user: Annotated[Optional[str], typer.Option(help="Only this user's items.")] = None,
    kind: Annotated[Optional[str], typer.Option(help="Only this kind.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines.")] = False,
) -> None:
    """List evidence items in ledger order.

    Example: kb evidence list --user alice
    """
    import json

    from kb.evidence import load_ledger, scope_for_user

    repo = _open()
    scope = scope_for_user(user) if user else None
    for entry in load_ledger(repo.root):
        if (scope and entry.scope != scope) or (kind and entry.kind != kind):
            continue
        if as_json:
            _echo(json.dumps(entry.payload() | {"hash": entry.hash}, sort_keys=True, ensure_ascii=False))
        else:
            _echo(f"{entry.id}  {entry.kind:<12} {entry.scope:<16} {entry.lines:>5} lines  {entry.added_at}  {entry.source}")


# ---- check -----------------------------------------------------------------------------


@app.command()
def check(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Only these pages or evidence files (default: the whole repository).")] = None,
    changed_only: Annotated[bool, typer.Option("--changed-only", help="Check only what changed since --base (default HEAD).")] = False,
    base: Annotated[Optional[str], typer.Option(help="Base commit: evidence must be append-only against it.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json | github")] = "text",
) -> None:
    """Validate pages, links, indexes, budgets, citations, evidence and secrets.

    Exit 0 when clean, 1 when there are errors. Example: kb check --changed-only --base main
    """
    from ci.findings import render_github, render_json, render_text
    from ci.run import run_checks

    renderers = {"text": render_text, "json": render_json, "github": render_github}
    if fmt not in renderers:
        raise UsageError(f"unknown format {fmt!r}", hint="use text, json or github")
    report = run_checks(_open(), changed_only=changed_only, base=base, paths=[str(p) for p in paths] if paths else None)
    _echo(renderers[fmt](report.findings, report.checked))
    if not report.ok:
        raise typer.Exit(EXIT_FINDINGS)


from kb.cli_retrieval import register as _register_retrieval  # noqa: E402
_register_retrieval(app)


from kb.cli_loop import register as _register_loop  # noqa: E402

_register_loop(app)

from kb.cli_memory import register as _register_memory  # noqa: E402

_register_memory(app)


# ---- entry point -----------------------------------------------------------------------


def _crash_log(exc: BaseException) -> Path:
    folder = Path(tempfile.gettempdir()) / "kb-crashes"
    folder.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"crash-{stamp}-{os.getpid()}.log"
    path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    try:
        result = app(args=argv, standalone_mode=False, prog_name="kb")
    except KbError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            typer.echo(f"hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the one top-level handler for bugs
        log = _crash_log(exc)
        typer.echo(f"error: internal error ({type(exc).__name__}: {exc}); this is a bug, details in {log}", err=True)
        sys.exit(EXIT_BUG)
    if isinstance(result, int) and result:
        sys.exit(result)
