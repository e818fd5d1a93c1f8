"""``kb consolidate [status]``: the periodic whole-repository pass (docs/consolidation.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from kb.cli.common import JsonOpt, echo, open_repo, print_json

if TYPE_CHECKING:
    from pipeline.consolidate.status import RunReport

consolidate_app = typer.Typer(
    help="Re-verify, dedupe, retire and qualify the knowledge base as reviewed changes with a coverage record.\n\nExample: kb consolidate --plan",
    invoke_without_command=True,
)


@consolidate_app.callback()
def consolidate(
    ctx: typer.Context,
    scope: Annotated[str, typer.Option("--scope", help="all, knowledge, or users/<id>.")] = "all",
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", min=1, help="Pages per folder batch (default: consolidation.batch_pages).")
    ] = None,
    max_changes: Annotated[
        int | None, typer.Option("--max-changes", min=1, help="Branches proposed in this run (default: consolidation.max_changes).")
    ] = None,
    plan: Annotated[bool, typer.Option("--plan", help="Only print what the cycle would do; change nothing.")] = False,
    if_needed: Annotated[
        bool, typer.Option("--if-needed", help="Start a new cycle only when a consolidation.if_needed threshold is passed.")
    ] = False,
    no_index: Annotated[bool, typer.Option("--no-index", help="Do not rebuild the index after merging.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Start or resume the repository's consolidation cycle and run its batches up to the caps.

    Every change is proposed on a branch, checked, reviewed and merged like `kb run`'s; the
    coverage record under consolidation/ says what happened to every page and claim.
    Example: kb consolidate --scope users/alice --batch-size 20
    """
    if ctx.invoked_subcommand is not None:
        return
    from pipeline.consolidate.cycle import run_consolidation
    from pipeline.consolidate.status import RunStatus, needed

    repo = open_repo()
    if if_needed and not plan:
        reasons = needed(repo)
        if not reasons:
            if as_json:
                print_json({"status": "not-needed", "reasons": []})
            else:
                echo("no consolidation needed: no threshold of consolidation.if_needed is passed")
            return
        if not as_json:
            echo("consolidation needed: " + "; ".join(reasons))
    report = run_consolidation(repo, scope, batch_size, max_changes, plan_only=plan, build_index=not no_index)
    if as_json:
        print_json(report.to_dict())
        return
    if plan:
        _print_plan(report)
        return
    if report.status is RunStatus.NOTHING_TO_DO:
        echo(f"nothing new since cycle {report.cycle} (complete, coverage {report.percent:g}%): no new cycle started")
        return
    echo(f"cycle {report.cycle}: {report.status.value}, coverage {report.percent:g}% ({report.covered}/{report.total})")
    echo(f"{len(report.batches_done)} batch(es) done, {len(report.merged)} branch(es) merged, {len(report.needs_human)} left for a person")
    for branch in report.needs_human:
        echo(f"needs a person: {branch} (`kb review {branch}`, merge or delete it; then run kb consolidate again)")
    for line in report.skipped[:10]:
        echo(f"skipped: {line}")
    if len(report.skipped) > 10:
        echo(f"skipped: ... and {len(report.skipped) - 10} more (kb consolidate --json)")
    if report.stopped:
        echo(f"stopped: {report.stopped}; run kb consolidate again to continue")


def _print_plan(report: RunReport) -> None:
    echo(f"cycle {report.cycle}: coverage {report.covered}/{report.total}; batches still to do:")
    for batch in report.plan:
        fixes = [f for f in batch.found if f.fixed]
        echo(
            f"- {batch.batch}: {len(batch.would_change)} page(s) to change, {len(fixes)} fix(es), {len(batch.found) - len(fixes)} left for a person"
        )
        for found in batch.found:
            echo(f"    [{found.kind}] {found.path}: {found.detail}")
        for line in batch.skipped:
            echo(f"    skipped: {line}")


@consolidate_app.command("status")
def status(as_json: JsonOpt = False) -> None:
    """The current cycle's coverage: pages and claims by action, batches by state.

    Example: kb consolidate status --json
    """
    from pipeline.consolidate.status import cycle_status

    state = cycle_status(open_repo())
    if as_json:
        print_json(state)
        return
    if state["cycle"] is None:
        echo("no consolidation cycle yet; start one with `kb consolidate`")
        return
    cov = state["coverage"]
    echo(f"cycle {state['cycle']} ({state['scope']}): {state['status']}, coverage {cov['percent']:g}% ({cov['covered']}/{cov['total']})")
    echo("actions: " + ", ".join(f"{v} {k}" for k, v in state["actions"].items()))
    echo("batches: " + ", ".join(f"{v} {k}" for k, v in state["batches"].items()))
    for branch in state["waiting"]:
        echo(f"waiting for a person: {branch}")
    for path in state["disputed"]:
        echo(f"disputed, for a person to decide: {path}")
    if state["uncited"] is not None:
        from pipeline.consolidate.record import Uncited
        from pipeline.consolidate.uncited import summary

        found = Uncited.model_validate(state["uncited"])
        echo(f"uncited evidence: {summary(found)}")
        for item in found.listed[:5]:
            echo(f"  {item.evidence}: {item.lines} of {item.fact_lines} fact line(s) uncited: {'; '.join(item.examples)}")
