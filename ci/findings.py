"""Findings are data: rule id, severity, path, line, message, hint; and their three renderings.

Rule ids and severities are closed sets: a rule id that is not in ``RuleId`` is a type error
(docs/checks.md documents each one; the grounding rules belong to the gate).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning"]
RuleId = Literal[
    "page.parse",
    "frontmatter.required",
    "frontmatter.unknown-key",
    "frontmatter.type",
    "frontmatter.validity",
    "id.path",
    "id.unique",
    "scope.path",
    "scope.private-text",
    "link.broken",
    "link.anchor",
    "link.scope",
    "link.outside",
    "index.missing",
    "index.unlisted",
    "index.orphan",
    "index.extra",
    "index.duplicate",
    "index.summary",
    "budget.l0",
    "budget.l1",
    "budget.l1-missing",
    "citation.malformed",
    "citation.undefined",
    "citation.unused",
    "citation.evidence",
    "citation.lines",
    "citation.quote",
    "citation.scope",
    "citation.sources",
    "evidence.ledger",
    "evidence.chain",
    "evidence.modified",
    "evidence.removed",
    "evidence.rewritten",
    "evidence.unrecorded",
    "secret.found",
    "privacy.found",
    "grounding.date",
    "grounding.number",
    "grounding.negation",
    "grounding.unit",
    "grounding.qualifier",
    "grounding.name",
    "grounding.speaker",
    "grounding.wording",
    "grounding.support",
    "grounding.uncited",
    "grounding.fact",
    "grounding.timeline",
    "grounding.summary",
    "grounding.closed-fact",
    "grounding.branch-evidence",
    "grounding.instruction",
    "conservation.dropped",
    "replay.lost",
    "change.outside",
    "change.scope",
    "change.entry",
    "change.human",
    "change.governance",
]


@dataclass(frozen=True, order=True)
class Finding:
    """One problem at one place. Field order is the sort order: path, line, rule, message."""

    path: str
    line: int  # 1-based; 1 when the problem concerns the whole file
    rule: RuleId
    message: str
    severity: Severity = "error"
    hint: str = ""


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(set(findings), key=lambda f: (f.path, f.line, f.rule, f.message))


def render_text(findings: list[Finding], checked: int) -> str:
    lines = []
    for f in findings:
        hint = f" (hint: {f.hint})" if f.hint else ""
        lines.append(f"{f.path}:{f.line}: {f.severity} [{f.rule}] {f.message}{hint}")
    return "\n".join(lines + [_summary(findings, checked)])


def _summary(findings: list[Finding], checked: int) -> str:
    errors = sum(1 for f in findings if f.severity == "error")
    return f"{checked} page(s) checked: {errors} error(s), {len(findings) - errors} warning(s)"


def render_json(findings: list[Finding], checked: int) -> str:
    errors = sum(1 for f in findings if f.severity == "error")
    return json.dumps(
        {"checked": checked, "errors": errors, "findings": [asdict(f) for f in findings]},
        indent=2,
        sort_keys=True,
        ensure_ascii=False,
    )


def _escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render_github(findings: list[Finding], checked: int) -> str:
    """GitHub Actions workflow commands: ``::error file=F,line=L,title=T::message``."""
    lines = []
    for f in findings:
        message = f.message + (f" ({f.hint})" if f.hint else "")
        lines.append(f"::{f.severity} file={_escape(f.path, True)},line={max(f.line, 1)},title={_escape(f.rule, True)}::{_escape(message)}")
    return "\n".join(lines + [_summary(findings, checked)])
