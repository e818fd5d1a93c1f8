"""What the change loop records in git: proposal trailers, review notes, status notes.

- A work branch's commits carry trailers: ``Kb-Evidence``, ``Kb-Base``, ``Kb-Proposer-Model``,
  ``Kb-Proposer-Family``, ``Kb-Round``.
- Every review is a JSON record in a git note (``refs/notes/kb-reviews``) on the exact commit it
  reviewed, so an approval can never apply to a later head.
- A branch that did not converge gets a ``needs-human`` note (``refs/notes/kb-status``).
- The merge commit repeats the whole story in trailers and adds ``reviews/<date>-<slug>.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import pygit2

from agents.schemas import VerdictName
from kb.repo import Repo

REVIEWS_REF = "refs/notes/kb-reviews"
STATUS_REF = "refs/notes/kb-status"
TRAILER_RE = re.compile(r"^([A-Z][A-Za-z-]+): (.*)$")


@dataclass(frozen=True)
class ReviewRecord:
    branch: str
    head: str
    base: str
    round: int
    verdict: VerdictName
    reviewer_model: str
    reviewer_family: str
    proposer_model: str
    proposer_family: str
    at: str
    summary: str = ""
    gate_errors: int = 0
    comments: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    # what the revision before this review withdrew, and kept although flagged, per rule
    withdrawn: dict[str, int] = field(default_factory=dict)
    kept_flagged: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_trailers(message: str) -> dict[str, str]:
    """Trailers of the last paragraph of a commit message."""
    paragraphs = message.strip().split("\n\n")
    out: dict[str, str] = {}
    for line in paragraphs[-1].splitlines() if paragraphs else []:
        m = TRAILER_RE.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def proposal_info(repo: Repo, branch_head: pygit2.Commit, base: pygit2.Oid) -> dict[str, str]:
    """Trailers of the newest commit on the branch that has them (walking back to ``base``)."""
    for commit in repo.git.walk(branch_head.id, pygit2.enums.SortMode.TOPOLOGICAL):
        if commit.id == base:
            break
        trailers = parse_trailers(commit.message)
        if "Kb-Proposer-Family" in trailers:
            return trailers
    return {}


def _read_note(repo: Repo, ref: str, commit: str) -> list[dict[str, Any]]:
    try:
        note = repo.git.lookup_note(commit, ref)
    except KeyError:
        return []
    try:
        data = json.loads(note.message)
    except json.JSONDecodeError:
        return []
    return data if isinstance(data, list) else [data]


def _write_note(repo: Repo, ref: str, commit: str, records: list[dict[str, Any]]) -> None:
    sig = repo.signature()
    text = json.dumps(records, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    repo.git.create_note(text, sig, sig, commit, ref, True)


def add_review(repo: Repo, record: ReviewRecord) -> None:
    records = _read_note(repo, REVIEWS_REF, record.head)
    records.append(record.to_json())
    _write_note(repo, REVIEWS_REF, record.head, records)


def reviews_of(repo: Repo, commit: str) -> list[ReviewRecord]:
    return [ReviewRecord(**r) for r in _read_note(repo, REVIEWS_REF, commit)]


def set_status(repo: Repo, commit: str, status: str, detail: dict[str, Any]) -> None:
    _write_note(repo, STATUS_REF, commit, [{"status": status, **detail}])


def status_of(repo: Repo, commit: str) -> dict[str, Any] | None:
    records = _read_note(repo, STATUS_REF, commit)
    return records[-1] if records else None


WITHDRAWN_TRAILER = "Kb-Withdrawn"
KEPT_TRAILER = "Kb-Kept-Flagged"


def count_trailers(withdrawn: dict[str, int], kept: dict[str, int]) -> dict[str, str]:
    """Trailers of a revision commit: ``Kb-Withdrawn: grounding.negation=3, citation.quote=1``."""
    out = {}
    for name, counts in ((WITHDRAWN_TRAILER, withdrawn), (KEPT_TRAILER, kept)):
        if counts:
            out[name] = ", ".join(f"{rule}={n}" for rule, n in sorted(counts.items()))
    return out


def parse_counts(value: str) -> dict[str, int]:
    """``a=3, b=1`` -> {"a": 3, "b": 1}; anything else in the value is ignored."""
    out = {}
    for part in value.split(","):
        rule, _, n = part.strip().partition("=")
        if rule and n.isdigit():
            out[rule] = int(n)
    return out
