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


class Comment(_Data):
    """A review comment pointing at a file and line, with the evidence that disagrees."""

    path: str = Field(description="Page path, e.g. users/alice/profile.md")
    line: int = Field(ge=0, description="1-based line in the new version of the file (0 = whole file).")
    message: str = Field(min_length=1, description="What is wrong and what would fix it.")
    evidence: str | None = Field(default=None, description="Evidence reference, e.g. ev-9f2c4e1ab07d3c55#L3-L4")


class Verdict(_Data):
    """The Reviewer's final `verdict`."""

    verdict: Literal["approve", "request_changes"]
    summary: str = Field(min_length=1, description="One paragraph: what was checked and the outcome.")
