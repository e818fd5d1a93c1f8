"""``kb init`` and ``kb check``: creating a repository and validating it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kb.cli.common import echo, open_repo
from kb.errors import EXIT_FINDINGS, UsageError


def init(
    path: Annotated[Path, typer.Argument(help="Folder to create the repository in.")] = Path("."),
    name: Annotated[str | None, typer.Option(help="Repository name (default: folder name).")] = None,
) -> None:
    """Create a knowledge repository: config, evidence/, knowledge/index.md, users/, first commit.

    Example: kb init my-kb
    """
    from kb.scaffold import init_repository
    from kb.signing import SIGNERS_FILE, key_path

    repo = init_repository(path, name)
    echo(f"initialised kb repository in {repo.root}")
    echo(f"reviews are signed with {key_path()}; its public key is allowed in {SIGNERS_FILE}")


def check(
    paths: Annotated[list[Path] | None, typer.Argument(help="Only these pages or evidence files (default: the whole repository).")] = None,
    changed_only: Annotated[bool, typer.Option("--changed-only", help="Check only what changed since --base (default HEAD).")] = False,
    base: Annotated[str | None, typer.Option(help="Base commit: evidence must be append-only against it.")] = None,
    gate: Annotated[
        bool,
        typer.Option("--gate", help="Also run the gate on the change --base..HEAD: grounding of changed claims, conservation, replay."),
    ] = False,
    pull_request: Annotated[
        bool,
        typer.Option(
            "--pull-request",
            help="With --gate: the change is a pull request, so an edit of kb.config.yaml, reviewers/ or .github/ is refused.",
        ),
    ] = False,
    fmt: Annotated[str, typer.Option("--format", help="text | json | github")] = "text",
) -> None:
    """Validate pages, links, indexes, budgets, citations, evidence and secrets.

    Exit 0 when clean, 1 when there are errors. Example: kb check --changed-only --base main;
    in CI on a pull request: kb check --gate --pull-request --base "$BASE_SHA" --format github
    """
    from ci.findings import render_github, render_json, render_text
    from ci.run import CheckReport, run_checks

    renderers = {"text": render_text, "json": render_json, "github": render_github}
    if fmt not in renderers:
        raise UsageError(f"unknown format {fmt!r}", hint="use text, json or github")
    report: CheckReport
    if gate:
        from ci.gate import change_base, run_gate

        if not base:
            raise UsageError("--gate needs --base REV, the commit the change started from", hint="e.g. kb check --gate --base main")
        if paths:
            raise UsageError("--gate checks the whole change, not chosen paths", hint="drop the paths, or drop --gate")
        repo = open_repo()
        report = run_gate(repo, change_base(repo, base), full=not changed_only, pull_request=pull_request)
    else:
        if pull_request:
            raise UsageError("--pull-request goes with --gate", hint='e.g. kb check --gate --pull-request --base "$BASE_SHA"')
        report = run_checks(open_repo(), changed_only=changed_only, base=base, paths=[str(p) for p in paths] if paths else None)
    echo(renderers[fmt](report.findings, report.checked))
    if not report.ok:
        raise typer.Exit(EXIT_FINDINGS)
