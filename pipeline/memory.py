"""`kb memory ingest`: conversation sessions become evidence, then one reviewed proposal for
``users/<id>/``. Nothing bypasses review: the same Proposer, gate, Reviewer and merge gate."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from kb.evidence import add_items
from kb.intake import prepare_all, prepare_messages
from kb.repo import Repo
from kb.scopes import user_scope
from kb.sessions import Session, read_sessions
from pipeline.loop import RunResult, run_loop
from pipeline.propose import evidence_on_open_branches, select_evidence


@dataclass
class IngestResult:
    user: str
    sessions: int
    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)  # stored before, never proposed: proposed now
    run: RunResult | None = None


def user_speakers(user: str, sessions: list[Session], speaker: str | None) -> tuple[str, ...]:
    """Which speakers are the user: --speaker, else 'user'/'human' or a speaker named like the id."""
    if speaker:
        return (speaker,)
    names = {s for session in sessions for s in session.speakers}
    match = {n for n in names if n.lower().replace(" ", "-") == user or n.lower().split()[0] == user}
    return tuple(sorted(match)) or ("user", "human")


def ingest(
    repo: Repo,
    user: str,
    paths: list[Path],
    sample: str | None = None,
    speaker: str | None = None,
    build_index: bool = True,
) -> IngestResult:
    scope = user_scope(user)
    sessions: list[Session] = []
    warnings: list[str] = []
    for path in paths:
        read = read_sessions(path, sample)
        sessions.extend(read.sessions)
        warnings.extend(read.warnings)
    sessions.sort(key=lambda s: (s.date, s.source))
    speakers = user_speakers(user, sessions, speaker)
    allow = repo.config.secrets.allow
    items = prepare_all(
        partial(prepare_messages, list(s.messages), s.source, scope, s.meta | {"session_date": s.date, "title": s.title}, allow=allow)
        for s in sessions
    )
    added = add_items(repo, items)
    result = IngestResult(user, len(sessions), [e.id for e in added.added], added.duplicates, warnings)
    # Sessions stored earlier but never proposed (an ingest killed after its add) go in as well.
    waiting = evidence_on_open_branches(repo)  # proposed already, left for a human: not again
    pending = [e.id for e in select_evidence(repo) if e.scope == scope and e.id not in waiting]
    result.resumed = [i for i in pending if i not in result.added]
    if not pending:
        return result
    result.run = run_loop(repo, ids=pending, user_speakers={user: speakers}, build_index=build_index)
    return result
