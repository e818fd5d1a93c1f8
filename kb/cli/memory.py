"""``kb memory ingest|show|context``: per-user memory, sessions in, cited memory out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kb.cli.common import echo, open_repo, print_json, progress
from kb.errors import EXIT_FINDINGS

memory_app = typer.Typer(
    help="Per-user memory: sessions in, cited memory out.\n\nExample: kb memory ingest --user alice chats/*.json", no_args_is_help=True
)


@memory_app.command("ingest")
def ingest(
    sessions: Annotated[list[Path], typer.Argument(help="Session files: chat .json/.jsonl, LoCoMo .json, case .yaml.")],
    user: Annotated[str, typer.Option(help="The user whose memory this is (users/<id>/).")],
    sample: Annotated[str | None, typer.Option(help="LoCoMo: which conversation of the file (index or sample_id).")] = None,
    speaker: Annotated[
        str | None, typer.Option(help="Which speaker is the user (default: 'user', or the speaker named like --user).")
    ] = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Skip the index build after merging.")] = False,
    reprocess: Annotated[
        bool,
        typer.Option(
            "--reprocess",
            help="Derive memory again from sessions already stored (e.g. with a corrected --speaker): their claims are replaced.",
        ),
    ] = False,
) -> None:
    """Store sessions as dated evidence (in date order, skipping known ones), then run one
    reviewed proposal for users/<id>/.

    Example: kb memory ingest --user alice session-1.json session-2.json
    """
    from pipeline.memory import ingest as run

    repo = open_repo()
    result = run(repo, user, sessions, sample, speaker, build_index=False, reprocess=reprocess)
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    echo(f"{result.sessions} session(s): {len(result.added)} new, {len(result.skipped)} already ingested")
    if result.reprocessed:
        echo(f"{len(result.reprocessed)} stored session(s) reprocessed: the claims citing them are replaced by this proposal")
    elif result.skipped and not reprocess:
        echo("hint: to derive their memory again (say, with a corrected --speaker), add --reprocess")
    if result.resumed:
        echo(f"{len(result.resumed)} session(s) stored earlier but not yet in memory (an interrupted ingest): proposing them now")
    loop = result.run
    if loop is None:
        return
    if loop.proposal.head is None:
        echo("nothing to propose: no claims could be extracted from these sessions")
        return
    echo(f"proposal {loop.proposal.branch}: {loop.proposal.claims} claim(s), {loop.proposal.closed} closed")
    if loop.merge is not None:
        echo(f"merged as {loop.merge.commit[:10]} after {len(loop.reviews)} review round(s)")
        if not no_index:  # after the merge is reported: Ctrl-C during the build loses nothing said done
            from kb.retrieval.build import build_index

            echo(f"index: {build_index(repo, progress=progress).summary()}")
    else:
        echo(f"needs-human: {loop.reason}; branch {loop.proposal.branch} left unmerged")
        raise typer.Exit(EXIT_FINDINGS)


@memory_app.command("show")
def show(
    user: Annotated[str, typer.Option(help="The user.")],
    as_json: Annotated[bool, typer.Option("--json", help="Header fields and typed facts as JSON.")] = False,
) -> None:
    """Print a user's profile page (from HEAD).

    Example: kb memory show --user alice
    """
    from kb.memory_context import read_profile

    profile = read_profile(open_repo(), user)
    if as_json:
        print_json(profile.meta)
    else:
        echo(profile.text.rstrip("\n"))


@memory_app.command("context")
def context(
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

    result = build_context(open_repo(), user, question, budget, variant)
    if as_json:
        print_json(result.to_dict())
    else:
        echo(result.text())
