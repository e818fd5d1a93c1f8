"""Structured data the agents produce: submissions, review comments, verdicts.

Pydantic models at the edge with the model: their JSON schemas are generated from these
classes (never written by hand) and every model output is validated against them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Submission(_Data):
    """The Proposer's `submit`: the change is ready for checks and review."""

    title: str = Field(min_length=3, max_length=120, description="Short title of the change, imperative mood.")
    rationale: str = Field(min_length=3, description="Why this change: what the evidence says and how the pages reflect it.")
    evidence_ids: list[str] = Field(description="Evidence ids (ev-...) the change is based on.")


CommentKind = Literal["review", "gate", "conflict", "over_deletion"]


class ReviewComment(_Data):
    """The Reviewer's ``comment`` tool: a file and line, with the evidence that disagrees."""

    path: str = Field(description="Page path, e.g. users/alice/profile.md")
    line: int = Field(ge=0, description="1-based line in the new version of the file (0 = whole file).")
    message: str = Field(min_length=1, description="What is wrong and what would fix it.")
    evidence: str | None = Field(default=None, description="Evidence reference, e.g. ev-9f2c4e1ab07d3c55#L3-L4")


class Comment(ReviewComment):
    """A review comment as recorded. ``kind`` says what raised it: a reviewer's reading
    (``review``), a deterministic gate finding (``gate``), two current values of one fact
    (``conflict``) or a claim removed while its evidence still stands (``over_deletion``).
    Revisions act on the kind, never on the message text. Models cannot set it: their tool
    takes a ``ReviewComment``.
    """

    kind: CommentKind = "review"


VerdictName = Literal["approve", "request_changes"]


class Verdict(_Data):
    """The Reviewer's final `verdict`."""

    verdict: VerdictName
    summary: str = Field(min_length=1, description="One paragraph: what was checked and the outcome.")
