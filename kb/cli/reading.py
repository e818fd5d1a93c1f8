"""``kb search``, ``kb read`` and ``kb grep``: finding and reading pages, scoped to a principal."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kb.cli.common import AsOpt, CommitOpt, JsonOpt, echo, echo_styled, open_repo, print_json, progress
from kb.controls import visible

if TYPE_CHECKING:
    from kb.repo import Repo
    from kb.retrieval.search import Hit


def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    principal: AsOpt = "system",
    k: Annotated[int, typer.Option("--k", help="Number of pages (and of evidence hits).")] = 10,
    at: Annotated[str | None, typer.Option("--at", help="Only pages valid on this date (YYYY-MM-DD).")] = None,
    mode: Annotated[str, typer.Option("--mode", help="hybrid | bm25 | dense")] = "hybrid",
    include_evidence: Annotated[bool, typer.Option("--include-evidence", help="Also search raw evidence.")] = False,
    include_deprecated: Annotated[bool, typer.Option("--include-deprecated", help="Include deprecated pages.")] = False,
    commit: Annotated[
        str | None,
        typer.Option(
            "--commit", help="Search the repository as it was at this commit or branch (a point-in-time index is built on first use)."
        ),
    ] = None,
    top: Annotated[str | None, typer.Option("--top", hidden=True, help="Not an option: the number of hits is --k.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Search the served index: pages with section, lines and L0 (hybrid BM25 + dense).

    With --commit, search as of that commit: the served index if it serves that commit, else a
    point-in-time index under .kb/index/at/ built on first use from the served one plus the
    chunks that differ (the served index is not changed).

    Example: kb search "travel preferences" --as user:alice --k 5
    """
    from kb.errors import UsageError
    from kb.retrieval.search import make_query, open_searcher

    if top is not None:
        raise UsageError("kb search has no --top option", hint=f"the number of hits is --k, e.g. --k {top if top.isdigit() else 10}")
    q = make_query(query, principal, k, at, mode, include_evidence, include_deprecated)
    repo = open_repo()
    searcher = open_searcher(repo, commit, progress)
    if commit is None:
        _say_if_behind(repo, searcher.manifest.source_commit)
    hits = searcher.search(q)
    if searcher.dense_pending and mode != "bm25" and not as_json:
        typer.echo(
            f"note: {searcher.dense_pending} chunks have no vector yet (a build is embedding them, or the next `kb index build` will): "
            "they are found by BM25 alone; `kb index status` shows the progress",
            err=True,
        )
    if as_json:
        print_json(
            {
                "query": q.text,
                "principal": principal,
                "mode": mode,
                "commit": searcher.manifest.source_commit,
                "dense_pending": searcher.dense_pending,
                "hits": [_hit_json(repo, h, q.text, principal, searcher.manifest.source_commit) for h in hits],
            }
        )
        return
    _print_hits(hits, q.text)


def _hit_json(repo: Repo, hit: Hit, query: str, principal: str, commit: str) -> dict[str, Any]:
    """A hit for ``--json``: ``text`` is the reader's text (no footnote references, no
    structure-only lines), ``answer`` its sentence that matches the query best, and ``citations``
    the footnotes it referred to with their definitions (the cited evidence span and quote)."""
    from kb.errors import KbError
    from kb.retrieval.reading import footnote_definitions
    from kb.retrieval.snippet import passage, reader_text

    reader = reader_text(hit.text)
    definitions: dict[str, str] = {}
    if reader.citations and hit.kind == "page":
        try:
            definitions = footnote_definitions(repo, hit.id, principal, commit or None)
        except KbError:
            definitions = {}
    return hit.to_dict() | {
        "text": reader.text,
        "answer": passage(hit.text, query).answer,
        "citations": [{"label": label, "source": definitions.get(label, "")} for label in reader.citations],
    }


def _say_if_behind(repo: Repo, served: str) -> None:
    """One line on stderr when the served index is not built from HEAD."""
    head = repo.head()
    if head is None or str(head.id) == served:
        return
    try:
        ahead, behind = repo.git.ahead_behind(head.id, served)
    except (KeyError, ValueError):
        ahead, behind = 0, 0
    lag = f"{ahead} commit(s) behind HEAD" if ahead and not behind else "not built from HEAD"
    typer.echo(f"note: the index serves {served[:10]}, {lag}; run `kb index build` to search the newest pages", err=True)


