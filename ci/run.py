"""Run every rule over a repository (all of it, or what changed since a base) and collect findings."""

from __future__ import annotations

from dataclasses import dataclass

from ci.findings import Finding, sort_findings
from ci.rules import budgets, citations, evidence, frontmatter, indexes, links, privacy, secrets
from ci.selection import Selection, plan_changed, plan_full, plan_paths
from ci.snapshot import Snapshot
from kb.repo import Repo

RULE_FAMILIES = (frontmatter, links, indexes, budgets, citations, secrets, privacy)


@dataclass(frozen=True)
class CheckReport:
    findings: list[Finding]
    checked: int

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors


def run_checks(repo: Repo, changed_only: bool = False, base: str | None = None, paths: list[str] | None = None) -> CheckReport:
    """Check the working tree: everything, what changed since ``base``, or the given paths."""
    snapshot = Snapshot.load(repo.root, repo.config)
    base_commit = repo.resolve(base) if base else None
    if paths:
        selection = plan_paths(snapshot, [repo.relpath(p) for p in paths], base_commit)
    elif changed_only:
        base_commit = base_commit or repo.head()
        if base_commit is None:
            selection = plan_full(snapshot, None)
        else:
            selection = plan_changed(snapshot, repo.changed_since(base_commit), base_commit)
    else:
        selection = plan_full(snapshot, base_commit)
    return check_selection(repo, snapshot, selection)


def check_selection(repo: Repo, snapshot: Snapshot, selection: Selection) -> CheckReport:
    findings: list[Finding] = []
    for family in RULE_FAMILIES:
        findings.extend(family.check(snapshot, selection))
    findings.extend(evidence.check(snapshot, selection, repo.git))
    return CheckReport(sort_findings(findings), len(selection.pages))
