"""Replay: typical questions kept in the repository must stay answerable.

``consolidation/replay.yaml`` lists questions, each with the principal who asks it and what must
be found: a page (``page``: its id; a deprecated page counts through its ``superseded_by``) and/or
a key fact (``fact``: text that must appear in a current page the principal may read). A change
after which an entry that was found at its base is no longer found is refused (``replay.lost``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from ci.findings import Finding
from ci.rules.conservation import pages_at
from ci.snapshot import Snapshot, normalise_quote
from kb.errors import KbError
from kb.page import Page, page_id_for_path
from kb.repo import Repo
from kb.scopes import can_read, parse_principal
from kb.yamltext import YamlProblem, load_yaml

REPLAY_FILE = "consolidation/replay.yaml"


@dataclass(frozen=True)
class ReplayCase:
    question: str
    principal: str
    page: str = ""
    fact: str = ""


def parse_replay(text: str) -> list[ReplayCase]:
    """The cases of a replay file; malformed entries are skipped (``kb consolidate`` reports them)."""
    try:
        data = load_yaml(text, 1024 * 1024)
    except YamlProblem:
        return []
    out = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and item.get("question") and (item.get("page") or item.get("fact")):
            out.append(
                ReplayCase(
                    str(item["question"]), str(item.get("principal") or "system"), str(item.get("page") or ""), str(item.get("fact") or "")
                )
            )
    return out


def found(case: ReplayCase, pages: dict[str, Page]) -> bool:
    """Whether ``case``'s page or fact is found among ``pages`` (by path) by its principal."""
    try:
        scopes = parse_principal(case.principal)
    except KbError:
        return False
    by_id = {page_id_for_path(p): page for p, page in pages.items() if can_read(scopes, page.scope)}
    current = {i: p for i, p in by_id.items() if p.status != "deprecated"}
    candidates = list(current.values())
    if case.page:
        target = by_id.get(case.page)
        for _ in range(5):  # a deprecated page answers through its successor
            if target is None or target.status != "deprecated":
                break
            nxt = [s for s in target.meta.get("superseded_by") or [] if s in by_id]
            target = by_id[nxt[0]] if nxt else None
        if target is None or target.status == "deprecated":
            return False
        candidates = [target]
    if not case.fact:
        return True
    needle = normalise_quote(case.fact).lower()
    return any(needle in normalise_quote(p.title + "\n" + p.summary + "\n" + p.body).lower() for p in candidates)


def check_change(view: Repo, snapshot: Snapshot, base: pygit2.Commit) -> list[Finding]:
    data = view.read_at(base, REPLAY_FILE)  # the base's cases: a change cannot drop its own
    if data is None:
        return []
    cases = parse_replay(data.decode("utf-8", errors="replace"))
    if not cases:
        return []
    before = pages_at(view, base)
    now = {p: page for p in snapshot.page_paths if isinstance(page := snapshot.page(p), Page)}
    return [
        Finding(
            REPLAY_FILE,
            1,
            "replay.lost",
            f"replay case {n} ({case.question!r} as {case.principal}) was answered at the base and is not now",
            hint=f"keep {case.page or 'a current page'} stating {case.fact!r}" if case.fact else f"keep {case.page} current",
        )
        for n, case in enumerate(cases, 1)
        if found(case, before) and not found(case, now)
    ]