def _print_hits(hits: list[Hit], query: str) -> None:
    """Each hit: where (page, section path, lines), the passage that matched with the query's
    terms in bold on a terminal, then the page's L0. The stored parts are made visible
    (``kb.controls.visible``) before the styling goes in."""
    from kb.retrieval.snippet import passage

    if not hits:
        echo("no results")
    tty = sys.stdout.isatty()
    bold, dim, plain = ("\033[1m", "\033[2m", "\033[0m") if tty else ("", "", "")
    for n, hit in enumerate(hits, 1):
        ranks = ", ".join(f"{name} #{rank}" for name, rank in sorted(hit.ranks.items()))
        section = " › ".join(hit.headings[1:] if hit.kind == "page" else hit.headings) or hit.anchor
        where = visible(f"{hit.id} › {section}" if section else hit.id)
        echo_styled(f"{n:>2}. [{hit.kind}] {bold}{where}{plain}  L{hit.line_start}-{hit.line_end}  score {hit.score:.4f} ({ranks})")
        shown = passage(visible(hit.text), query)  # the reader's text, the answering sentence first
        text = shown.highlighted(bold, plain) if tty else shown.text
        echo_styled("    " + text.replace("\n", "\n    "))
        if shown.citations:
            echo_styled(f"    {dim}cites {', '.join(f'[^{label}]' for label in shown.citations)}{plain}")
        if hit.kind == "page" and hit.summary:
            echo_styled(f"    {dim}{visible(hit.title)}: {visible(hit.summary)}{plain}")


def read(
    page: Annotated[str, typer.Argument(help="Page id or path, e.g. knowledge/acme or users/alice/travel.md.")],
    level: Annotated[str, typer.Option("--level", help="L0 (summary + outline) | L1 (+ overview) | L2 (whole page).")] = "L0",
    section: Annotated[str | None, typer.Option("--section", help="Read this section (anchor) instead of a level.")] = None,
    cursor: Annotated[str | None, typer.Option("--cursor", help="Continue where the previous read stopped.")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Bound on the text returned.")] = 1000,
    principal: AsOpt = "system",
    commit: CommitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Read a page progressively: L0 with an outline of sections (anchors, token sizes), then
    L1/L2 or one section, in bounded pieces with a cursor.

    Example: kb read knowledge/acme --section finances
    """
    from kb.retrieval.reading import read_page, read_section

    repo = open_repo()
    if section is not None:
        view = read_section(repo, page, section, principal, commit, cursor, max_tokens)
    else:
        view = read_page(repo, page, principal, commit, level, cursor, max_tokens)
    if as_json:
        print_json(view.to_dict())
        return
    validity = f"  valid {view.valid_from or '...'} to {view.valid_to or '...'}" if view.valid_from or view.valid_to else ""
    echo(f"{view.title}  ({view.id}, {view.type}, {view.status}, {view.scope}{validity}, {view.tokens} tokens)")
    echo(f"L0: {view.summary}")
    if view.level in ("L0", "L1"):
        echo("outline:")
        for entry in view.outline:
            echo(f"  {'  ' * (entry.level - 1)}{entry.title}  #{entry.anchor}  L{entry.line}-{entry.end_line}  {entry.tokens} tokens")
    if view.text:
        label = f"#{view.anchor}" if view.anchor else view.level
        echo(f"--- {label} L{view.line_start}-{view.line_end}")
        echo(view.text)
    if view.next_cursor:
        echo(f"--- more: --cursor {view.next_cursor}")


def grep(
    pattern: Annotated[str, typer.Argument(help="Text to find (literal unless --regex).")],
    page: Annotated[str | None, typer.Option("--page", help="Only this page.")] = None,
    regex: Annotated[bool, typer.Option("--regex", help="PATTERN is a Python regular expression.")] = False,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="Case-insensitive.")] = False,
    principal: AsOpt = "system",
    commit: CommitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Find lines in pages: each hit with page, section anchor and line.

    Example: kb grep "window seat" --as user:alice
    """
    from kb.retrieval.reading import grep as find_lines

    result = find_lines(open_repo(), pattern, principal, commit, page, regex, ignore_case)
    if as_json:
        print_json(result.to_dict())
        return
    if result.unsearched_users:
        typer.echo(
            f"note: the pages of {result.unsearched_users} user(s) under users/ were not searched as {principal}: "
            "pass --as user:ID to search one user's pages too",
            err=True,
        )
    if not result.hits:
        echo("no matches")
    for hit in result.hits:
        where = f"#{hit.anchor}" if hit.anchor else ""
        echo(f"{hit.path}:{hit.line}  {hit.page}{where}  {hit.text.strip()}")
    if result.truncated:
        echo(f"(stopped after {len(result.hits)} matches; narrow the pattern or use --page)")
