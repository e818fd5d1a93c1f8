"""``kb forget``: remove a user, an evidence item or a text from evidence, pages, history and
indexes, and verify that no copy remains (pipeline/forget/; docs/privacy.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from kb.cli.common import echo, open_repo, print_json
from kb.errors import EXIT_FINDINGS, UsageError


def forget(
    evidence: Annotated[str | None, typer.Argument(help="An evidence id (or unique prefix) to forget.")] = None,
    user: Annotated[str | None, typer.Option(help="Forget this user: all their evidence and pages.")] = None,
    match: Annotated[str | None, typer.Option(help="Forget this text wherever it appears.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would change; change nothing.")] = False,
    verify: Annotated[bool, typer.Option("--verify", help="Scan every git object and .kb/ for the recorded forgettings.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> int:
    """Forget a user, an evidence item or a text everywhere (history rewritten; force-push remotes).

    Example: kb forget --user alice --dry-run
    """
    from pipeline.forget import Target, verify_all
    from pipeline.forget import forget as run_forget

    repo = open_repo()
    if verify:
        if evidence or user or match:
            raise UsageError("--verify takes no target", hint="run `kb forget --verify` alone")
        results = verify_all(repo)
        if as_json:
            print_json(results)
        for r in results:
            echo(f"{r['id']}: {r['result']} ({r['git_objects']} git objects, {r['state_files']} files under .kb/)")
            for copy in r["copies"]:
                echo(f"  copy: {copy}")
        return 0 if all(r["result"] == "clean" for r in results) else EXIT_FINDINGS
    result = run_forget(repo, Target(user, evidence, match), dry_run)
    if as_json:
        print_json({"plan": result.plan, "dry_run": result.dry_run, "record": result.record, "commit": result.commit})
        return 0 if result.dry_run or (result.record or {}).get("result") == "clean" else EXIT_FINDINGS
    plan = result.plan
    prefix = "would forget" if result.dry_run else "forgot"
    echo(f"{prefix} ({plan['kind']}): {len(plan['evidence'])} evidence item(s), {len(plan['redacted'])} redacted")
    for path in plan["deleted_pages"]:
        echo(f"  delete page {path}")
    for path in plan["edited_pages"]:
        echo(f"  remove claims from {path}")
    if result.dry_run:
        echo("  rewrite every commit, note and ref holding it; purge indexes, run logs and caches")
        return 0
    record = result.record or {}
    echo(f"commit {result.commit}; {result.rewritten} commit(s) rewritten; {len(result.purged)} file(s) purged under .kb/")
    echo(f"verification: {record.get('result')} ({record['scanned']['git_objects']} git objects, {record['scanned']['state_files']} files)")
    for copy in record.get("copies", []):
        echo(f"  copy: {copy}")
    echo("a remote still has the old history: push every branch with --force-with-lease (docs/privacy.md)")
    return 0 if record.get("result") == "clean" else EXIT_FINDINGS


retention_app = typer.Typer(
    help="Expire evidence and memory pages by age (the `retention:` section of kb.config.yaml).", no_args_is_help=True
)


@retention_app.command("apply")
def retention_apply(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the expired items and pages; change nothing.")] = False,
) -> int:
    """Forget every evidence item and memory page older than its retention age, in one forgetting.

    Example: kb retention apply --dry-run
    """
    from pipeline.retention import Expired, apply_retention

    expired, result = apply_retention(open_repo(), dry_run)
    verb = "would expire" if dry_run else "expired"
    for e in expired:
        if isinstance(e, Expired):
            echo(f"{verb} {e.entry.id} ({e.entry.kind}, {e.age_days} days old; {e.rule}: {e.limit_days}d)")
        else:
            echo(f"{verb} page {e.path} (last changed {e.age_days} days ago; {e.rule}: {e.limit_days}d)")
    if result is None:
        echo("nothing has expired")
        return 0
    if dry_run:
        return 0
    record = result.record or {}
    echo(f"forgot {len(expired)} item(s) and page(s) as {result.plan['id']}; verification: {record.get('result')}")
    return 0 if record.get("result") == "clean" else EXIT_FINDINGS
