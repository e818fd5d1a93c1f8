"""Run every rule over a repository (all of it, or what changed since a base) and collect findings."""

from __future__ import annotations

from dataclasses import dataclass

from ci.findings import Finding, sort_findings
from ci.rules import budgets, citations, evidence, frontmatter, indexes, links, privacy, scope, secrets
from ci.selection import Selection, plan_changed, plan_full, plan_paths
from ci.snapshot import Snapshot
from kb.progress import report
from kb.repo import Repo

RULE_FAMILIES = (frontmatter, links, indexes, budgets, citations, secrets, privacy, scope)


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
    """Every rule family over the selection, reporting progress after each (``kb.progress``: a
    check of thousands of pages takes a while; a small one prints nothing)."""
    findings: list[Finding] = []
    steps = len(RULE_FAMILIES) + 1
    stage = f"check {len(selection.pages)} pages"
    for n, family in enumerate(RULE_FAMILIES):
        report(stage, n, steps, "rule families")
        findings.extend(family.check(snapshot, selection))
    report(stage, steps - 1, steps, "rule families")
    findings.extend(evidence.check(snapshot, selection, repo.git))
    report(stage, steps, steps, "rule families")
    return CheckReport(sort_findings(findings), len(selection.pages))
