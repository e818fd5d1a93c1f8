"""``kb evidence add|show|list``: the append-only evidence log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kb.cli.common import echo, open_repo, print_json

evidence_app = typer.Typer(help="The append-only evidence log.\n\nExample: kb evidence list", no_args_is_help=True)


@evidence_app.command("add")
def add(
    files: Annotated[
        list[Path], typer.Argument(help="Files or folders to add (JSON/JSONL chats, Markdown, text; PDF and HTML converted to text).")
    ],
    kind: Annotated[str, typer.Option(help="conversation | trajectory | document | tool-output")] = "document",
    user: Annotated[str | None, typer.Option(help="Scope the items to this user (user:<id>); default system.")] = None,
    source: Annotated[
        str | None,
        typer.Option(help="Where the material came from: one file's source, or a prefix of each name (folders, several files)."),
    ] = None,
    globs: Annotated[
        list[str] | None,
        typer.Option(
            "--glob",
            help="Files of a folder to add (repeatable; default: *.md *.markdown *.txt *.rst *.json *.jsonl *.html *.htm *.pdf).",
        ),
    ] = None,
) -> None:
    """Append files to the evidence log (atomic, deduplicated by content, committed). A folder
    is added recursively, each file named by its path relative to the folder.

    Example: kb evidence add docs/ --glob '*.md' --source project-docs
    """
    from functools import partial

    from agents.privacy_detector import detector_for
    from kb.evidence import add_items
    from kb.intake import DEFAULT_GLOBS, expand_inputs, prepare, prepare_all, read_input
    from kb.scopes import user_scope

    repo = open_repo()
    scope = user_scope(user)
    allow, privacy = repo.config.secrets.allow, repo.config.privacy
    detector = detector_for(privacy)
    preparations = []
    for file, name in expand_inputs(files, tuple(globs) if globs else DEFAULT_GLOBS, source):
        preparations.append(
            partial(prepare, read_input(file), str(file), kind, scope, name, allow=allow, privacy=privacy, detector=detector)
        )
    items = prepare_all(preparations)
    result = add_items(repo, items)
    if result.recovered:
        typer.echo(f"note: cleaned up after an interrupted add: {', '.join(result.recovered)}", err=True)
    for entry in result.added:
        masked = entry.meta.get("masked") or {}
        note = f"  masked: {', '.join(f'{n} {kind}' for kind, n in masked.items())}" if masked else ""
        echo(f"added {entry.id}  {entry.kind}  {entry.scope}  {entry.lines} lines  {entry.path}{note}")
    for dup in result.duplicates:
        echo(f"skipped {dup}  (already in the log)")


@evidence_app.command("show")
def show(
    evidence_id: Annotated[str, typer.Argument(metavar="ID", help="Evidence id (ev-...), optionally with #L3-L5.")],
    lines: Annotated[str | None, typer.Option(help="Line range A-B.")] = None,
) -> None:
    """Print an evidence item with line numbers.

    Example: kb evidence show ev-9f2c4e1ab07d3c55 --lines 3-5
    """
    from kb.evidence import show_item

    view = show_item(open_repo(), evidence_id, lines)
    entry = view.entry
    echo(f"# {entry.id}  {entry.kind}  {entry.scope}  added {entry.added_at}  source {entry.source}")
    for number, text in view.lines:
        echo(f"{number:>5}  {text}")


@evidence_app.command("list")
def list_items(
    user: Annotated[str | None, typer.Option(help="Only this user's items.")] = None,
    kind: Annotated[str | None, typer.Option(help="Only this kind.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines.")] = False,
) -> None:
    """List evidence items in ledger order.

    Example: kb evidence list --user alice
    """
    from kb.evidence import list_entries

    for entry in list_entries(open_repo(), user, kind):
        if as_json:
            print_json(entry.payload() | {"hash": entry.hash}, indent=None)
        else:
            echo(f"{entry.id}  {entry.kind:<12} {entry.scope:<16} {entry.lines:>5} lines  {entry.added_at}  {entry.source}")
