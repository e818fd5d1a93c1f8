"""Structured data the agents produce: submissions, review comments, verdicts.

Pydantic models at the edge with the model: their JSON schemas are generated from these
classes (never written by hand) and every model output is validated against them.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kb.ids import EVIDENCE_ID_PATTERN


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Submission(_Data):
    """The Proposer's `submit`: the change is ready for checks and review."""

    title: str = Field(min_length=3, max_length=120, description="Short title of the change, imperative mood.")
    rationale: str = Field(min_length=3, description="Why this change: what the evidence says and how the pages reflect it.")
    evidence_ids: list[str] = Field(description="Evidence ids (ev-...) the change is based on.")


CommentKind = Literal["review", "gate", "conflict", "over_deletion"]

# What a Reviewer found wrong with a claim, in the words a machine cannot check for it. The first
# three are the meaning faults the model Reviewer is there for (issue 11, item 4).
FaultName = Literal[
    "meaning_changed",  # a paraphrase that says something else than the evidence
    "over_generalisation",  # broader or stronger than the evidence: all, always, never, only, every
    "unsupported_inference",  # a conclusion the cited lines do not state
    "wrong_value",  # a number, unit, date, name or amount that differs from the evidence
    "lost_qualifier",  # a negation, condition, time or scope of the evidence dropped
    "wrong_speaker",  # attributed to someone other than who said it
    "contradiction",  # other evidence or pages say otherwise, and the change does not qualify it
    "over_deletion",  # a claim removed although its evidence still stands
    "structure",  # links, indexes, L0 / Overview
    "other",
]
CLAIM_FAULTS: frozenset[str] = frozenset(
    {"meaning_changed", "over_generalisation", "unsupported_inference", "wrong_value", "lost_qualifier", "wrong_speaker", "contradiction"}
)
EVIDENCE_REF_PATTERN = rf"^{EVIDENCE_ID_PATTERN}#L[1-9][0-9]*(-L[1-9][0-9]*)?$"


class _CommentFields(_Data):
    path: str = Field(description="Page path, e.g. users/alice/profile.md")
    line: int = Field(ge=0, description="1-based line of the claim in the new version of the page (0 = whole file).")
    message: str = Field(min_length=1, description="What is wrong and what would fix it.")
    evidence: str | None = Field(default=None, description="Evidence line(s) that show it, e.g. ev-9f2c4e1ab07d3c55#L3-L4")
    fault: FaultName | None = Field(default=None, description="What kind of fault it is.")


class ReviewComment(_CommentFields):
    """The Reviewer's ``comment`` tool: the page line of the claim, the evidence line that
    disagrees, and the kind of fault. A claim fault names both lines."""

    evidence: str | None = Field(
        default=None,
        pattern=EVIDENCE_REF_PATTERN,
        description="The evidence line(s) that show the fault, as ev-<id>#L<n> or ev-<id>#L<start>-L<end>.",
    )
    fault: FaultName | None = Field(
        default=None,
        description=(
            "meaning_changed (a paraphrase that changes the meaning), over_generalisation (broader or stronger than the "
            "evidence), unsupported_inference (not stated by the cited lines), wrong_value, lost_qualifier, wrong_speaker, "
            "contradiction, over_deletion, structure, other. A claim fault needs line >= 1 and evidence."
        ),
    )

    @model_validator(mode="after")
    def _claim_faults_name_both_lines(self) -> Self:
        if self.fault in CLAIM_FAULTS:
            if self.line < 1:
                raise ValueError(f"a {self.fault} comment must give the page line of the claim (line >= 1)")
            if self.evidence is None:
                raise ValueError(f"a {self.fault} comment must give the evidence line that shows it (evidence: ev-<id>#L<n>)")
        return self


class Comment(_CommentFields):
    """A review comment as recorded. ``kind`` says what raised it: a reviewer's reading
    (``review``), a deterministic gate finding (``gate``), two current values of one fact
    (``conflict``) or a claim removed while its evidence still stands (``over_deletion``).
    Revisions act on the kind, never on the message text. Models cannot set it: their tool
    takes a ``ReviewComment``.
    """

    kind: CommentKind = "review"

    def where(self) -> str:
        """``path:line`` of the page, the fault, and the evidence line, as the Proposer reads them."""
        fault = f" [{self.fault}]" if self.fault else ""
        evidence = f" (evidence {self.evidence})" if self.evidence else ""
        return f"{self.path}:{self.line}{fault}: {self.message}{evidence}"


VerdictName = Literal["approve", "request_changes"]


class Verdict(_Data):
    """The Reviewer's final `verdict`."""

    verdict: VerdictName
    summary: str = Field(min_length=1, description="One paragraph: what was checked and the outcome.")
