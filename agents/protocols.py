"""The two roles of the change loop as protocols, and the data they exchange with the pipeline.

A Proposer turns a ``ProposalTask`` into page writes through a ``WriteBackend`` (confined to its
work branch); a Reviewer turns a ``ReviewTask`` into a ``ReviewOutcome`` through a read-only
``ReadBackend``. The model agents (``agents.proposer``, ``agents.reviewer``) and the built-in
offline ones (``agents.offline``) implement the same protocols, so the pipeline has no branch on
which kind it runs. Agents only return data; the pipeline records and applies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.backend import ReadBackend, WriteBackend
from agents.llm import Usage
from agents.schemas import Comment, VerdictName


@dataclass(frozen=True)
class AgentIdentity:
    """Who played a role: the model (or built-in agent) name and its family."""

    model: str
    family: str


@dataclass(frozen=True)
class EvidenceItem:
    """One evidence item a proposal is based on, as stored (line numbers as citations use them)."""

    id: str
    kind: str  # conversation, trajectory, document, tool-output
    scope: str  # system or user:<id>
    text: str
    source: str = ""
    date: str = ""  # YYYY-MM-DD: session date, first message time, or the day it was added
    lines: int = 0

    def preview(self, lines: int = 12) -> str:
        return "\n".join(f"L{n}: {line}" for n, line in enumerate(self.text.splitlines()[:lines], 1))


@dataclass(frozen=True)
class ProposalTask:
    """What the Proposer must do: integrate ``evidence``, writing only under ``write_prefixes``.

    ``user_speakers`` names, per user id, the speakers of that user's conversations who are the
    user (e.g. ``{"deborah": ("Deborah",)}``); empty when unknown. For a revision, ``feedback`` is
    the previous round's review and gate findings as text, ``comments`` the same as data, and
    ``current_diff`` the change so far against its base.
    """

    evidence: tuple[EvidenceItem, ...]
    write_prefixes: tuple[str, ...]
    user_speakers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    feedback: str | None = None
    comments: tuple[Comment, ...] = ()
    current_diff: str | None = None

    @property
    def is_revision(self) -> bool:
        return self.feedback is not None


@dataclass(frozen=True)
class Withdrawal:
    """What a revision took out of a change because the review flagged it, per rule (a gate
    rule id, or a comment kind such as ``over_deletion``), and what it kept although flagged:
    verbatim claims a rule fired on in bulk, which points at the rule, not at the claims."""

    withdrawn: dict[str, int] = field(default_factory=dict)  # rule -> claims withdrawn
    kept: dict[str, int] = field(default_factory=dict)  # rule -> flagged verbatim claims kept
    notes: tuple[str, ...] = ()  # one line per rule: how many, why, an example

    @property
    def total(self) -> int:
        return sum(self.withdrawn.values())


@dataclass(frozen=True)
class ProposerOutcome:
    claims: int = 0  # new claims written (0 when the agent does not count them)
    closed: int = 0  # older claims closed by newer ones
    usage: Usage = field(default_factory=Usage)
    transcript: dict[str, Any] | None = None  # the run's audit record, saved under .kb/runs/
    withdrawal: Withdrawal | None = None  # a revision that withdrew claims says how many and why


@dataclass(frozen=True)
class GateFinding:
    """A deterministic finding as the Reviewer sees it."""

    path: str
    line: int
    rule: str
    message: str


@dataclass(frozen=True)
class ReviewTask:
    """A change to review: the exact head commit, its diff, and every changed page before and
    after (None where the page does not exist on that side)."""

    branch: str
    head: str
    base: str
    diff: str
    changed_files: tuple[str, ...]
    evidence_ids: tuple[str, ...]
    gate_findings: tuple[GateFinding, ...]
    gate_text: str
    before: Mapping[str, str | None] = field(default_factory=dict)
    after: Mapping[str, str | None] = field(default_factory=dict)
    # evidence the change derives again from scratch (``kb memory ingest --reprocess``, trailer
    # Kb-Reprocess): its old claims are replaced, so removing them is not over-deletion
    reprocessed: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReviewOutcome:
    verdict: VerdictName
    summary: str
    comments: tuple[Comment, ...]
    reviewer: AgentIdentity  # who decided: the configured reviewer, or the gate before it
    usage: Usage = field(default_factory=Usage)
    transcript: dict[str, Any] | None = None


class Proposer(Protocol):
    identity: AgentIdentity

    def propose(self, task: ProposalTask, backend: WriteBackend) -> ProposerOutcome: ...


class Reviewer(Protocol):
    identity: AgentIdentity

    def review(self, task: ReviewTask, backend: ReadBackend) -> ReviewOutcome: ...
