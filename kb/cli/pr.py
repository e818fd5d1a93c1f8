"""``kb pr open|review|merge|list|status``, ``kb sync`` and ``kb github init``: the change loop on
the configured forge (``forge:`` in kb.config.yaml; docs/github.md). Thin wrappers over
``pipeline.forge``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kb.cli.common import echo, open_repo
from kb.errors import EXIT_FINDINGS

if TYPE_CHECKING:
    from pipeline.forge.changes import ChangeStatus

pr_app = typer.Typer(help="Pull requests on the configured forge: open, review, merge, list, status.", no_args_is_help=True)
github_app = typer.Typer(help="Set a knowledge repository up on GitHub.", no_args_is_help=True)

ChangeArg = Annotated[str, typer.Argument(metavar="N", help="Pull request number (or, on the local forge, the work branch).")]
NoIndexOpt = Annotated[bool, typer.Option("--no-index", help="Skip the incremental index build.")]


def _status_line(status: ChangeStatus) -> str:
    change = status.change
    failing = status.checks.missing_or_failing(status.required)
    checks = "green" if not failing else ", ".join(failing)
    return f"{change.ref} {change.branch} @ {change.head[:10]} -> {change.base_branch} [{change.state}] checks: {checks}; review: {status.review}"


@pr_app.command("open")
def pr_open(branch: Annotated[str, typer.Argument(help="Work branch, e.g. kb/20250618-alice-5e8072.")]) -> None:
    """Push a work branch and open its pull request (or update the open one).

    The body lists the evidence, each changed page with its summary, the claims added, changed
    and removed with their citations, the proposer and the gate's result.
    Example: kb pr open kb/20250618-alice-5e8072
    """
    from pipeline.forge.changes import open_change

    result = open_change(open_repo(), branch)
    change = result.change
    echo(f"{result.action} {change.ref} for {change.branch} @ {change.head[:10]} {change.url}".rstrip())
    echo(f"  labels: {', '.join(change.labels) or '-'}; gate: {'passed' if result.gate_ok else f'{result.gate_errors} error(s)'}")


@pr_app.command("review")
def pr_review(number: ChangeArg) -> None:
    """Run the gate and the Reviewer on the pull request's exact head and post one review.

    Line comments are anchored on the page lines they concern; the rest go into the body.
    Exit 0 on approve, 1 on request changes. Example: kb pr review 12
    """
    from pipeline.forge.changes import review_change

    outcome = review_change(open_repo(), number)
    review = outcome.review
    echo(f"{outcome.change.ref} @ {review.head[:10]}: {review.verdict} by {review.record.reviewer_model} ({review.record.reviewer_family})")
    echo(f"  {outcome.anchored} line comment(s), {outcome.in_body} comment(s) in the body")
    if outcome.replied or outcome.resolved:
        echo(f"  earlier threads: {outcome.replied} replies, {outcome.resolved} thread(s) resolved")
    if review.verdict != "approve":
        raise typer.Exit(EXIT_FINDINGS)


@pr_app.command("gate")
def pr_gate(
    number: ChangeArg,
    approve: Annotated[
        bool, typer.Option("--approve/--no-approve", help="Approve an evidence-only pull request that passes (off for forks).")
    ] = True,
) -> None:
    """Set the kb/gate status of any pull request (a person's too): the gate on its exact head,
    judged by the default branch's config and rules; an edit of the config, signers or workflows
    is refused. A pull request that only adds evidence and passes is approved by the reviewer.

    Exit 0 when the gate passed, 1 when not. Example: kb pr gate 12
    """
    from pipeline.forge.pulls import gate_pull

    outcome = gate_pull(open_repo(), number, approve=approve)
    change = outcome.change
    verdict = "passed" if outcome.ok else f"{outcome.errors} error(s)"
    echo(f"{change.ref} {change.branch} @ {change.head[:10]}: kb/gate {verdict}")
    if outcome.evidence:
        echo(f"  evidence only: {', '.join(outcome.evidence)}" + ("; approved by the reviewer" if outcome.approved else ""))
    if not outcome.ok:
        raise typer.Exit(EXIT_FINDINGS)


@pr_app.command("merge")
def pr_merge(number: ChangeArg, no_index: NoIndexOpt = False) -> None:
    """Merge a pull request whose head is green and approved by the Reviewer of another family.

    A person's pull request is merged only when it just adds evidence that the gate passed and
    the reviewer approved (`kb pr gate N`); any other is a person's to merge.
    Example: kb pr merge 12
    """
    from pipeline.forge.pulls import merge_pull

    outcome = merge_pull(open_repo(), number, build_index=not no_index)
    echo(f"merged {outcome.change.ref} ({outcome.change.branch}) as {outcome.commit[:10]}")
    if outcome.index is not None:
        echo(f"index: {outcome.index.summary()}")


@pr_app.command("list")
def pr_list() -> None:
    """List the open kb pull requests with their checks and review state.

    Example: kb pr list
    """
    from pipeline.forge.changes import list_changes

    statuses = list_changes(open_repo())
    if not statuses:
        echo("no open kb pull requests")
    for status in statuses:
        echo(_status_line(status))


@pr_app.command("status")
def pr_status(number: ChangeArg) -> None:
    """Show one pull request: its head, state, checks and the Reviewer's latest verdict.

    Example: kb pr status 12
    """
    from pipeline.forge.changes import status_of_change

    status = status_of_change(open_repo(), number)
    echo(_status_line(status))
    for context, state in sorted(status.checks.states.items()):
        echo(f"  {context}: {state}")


def sync(no_index: NoIndexOpt = False) -> None:
    """Fetch the default branch, move main to it (fast-forward only) and rebuild the index.

    Example: kb sync
    """
    from pipeline.forge.changes import sync as run

    result = run(open_repo(), build=not no_index)
    repo = open_repo()
    head = repo.head()
    echo(f"main at {str(head.id)[:10] if head is not None else '(empty)'}")
    if result is not None:
        echo(f"index: {result.summary()}")


@github_app.command("init")
def github_init(
    force: Annotated[bool, typer.Option("--force", help="Overwrite workflow files that differ.")] = False,
    kb_source: Annotated[
        str | None, typer.Option("--kb-source", help="https URL of kb's git repository (default: where this kb came from).")
    ] = None,
    kb_commit: Annotated[
        str | None, typer.Option("--kb-commit", help="Full commit SHA of kb the workflows install (default: this kb's).")
    ] = None,
) -> None:
    """Write the GitHub Actions workflows (check, review, propose, index, consolidate) into .github/workflows/.

    Every workflow installs kb built from its git repository at one commit (never a name from an
    index): the commit this kb was installed from, or --kb-source and --kb-commit.
    Example: kb github init --kb-source https://github.com/acme/kb --kb-commit 0123456789abcdef0123456789abcdef01234567
    """
    from pipeline.forge.workflows import choose_source, write_workflows

    repo = open_repo()
    source = choose_source(kb_source, kb_commit)
    for path, action in write_workflows(repo.root, source, force=force):
        echo(f"{action} {Path(path).relative_to(repo.root)}")
    echo(f"kb installed from {source.url} at {source.commit}")
