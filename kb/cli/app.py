"""The ``kb`` command: the composition root. It assembles the command modules (one per group),
reads the global ``--repo`` option, and owns the one error handler: ``KbError`` becomes
``error:``/``hint:`` lines and the error's exit code; anything else is a bug, written to a crash
log. Heavy libraries are imported inside commands so that ``kb --help`` stays fast.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from typer import TyperException

from kb.cli import evaluate, forget, loop, memory, pr, reading, repository
from kb.cli.common import LockWaitOpt, RepoOpt, set_command_label, set_lock_wait, set_repo_option
from kb.cli.consolidate import consolidate_app
from kb.cli.evidence import evidence_app
from kb.cli.index import index_app
from kb.cli.mcp import mcp_app
from kb.clock import compact_utc
from kb.errors import EXIT_BUG, KbError
from kb.progress import Reporter, set_reporter


def _plain_help_types() -> None:
    """Help in the words of git and click (``QUERY``, ``TEXT``, ``INTEGER``), not Python's.

    typer 0.29 prints arguments as ``{query}`` and types as ``<str>`` or ``<list[Path]>``; these two
    overrides of its parameter class (pinned version; a test reads the help) restore the usual form.
    """
    from typer import core

    words = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "Path": "PATH", "bool": "BOOLEAN"}

    def display_type(self: core._TyperParameter, ctx: object) -> str:
        label = original(self, ctx)  # type: ignore[arg-type]
        inner = label.strip("<>")
        while inner.startswith("list[") and inner.endswith("]"):
            inner = inner[5:-1]
        return words.get(inner, inner.upper() if inner.isidentifier() else inner)

    def usage_name(self: core.TyperArgument) -> str:
        name = (self.metavar or self.name or "").upper()
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    def argument_name(self: core.TyperArgument) -> str:
        return (self.metavar or self.name or "").upper() + ("..." if self.nargs != 1 else "")

    def argument_type(self: core.TyperArgument, ctx: object) -> str | None:
        label = display_type(self, ctx)
        return label if "|" in label else None  # an argument's name says what it is; choices stay

    original = core._TyperParameter.display_type
    core._TyperParameter.display_type = display_type  # type: ignore[method-assign]
    core.TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]
    core.TyperArgument._rich_display_name = argument_name  # type: ignore[method-assign]
    core.TyperArgument.display_type_rich = argument_type  # type: ignore[method-assign,assignment]


_plain_help_types()

app = typer.Typer(
    name="kb",
    help="Git-backed Markdown knowledge base and user memory for AI agents.\n\nExample: kb init my-kb && cd my-kb && kb evidence add chat.json --kind conversation --user alice",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        from kb import DISTRIBUTION

        typer.echo(f"kb {version(DISTRIBUTION)}")
        raise typer.Exit(0)


@app.callback()
def _root(
    repo: RepoOpt = None,
    lock_wait: LockWaitOpt = None,
    _version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True)
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines on stderr.")] = False,
) -> None:
    set_repo_option(repo)
    set_lock_wait(lock_wait)
    set_reporter(Reporter(quiet=quiet, tick=True))


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
app.command("keygen")(loop.keygen)
app.add_typer(memory.memory_app, name="memory")
app.add_typer(evaluate.eval_app, name="eval")
app.command("forget")(forget.forget)
app.add_typer(forget.retention_app, name="retention")
app.add_typer(mcp_app, name="mcp")
app.add_typer(consolidate_app, name="consolidate")
app.add_typer(pr.pr_app, name="pr")
app.command("sync")(pr.sync)
app.add_typer(pr.github_app, name="github")


def _crash_log(exc: BaseException) -> Path:
    folder = Path(tempfile.gettempdir()) / "kb-crashes"
    folder.mkdir(exist_ok=True)
    path = folder / f"crash-{compact_utc()}-{os.getpid()}.log"
    path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    return path


class _Interrupts:
    """Ctrl-C, noted before it becomes KeyboardInterrupt: typer turns that exception into a silent
    exit status 130, so ``main`` learns of it here and says so."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, _signum: int, _frame: object) -> None:
        self.seen = True
        raise KeyboardInterrupt

    @contextmanager
    def watching(self) -> Iterator[None]:
        own = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        if own:
            signal.signal(signal.SIGINT, self)
        try:
            yield
        finally:
            if own:
                signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupted() -> None:
    """Every command cleans up on the way out (locks released, temporary folders removed; what it
    reported done is committed), so the message is short."""
    typer.echo("interrupted", err=True)
    sys.exit(130)


def main(argv: list[str] | None = None) -> None:
    set_command_label(" ".join(["kb", *(sys.argv[1:] if argv is None else argv)]))
    interrupts = _Interrupts()
    try:
        with interrupts.watching():
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
        _interrupted()
    except Exception as exc:
        log = _crash_log(exc)
        typer.echo(f"error: internal error ({type(exc).__name__}: {exc}); this is a bug, details in {log}", err=True)
        sys.exit(EXIT_BUG)
    if interrupts.seen:
        _interrupted()
    if isinstance(result, int) and result:
        sys.exit(result)
