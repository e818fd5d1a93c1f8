"""What the change loop records in git: proposal trailers, review notes, status notes.

- A work branch's commits carry trailers: ``Kb-Evidence``, ``Kb-Base``, ``Kb-Proposer-Model``,
  ``Kb-Proposer-Family``, ``Kb-Round``.
- Every review is a JSON record in a git note (``refs/notes/kb-reviews``) on the exact commit it
  reviewed, so an approval can never apply to a later head. The record is validated against its
  schema when read (``MalformedReviewError`` otherwise) and signed by the reviewing process
  (``sign_review``: an SSH signature over its canonical JSON, docs/review.md).
- A branch that did not converge gets a ``needs-human`` note (``refs/notes/kb-status``).
- The merge commit repeats the whole story in trailers and adds ``reviews/<date>-<slug>.json``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import asdict, field
from typing import Any

import pydantic
import pygit2
from pydantic import ConfigDict, field_validator
from pydantic.dataclasses import dataclass

from agents.schemas import Comment, VerdictName
from kb.errors import MalformedReviewError
from kb.repo import Repo
from kb.signing import SigningKey, load_key, principal_of, sign

REVIEWS_REF = "refs/notes/kb-reviews"
STATUS_REF = "refs/notes/kb-status"
TRAILER_RE = re.compile(r"^([A-Z][A-Za-z-]+): (.*)$")


@dataclass(frozen=True, config=ConfigDict(extra="forbid", strict=True))
class ReviewRecord:
    """One review of one commit, as its note holds it. Built from a note, it is validated: a
    missing, unknown or mistyped field is an error, never a default."""

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
    signer: str = ""  # the allowed-signers principal of the reviewing process
    signature: str = ""  # SSH signature (namespace kb-review) over ``payload()``
    # what the revision before this review withdrew, and kept although flagged, per rule
    withdrawn: dict[str, int] = field(default_factory=dict)
    kept_flagged: dict[str, int] = field(default_factory=dict)

    @field_validator("at")
    @classmethod
    def _timestamp(cls, at: str) -> str:
        dt.datetime.fromisoformat(at)  # a ValueError is a validation error: reviews are ordered by it
        return at

    @field_validator("comments")
    @classmethod
    def _comments(cls, comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for comment in comments:
            Comment.model_validate(comment)
        return comments

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def when(self) -> dt.datetime:
        """``at`` as an aware time (a time without a zone is read as UTC), for ordering reviews."""
        moment = dt.datetime.fromisoformat(self.at)
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)

    def payload(self) -> bytes:
        """What the signature covers: the canonical JSON of every field but the signature."""
        data = {k: v for k, v in self.to_json().items() if k != "signature"}
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class ReviewSigner:
    """The reviewing process's key and its principal in the repository's allowed signers."""

    def __init__(self, repo: Repo) -> None:
        self.key: SigningKey = load_key()
        self.principal = principal_of(repo, self.key)

    def sign(self, record: ReviewRecord) -> ReviewRecord:
        unsigned = ReviewRecord(**(record.to_json() | {"signer": self.principal, "signature": ""}))
        return ReviewRecord(**(unsigned.to_json() | {"signature": sign(self.key, unsigned.payload())}))


def parse_trailers(message: str) -> dict[str, str]:
    """Trailers of the last paragraph of a commit message."""
    paragraphs = message.strip().split("\n\n")
    out: dict[str, str] = {}
    for line in paragraphs[-1].splitlines() if paragraphs else []:
        m = TRAILER_RE.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def trailer_ids(info: dict[str, str], name: str) -> tuple[str, ...]:
    """The comma-separated ids of trailer ``name`` (Kb-Evidence, Kb-Reprocess)."""
    return tuple(e.strip() for e in info.get(name, "").split(",") if e.strip())


def proposal_info(repo: Repo, branch_head: pygit2.Commit, base: pygit2.Oid) -> dict[str, str]:
    """Trailers of the newest commit on the branch that has them (walking back to ``base``)."""
    for commit in repo.git.walk(branch_head.id, pygit2.enums.SortMode.TOPOLOGICAL):
        if commit.id == base:
            break
        trailers = parse_trailers(commit.message)
        if "Kb-Proposer-Family" in trailers:
            return trailers
    return {}


def _read_note(repo: Repo, ref: str, commit: str, strict: bool = False) -> list[dict[str, Any]]:
    """The records of ``commit``'s note; with ``strict``, a note that is not JSON is an error."""
    try:
        note = repo.git.lookup_note(commit, ref)
    except KeyError:
        return []
    try:
        data = json.loads(note.message)
    except json.JSONDecodeError as exc:
        if strict:
            raise MalformedReviewError(f"the review note on {commit[:10]} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
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


def drop_reviews(repo: Repo, commit: str) -> None:
    """Remove ``commit``'s review note (its branch is being dropped: the reviews named that branch,
    and a re-proposal may produce the very same commit under another name)."""
    try:
        note = repo.git.lookup_note(commit, REVIEWS_REF)
    except KeyError:
        return
    sig = repo.signature()
    note.remove(sig, sig, REVIEWS_REF)


def reviews_of(repo: Repo, commit: str) -> list[ReviewRecord]:
    """The reviews of ``commit``, each validated; MalformedReviewError names the first bad one."""
    out = []
    for number, data in enumerate(_read_note(repo, REVIEWS_REF, commit, strict=True), 1):
        if not isinstance(data, dict):
            raise MalformedReviewError(f"review {number} in the note on {commit[:10]} is a {type(data).__name__}, not a JSON object")
        try:
            out.append(ReviewRecord(**data))
        except pydantic.ValidationError as exc:
            errors = exc.errors()
            missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing" and e["loc"]]
            others = [f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in errors if e["type"] != "missing"]
            problems = "; ".join(([f"missing {', '.join(missing)}"] if missing else []) + others[:3])
            raise MalformedReviewError(
                f"review {number} in the note on {commit[:10]} does not match the review schema: {problems}"
            ) from None
    return out


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
