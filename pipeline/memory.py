"""`kb memory ingest`: conversation sessions become evidence, then one reviewed proposal for
``users/<id>/``. Nothing bypasses review: the same Proposer, gate, Reviewer and merge gate."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from agents.privacy_detector import detector_for
from kb.errors import UsageError
from kb.evidence import add_items, ledger_at
from kb.intake import prepare_all, prepare_messages
from kb.progress import report
from kb.repo import Repo
from kb.scopes import user_scope
from kb.sessions import Session, read_sessions
from pipeline.loop import RunResult, run_loop
from pipeline.propose import drop_abandoned_branch, evidence_on_open_branches, select_evidence


@dataclass
class IngestResult:
    user: str
    sessions: int
    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)  # stored before, never proposed: proposed now
    reprocessed: list[str] = field(default_factory=list)  # stored before, their memory derived again (--reprocess)
    run: RunResult | None = None


def user_speakers(user: str, sessions: list[Session], speaker: str | None) -> tuple[str, ...]:
    """Which speakers are the user: --speaker, else 'user'/'human' or a speaker named like the id."""
    names = {s for session in sessions for s in (session.speakers or {m.speaker for m in session.messages})}
    if speaker:
        exact = sorted(n for n in names if n.casefold() == speaker.casefold())
        if exact or not names:
            return tuple(exact) or (speaker,)
        close = difflib.get_close_matches(speaker, sorted(names), n=1)
        raise UsageError(
            f"no speaker {speaker!r} in these sessions; the speakers are {', '.join(sorted(names))}",
            hint=f"did you mean --speaker {close[0]!r}?" if close else "pass --speaker with one of the names above",
        )
    match = {n for n in names if n.lower().replace(" ", "-") == user or (n.split() and n.lower().split()[0] == user)}
    if match:
        return tuple(sorted(match))
    defaults = {n for n in names if n.lower() in ("user", "human")}
    if names and not defaults:
        raise UsageError(
            f"none of the speakers ({', '.join(sorted(names))}) is named like the user {user!r}, and none is 'user'",
            hint="say which speaker is the user with --speaker NAME",
        )
    return tuple(sorted(defaults)) or ("user", "human")


def ingest(
    repo: Repo,
    user: str,
    paths: list[Path],
    sample: str | None = None,
    speaker: str | None = None,
    build_index: bool = True,
    reprocess: bool = False,
) -> IngestResult:
    """Store and propose holding the repository lock (so no other writer takes these sessions
    between the two), then rebuild the index outside it.

    ``reprocess``: sessions of these files stored before (for this user) are proposed again, and
    the user's claims that cite them are replaced by what the new proposal derives (for example
    under a corrected ``speaker``). The evidence itself is unchanged: it is append-only, and the
    sessions are the same; what changes is the memory made from them, through the same review."""
    with repo.write_lock():
        result = _ingest_locked(repo, user, paths, sample, speaker, reprocess)
    if build_index and result.run is not None and result.run.merge is not None:
        from kb.retrieval.build import build_index as build

        result.run.merge = replace(result.run.merge, index=build(repo))
    return result


def _ingest_locked(repo: Repo, user: str, paths: list[Path], sample: str | None, speaker: str | None, reprocess: bool) -> IngestResult:
    scope = user_scope(user)
    sessions: list[Session] = []
    warnings: list[str] = []
    for n, path in enumerate(paths):
        report("read session files", n, len(paths))
        read = read_sessions(path, sample)
        sessions.extend(read.sessions)
        warnings.extend(read.warnings)
    report("read session files", len(paths), len(paths))
    sessions.sort(key=lambda s: (s.date, s.source))
    speakers = user_speakers(user, sessions, speaker)
    allow, privacy = repo.config.secrets.allow, repo.config.privacy
    detector = detector_for(privacy)
    items = prepare_all(
        partial(
            prepare_messages,
            list(s.messages),
            s.source,
            scope,
            s.meta | {"session_date": s.date, "title": s.title},
            allow=allow,
            privacy=privacy,
            detector=detector,
        )
        for s in sessions
    )
    added = add_items(repo, items)
    result = IngestResult(user, len(sessions), [e.id for e in added.added], added.duplicates, warnings)
    # Sessions stored earlier but never proposed (an ingest killed after its add) go in as well,
    # and so do those of a branch a killed ingest was writing.
    drop_abandoned_branch(repo)
    waiting = evidence_on_open_branches(repo)  # proposed already, left for a human: not again
    pending = [e.id for e in select_evidence(repo) if e.scope == scope and e.id not in waiting]
    result.resumed = [i for i in pending if i not in result.added]
    if reprocess:
        stored = {e.id for e in ledger_at(repo, repo.head()) if e.path and e.scope == scope}  # not forgotten ones
        result.reprocessed = [i for i in added.duplicates if i in stored and i not in waiting and i not in pending]
        pending += result.reprocessed
    if not pending:
        return result
    result.run = run_loop(repo, ids=pending, user_speakers={user: speakers}, build_index=False, retract=tuple(result.reprocessed))
    return result
