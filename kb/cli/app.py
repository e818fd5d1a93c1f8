"""The ``kb`` command: the composition root. It assembles the command modules (one per group),
reads the global ``--repo`` option, and owns the one error handler: ``KbError`` becomes
``error:``/``hint:`` lines and the error's exit code; anything else is a bug, written to a crash
log. Heavy libraries are imported inside commands so that ``kb --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path

import typer
from typer import TyperException

from kb.cli import evaluate, loop, memory, reading, repository
from kb.cli.common import RepoOpt, set_repo_option
from kb.cli.evidence import evidence_app
from kb.cli.index import index_app
from kb.clock import compact_utc
from kb.errors import EXIT_BUG, KbError

app = typer.Typer(
    name="kb",
    help="Git-backed Markdown knowledge base and user memory for AI agents.\n\nExample: kb init my-kb && cd my-kb && kb evidence add chat.json --kind conversation --user alice",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(repo: RepoOpt = None) -> None:
    set_repo_option(repo)


app.command("init")(repository.init)
app.add_typer(evidence_app, name="evidence")
app.command("check")(repository.check)
app.add_typer(index_app, name="index")
app.command("search")(reading.search)
app.command("read")(reading.read)
app.command("grep")(reading.grep)
app.command("propose")(loop.propose)
app.command("review")(loop.review)
app.command("merge")(loop.merge)
app.command("run")(loop.run)
app.add_typer(memory.memory_app, name="memory")
app.add_typer(evaluate.eval_app, name="eval")


def _crash_log(exc: BaseException) -> Path:
    folder = Path(tempfile.gettempdir()) / "kb-crashes"
    folder.mkdir(exist_ok=True)
    path = folder / f"crash-{compact_utc()}-{os.getpid()}.log"
    path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    try:
        result = app(args=argv, standalone_mode=False, prog_name="kb")
    except KbError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        for detail in exc.details:
            typer.echo(f"  {detail}", err=True)
        if exc.hint:
            typer.echo(f"hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except TyperException as exc:  # typer's own click: usage errors, bad parameters, no such command
        exc.show()  # type: ignore[attr-defined]
        sys.exit(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        log = _crash_log(exc)
        typer.echo(f"error: internal error ({type(exc).__name__}: {exc}); this is a bug, details in {log}", err=True)
        sys.exit(EXIT_BUG)
    if isinstance(result, int) and result:
        sys.exit(result)
