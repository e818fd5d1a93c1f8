"""What every command module shares: the repository option and opener, output helpers, the
common option types, ``--k`` parsing, and progress on stderr.

No command lives here, and nothing here imports a command module, so the command modules and
``kb.cli.app`` (which assembles them) form no cycle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kb.controls import json_visible, visible
from kb.errors import UsageError
from kb.progress import report

if TYPE_CHECKING:
    from kb.repo import Repo

_state: dict[str, Path | None] = {"repo": None}
_lock: dict[str, float | str | None] = {"wait": None, "command": ""}

RepoOpt = Annotated[
    Path | None, typer.Option("--repo", help="Repository root (default: found from the current directory upward).", envvar="KB_REPO")
]
AsOpt = Annotated[str, typer.Option("--as", help="Principal: system, or user:<id> (sees system + that user).")]
CommitOpt = Annotated[str | None, typer.Option("--commit", help="Read this commit or branch (default HEAD).")]
LockWaitOpt = Annotated[
    float | None,
    typer.Option(
        "--lock-wait",
        min=0,
        help="Seconds a writing command waits for another one holding the repository lock (default: lock_wait_s of the config, 300).",
        envvar="KB_LOCK_WAIT",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON.")]


def set_repo_option(repo: Path | None) -> None:
    _state["repo"] = repo


def set_lock_wait(wait: float | None) -> None:
    """How long a writer waits for the repository lock (None: the config's ``lock_wait_s``)."""
    _lock["wait"] = wait


def set_command_label(command: str) -> None:
    """How this command names itself, in the lock file, to another one waiting for it."""
    _lock["command"] = command[:200]


def _waiting(message: str) -> None:
    typer.echo(message, err=True)


def open_repo() -> Repo:
    """The repository named by ``--repo``/``KB_REPO``, or found from the working directory."""
    from kb.repo import open_repo as find

    repo = find(_state["repo"])
    wait = _lock["wait"]
    repo.lock_wait = float(wait) if wait is not None else None
    repo.command = str(_lock["command"] or "")
    repo.on_lock_wait = _waiting
    return repo


def echo(text: str) -> None:
    """Print ``text`` on stdout with any control character in it shown as an escape
    (``kb.controls.visible``): what commands print holds stored text (evidence, pages, sources),
    which must not drive the terminal."""
    typer.echo(visible(text))


def echo_styled(text: str) -> None:
    """Print ``text`` as it is: for a line with deliberate terminal styling whose stored parts the
    caller passed through ``kb.controls.visible`` itself."""
    typer.echo(text)


def print_json(data: Any, indent: int | None = 2) -> None:
    """``data`` as JSON, the exact stored values; the characters a terminal would obey are
    written as JSON escapes (``kb.controls.json_visible``)."""
    typer.echo(json_visible(json.dumps(data, ensure_ascii=False, sort_keys=True, indent=indent)))


def parse_cutoffs(text: str) -> list[int]:
    """``--k 5,10`` -> [5, 10]: positive, sorted, distinct."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"invalid --k {text!r}", hint="use a number or a comma-separated list, e.g. --k 10,100") from None
    if not values or values[0] < 1:
        raise UsageError(f"invalid --k {text!r}", hint="cut-offs are positive numbers")
    return values


def progress(stage: str, done: int, total: int, unit: str = "") -> None:
    """Progress of long work on stderr (kb.progress: in place on a terminal, plain lines in a log)."""
    report(stage, done, total, unit)
