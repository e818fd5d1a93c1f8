"""``kb propose|review|merge|run|keygen``: the change loop (thin wrappers over ``pipeline``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from kb.cli.common import echo, open_repo, progress
from kb.errors import EXIT_FINDINGS

if TYPE_CHECKING:
    from pipeline.review import ReviewResult

EvidenceOpt = Annotated[list[str] | None, typer.Option("--evidence", help="Evidence ids (repeatable).")]
SinceOpt = Annotated[str | None, typer.Option(help="Evidence added after this commit.")]
NoIndexOpt = Annotated[bool, typer.Option("--no-index", help="Skip the incremental index build after merging.")]
ForgeOpt = Annotated[
    str | None, typer.Option("--forge", help="local | github: where changes are reviewed and merged (default: forge.kind).")
]


def _print_review(review: ReviewResult, as_json: bool) -> None:
    if as_json:
        echo(json.dumps(review.record.to_json(), indent=2, sort_keys=True, ensure_ascii=False))
        return
    echo(f"{review.branch} @ {review.head[:10]}: {review.verdict} by {review.record.reviewer_model} ({review.record.reviewer_family})")
    echo(f"  {review.summary}")
    for c in review.comments:
        ref = f"  [{c.evidence}]" if c.evidence else ""
        echo(f"  {c.path}:{c.line}: {c.message}{ref}")


def propose(evidence: EvidenceOpt = None, since: SinceOpt = None) -> None:
    """Write a change for new evidence on a work branch kb/<slug> (default: unprocessed evidence).

    Example: kb propose --evidence ev-5e807233ce749f70
    """
    from pipeline.propose import propose as run

    proposal = run(open_repo(), evidence or None, since)
    if proposal.head is None:
        echo(f"nothing proposed: {'; '.join(proposal.notes)}")
        return
    echo(f"branch {proposal.branch} @ {proposal.head[:10]} (base {proposal.base[:10]}) by {proposal.proposer.model}")
    echo(f"  evidence: {', '.join(proposal.evidence_ids)}")
    echo(f"  {proposal.claims} new claim(s), {proposal.closed} older claim(s) closed, {len(proposal.files)} file(s):")
    for path in proposal.files:
        echo(f"    {path}")
    for note in proposal.notes:
        echo(f"  note: {note}")


def review(
    branch: Annotated[str, typer.Argument(help="Work branch, e.g. kb/20250618-alice-5e8072.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the review record as JSON.")] = False,
) -> None:
    """Run the gate and the Reviewer on the branch head; record the verdict as a git note.

    Exit 0 on approve, 1 on request_changes. Example: kb review kb/20250618-alice-5e8072
    """
    from pipeline.review import review_branch

    result = review_branch(open_repo(), branch)
    _print_review(result, as_json)
    if result.verdict != "approve":
        raise typer.Exit(EXIT_FINDINGS)


def merge(
    branch: Annotated[str, typer.Argument(help="Approved work branch.")],
    no_index: NoIndexOpt = False,
) -> None:
    """Merge an approved branch (checks green, approval of the exact head by another family).

    Example: kb merge kb/20250618-alice-5e8072
    """
    from pipeline.merge import merge_branch

    repo = open_repo()
    result = merge_branch(repo, branch, build_index=False)
    if result.already:
        echo(f"{result.branch} is already merged as {result.commit[:10]}; nothing to do")
    else:
        echo(f"merged {result.branch} as {result.commit[:10]}; review record {result.record_path}")
    if not no_index:  # after the merge is reported: Ctrl-C during the build loses nothing said done
        from kb.retrieval.build import build_index

        echo(f"index: {build_index(repo, progress=progress).summary()}")


def run(evidence: EvidenceOpt = None, since: SinceOpt = None, no_index: NoIndexOpt = False, forge: ForgeOpt = None) -> None:
    """Propose, check, review and revise until approved (then merge) or out of budget.

    A branch that does not converge is left unmerged and marked needs-human (exit 1). With
    --forge github the loop runs through a pull request (docs/github.md): revisions are pushed
    to it, the Reviewer posts PR reviews, the merge goes through the API, and a change that does
    not converge leaves the pull request open, labelled needs-human.
    Example: kb run --forge github
    """
    from pipeline.forge.changes import make_forge
    from pipeline.loop import run_loop

    repo = open_repo()
    result = run_loop(repo, evidence or None, since, build_index=False, forge=make_forge(repo, forge))
    if result.proposal.head is None:
        echo(f"nothing to do: {'; '.join(result.proposal.notes) or 'no claims could be proposed from the new evidence'}")
        return
    echo(
        f"proposed {result.proposal.branch}: {result.proposal.claims} claim(s), {result.proposal.closed} closed, {len(result.proposal.files)} file(s)"
    )
    for note in result.proposal.notes:
        echo(f"note: {note}")
    change = result.change
    if change is not None:
        echo(f"pull request {change.ref} {change.url}".rstrip())
    for n, r in enumerate(result.reviews):
        echo(f"round {r.record.round}: {r.verdict} by {r.record.reviewer_model} ({len(r.comments)} comment(s))")
        for c in r.comments[:10]:
            echo(f"    {c.path}:{c.line}: {c.message}")
        withdrawal = result.revisions[n] if n < len(result.revisions) else None
        if withdrawal is not None:  # no silent loss: what the revision took out, per rule, and why
            counts = ", ".join(f"{rule} {k}" for rule, k in sorted(withdrawal.withdrawn.items()))
            echo(f"revision {n + 1}: withdrew {withdrawal.total} claim(s){': ' + counts if counts else ''}")
            for note in withdrawal.notes:
                echo(f"    {note}")
    for event in result.events:
        echo(event)
    if result.merge is not None:
        merged = f"merged {change.ref} " if change is not None else "merged "
        echo(f"{merged}as {result.merge.commit[:10]}; review record {result.merge.record_path}")
        if not no_index:  # after the merge is reported: Ctrl-C during the build loses nothing said done
            from kb.retrieval.build import build_index

            echo(f"index: {build_index(repo, progress=progress).summary()}")
    elif change is not None:
        echo(f"needs-human: {result.reason}; pull request {change.ref} ({change.branch}) left open, labelled needs-human")
        raise typer.Exit(EXIT_FINDINGS)
    else:
        echo(f"needs-human: {result.reason}; branch {result.proposal.branch} left unmerged")
        raise typer.Exit(EXIT_FINDINGS)


def keygen(
    principal: Annotated[str | None, typer.Option(help="Name the key signs reviews as (default: your git email).")] = None,
) -> None:
    """Create this machine's review signing key if absent and allow it in reviewers/allowed_signers (a commit on main).

    The key lives outside the repository ($KB_SIGNING_KEY, else ~/.config/kb/review_ed25519).
    Example: kb keygen --principal reviewer@ci.example
    """
    from kb.signing import SIGNERS_FILE, allow_local_key

    result = allow_local_key(open_repo(), principal)
    echo(f"{'created' if result.created else 'using'} review signing key {result.key.path}")
    echo(f"  {result.key.public}")
    if result.added:
        echo(f"allowed {result.principal} to sign reviews in {SIGNERS_FILE} (committed on main)")
    else:
        echo(f"{result.principal} is already allowed in {SIGNERS_FILE}")
