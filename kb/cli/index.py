"""``kb index build|status``: the serving indexes under ``.kb/index``."""

from __future__ import annotations

from typing import Annotated

import typer

from kb.cli.common import JsonOpt, echo, open_repo, print_json, progress

index_app = typer.Typer(help="The serving indexes (BM25 + dense) under .kb/index.\n\nExample: kb index build", no_args_is_help=True)


@index_app.command("build")
def build(
    commit: Annotated[str | None, typer.Option("--commit", help="Build from this commit or branch (default HEAD).")] = None,
    full: Annotated[
        bool,
        typer.Option("--full", help="Rebuild every chunk instead of reusing unchanged ones (vectors still come from the embedding cache)."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build or update the indexes from a commit (git objects only, never the working tree).

    Only chunks whose content changed are embedded again; the new version replaces the
    served one atomically. Example: kb index build --commit main
    """
    from kb.retrieval.build import build_index

    result = build_index(open_repo(), commit=commit, full=full, progress=progress)
    if as_json:
        print_json(result.to_dict())
        return
    echo(result.summary())
    for path, reason in result.skipped:
        echo(f"skipped {path}: {reason}")


@index_app.command("status")
def status(as_json: JsonOpt = False) -> None:
    """Which commit the index serves and how far it is behind HEAD.

    Example: kb index status
    """
    from kb.retrieval.build import index_status

    state = index_status(open_repo())
    if as_json:
        print_json(state.to_dict())
        return
    if state.served_commit is None:
        echo(f"no usable index: {state.problem}; run `kb index build`")
        return
    behind = "unknown" if state.behind is None else f"{state.behind} commit(s) behind HEAD"
    if state.ahead:
        behind += f", {state.ahead} commit(s) not on HEAD"
    counts = ", ".join(f"{v} {k}" for k, v in sorted(state.counts.items()))
    echo(f"serving {state.served_commit[:12]} ({state.version}), built {state.built_at}; {behind}")
    echo(f"{counts}; embedder {state.embedder}")
    if state.dense_pending:
        total = state.counts.get("chunks", 0)
        how = f"a build is embedding them ({state.building})" if state.building else "run `kb index build` to embed the rest"
        meanwhile = (
            f": {state.dense_interim} of them are found by the previous version's vectors, the rest by BM25 alone until then"
            if state.dense_interim
            else " are searched by BM25 alone until then"
        )
        echo(
            f"embedding {state.served_commit[:12]}: {total - state.dense_pending}/{total} chunks embedded; "
            f"the other {state.dense_pending}{meanwhile}; {how}"
        )
    if state.point_in_time:
        echo(f"point-in-time indexes (kb search --commit): {', '.join(c[:12] for c in state.point_in_time)}")
    if not state.config_matches:
        echo("retrieval settings changed since this build: run `kb index build` to apply them")
