"""What a consolidation job returns: the pages it rewrote, what it found, what it did to each claim."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.consolidate.record import Action


@dataclass(frozen=True)
class Found:
    """One defect a job found, and whether it wrote a fix for it."""

    kind: str  # grounding | duplicate | similar-not-same | expired | conflict | link | l0 | index | oversized | tiny | l1
    path: str
    detail: str
    fixed: bool = True


@dataclass
class JobResult:
    changes: dict[str, str] = field(default_factory=dict)  # path -> new text
    found: list[Found] = field(default_factory=list)
    claims: dict[str, tuple[Action, str]] = field(default_factory=dict)  # "path#label" -> (action, reason)
    pages: dict[str, Action] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # what it could not do without a model
    again: bool = False  # a change cut to fit a review: the same batch runs again on its merged result


def claim_key(path: str, label: str) -> str:
    return f"{path}#{label}"
