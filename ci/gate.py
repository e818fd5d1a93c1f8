"""The deterministic gate before the Reviewer: `kb check` on the work branch plus claim grounding.

Its findings go back to the Proposer first, so a model reviewer spends its tokens on meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from ci.findings import render_text, sort_findings
from ci.rules import conservation, replay
from ci.rules.grounding import check_page_grounding
from ci.run import CheckReport, check_selection
from ci.selection import plan_changed
from ci.snapshot import Snapshot
from kb.page import Page
from kb.repo import Repo


@dataclass(frozen=True)
class GateReport(CheckReport):
    changed_pages: tuple[str, ...] = ()

    def text(self) -> str:
        return render_text(self.findings, self.checked)


def run_gate(view: Repo, base: pygit2.Commit) -> GateReport:
    """Check what changed on a work branch (its worktree ``view``) since ``base``."""
    snapshot = Snapshot.load(view.root, view.config)
    changed = view.changed_since(base)
    selection = plan_changed(snapshot, changed, base)
    report = check_selection(view, snapshot, selection)
    findings = list(report.findings)
    changed_pages = tuple(p for p in changed if p.endswith(".md") and snapshot.has_page(p))
    for path in changed_pages:
        page = snapshot.page(path)
        if isinstance(page, Page):
            findings.extend(check_page_grounding(snapshot, page))
    findings.extend(conservation.check_change(view, snapshot, base) + replay.check_change(view, snapshot, base))
    return GateReport(sort_findings(findings), report.checked, changed_pages)
