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


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
