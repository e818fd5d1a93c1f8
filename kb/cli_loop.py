"""CLI commands of the change loop: propose, review, merge, run (thin wrappers over pipeline/)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from kb.errors import EXIT_FINDINGS


def _echo(text: str) -> None:
    typer.echo(text)


def _open():  # noqa: ANN202
    from kb.cli import _open as open_repo

    return open_repo()


def _print_review(review, as_json: bool) -> None:  # noqa: ANN001
    if as_json:
        _echo(json.dumps(review.record.to_json(), indent=2, sort_keys=True, ensure_ascii=False))
        return
    _echo(f"{review.branch} @ {review.head[:10]}: {review.verdict} by {review.record.reviewer_model} ({review.record.reviewer_family})")
    _echo(f"  {review.summary}")
    for c in review.comments:
        ref = f"  [{c.evidence}]" if c.evidence else ""
        _echo(f"  {c.path}:{c.line}: {c.message}{ref}")


def register(app: typer.Typer) -> None:
    @app.command()
    def propose(
        evidence: Annotated[Optional[list[str]], typer.Option("--evidence", help="Evidence ids to propose from (repeatable).")] = None,
        since: Annotated[Optional[str], typer.Option(help="Evidence added after this commit.")] = None,
    ) -> None:
        """Write a change for new evidence on a work branch kb/<slug> (default: unprocessed evidence).

        Example: kb propose --evidence ev-5e807233ce749f70
        """
        from pipeline.propose import propose as run

        proposal = run(_open(), evidence or None, since)
        if proposal.head is None:
            _echo(f"nothing proposed: {'; '.join(proposal.notes)}")
            return
        _echo(f"branch {proposal.branch} @ {proposal.head[:10]} (base {proposal.base[:10]}) by {proposal.proposer.model}")
        _echo(f"  evidence: {', '.join(proposal.evidence_ids)}")
        _echo(f"  {proposal.claims} new claim(s), {proposal.closed} older claim(s) closed, {len(proposal.files)} file(s):")
        for path in proposal.files:
            _echo(f"    {path}")

    @app.command()
    def review(
        branch: Annotated[str, typer.Argument(help="Work branch, e.g. kb/20250618-alice-5e8072.")],
        as_json: Annotated[bool, typer.Option("--json", help="Print the review record as JSON.")] = False,
    ) -> None:
        """Run the gate and the Reviewer on the branch head; record the verdict as a git note.

        Exit 0 on approve, 1 on request_changes. Example: kb review kb/20250618-alice-5e8072
        """
        from pipeline.review import review_branch

        result = review_branch(_open(), branch)
        _print_review(result, as_json)
        if result.verdict != "approve":
            raise typer.Exit(EXIT_FINDINGS)

    @app.command()
    def merge(
        branch: Annotated[str, typer.Argument(help="Approved work branch.")],
        no_index: Annotated[bool, typer.Option("--no-index", help="Skip the incremental index build.")] = False,
    ) -> None:
        """Merge an approved branch (checks green, approval of the exact head by another family).

        Example: kb merge kb/20250618-alice-5e8072
        """
        from pipeline.merge import merge_branch

        result = merge_branch(_open(), branch, build_index=not no_index)
        _echo(f"merged {result.branch} as {result.commit[:10]}; review record {result.record_path}")
        if result.index is not None:
            _echo(f"index: {result.index.summary() if hasattr(result.index, 'summary') else result.index}")

    @app.command("run")
    def run_cmd(
        evidence: Annotated[Optional[list[str]], typer.Option("--evidence", help="Evidence ids (repeatable).")] = None,
        since: Annotated[Optional[str], typer.Option(help="Evidence added after this commit.")] = None,
        no_index: Annotated[bool, typer.Option("--no-index", help="Skip the index build after merging.")] = False,
    ) -> None:
        """Propose, check, review and revise until approved (then merge) or out of budget.

        A branch that does not converge is left unmerged and marked needs-human (exit 1).
        Example: kb run
        """
        from pipeline.loop import run_loop

        result = run_loop(_open(), evidence or None, since, build_index=not no_index)
        if result.proposal.head is None:
            _echo("nothing to do: no claims could be proposed from the new evidence")
            return
        _echo(f"proposed {result.proposal.branch}: {result.proposal.claims} claim(s), {result.proposal.closed} closed, {len(result.proposal.files)} file(s)")
        for review in result.reviews:
            _echo(f"round {review.record.round}: {review.verdict} by {review.record.reviewer_model} ({len(review.comments)} comment(s))")
            for c in review.comments[:10]:
                _echo(f"    {c.path}:{c.line}: {c.message}")
        if result.status == "merged" and result.merge is not None:
            _echo(f"merged as {result.merge.commit[:10]}; review record {result.merge.record_path}")
            if result.merge.index is not None:
                _echo(f"index: {result.merge.index.summary() if hasattr(result.merge.index, 'summary') else result.merge.index}")
        else:
            _echo(f"needs-human: {result.reason}; branch {result.proposal.branch} left unmerged")
            raise typer.Exit(EXIT_FINDINGS)
