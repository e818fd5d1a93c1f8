"""The deterministic gate before the Reviewer: `kb check` on the work branch plus grounding.

Grounding reads each changed page like a careful fact-checker (``ci.rules.grounding`` for its
claims, ``ci.rules.page_grounding`` for fact cards, timeline, L0/Overview, closed facts and
instruction-like text) and, since the gate knows the base commit, refuses citations of evidence
that the change itself added, and any path outside what the change may touch (``ci.rules.scope``).
Its findings go back to the Proposer first, so a model reviewer spends its tokens on meaning.

What judges a change is read from the base commit, never from the branch being judged: the
configuration (budgets, the secret and privacy allow-lists and policy) and the replay cases. A
change that edits them is refused by ``change.outside`` and judged by the base's rules meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from ci.findings import render_text, sort_findings
from ci.rules import conservation, replay, scope
from ci.rules.grounding import check_page_grounding
from ci.rules.page_grounding import check_page_facts
from ci.run import CheckReport, check_selection
from ci.selection import plan_changed, plan_full
from ci.snapshot import Snapshot
from kb.config import CONFIG_FILE, Config, parse_config
from kb.errors import ConfigError, FormatError, NotFoundError, UsageError
from kb.evidence import LEDGER_PATH, parse_ledger
from kb.page import Page
from kb.repo import Repo


@dataclass(frozen=True)
class GateReport(CheckReport):
    changed_pages: tuple[str, ...] = ()

    def text(self) -> str:
        return render_text(self.findings, self.checked)


def run_gate(view: Repo, base: pygit2.Commit, full: bool = False, pull_request: bool = False) -> GateReport:
    """Check what changed on a work branch (its worktree ``view``) since ``base``.

    With ``full``, the checks cover the whole repository as ``kb check --base`` does (what CI
    runs on a pull request); the grounding, conservation and replay rules apply to the change.
    With ``pull_request``, the change arrives as a pull request: an edit of the configuration,
    the signers or the workflows is refused whoever made it (``scope.refuse_governance``).
    """
    snapshot = Snapshot.load(view.root, config_at(view, base))
    changed = view.changed_since(base)
    selection = plan_full(snapshot, base) if full else plan_changed(snapshot, changed, base)
    report = check_selection(view, snapshot, selection)
    findings = list(report.findings)
    changed_pages = tuple(p for p in changed if p.endswith(".md") and snapshot.has_page(p))
    base_evidence = _ledger_ids(view, base)
    for path in changed_pages:
        page = snapshot.page(path)
        if isinstance(page, Page):
            findings.extend(check_page_grounding(snapshot, page))
            findings.extend(check_page_facts(snapshot, page, base_evidence))
    findings.extend(conservation.check_change(view, snapshot, base) + replay.check_change(view, snapshot, base))
    findings.extend(scope.check_change(view, base))
    if pull_request:
        findings = scope.refuse_governance(findings)
    return GateReport(sort_findings(findings), report.checked, changed_pages)


def config_at(view: Repo, base: pygit2.Commit) -> Config:
    """The configuration of the base commit: the rules a change is judged by are never its own."""
    data = view.read_at(base, CONFIG_FILE)
    if data is None:
        raise ConfigError(
            f"the base commit {str(base.id)[:10]} has no {CONFIG_FILE}", hint="gate a change against a kb repository's commit"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{CONFIG_FILE} at {str(base.id)[:10]}: not UTF-8 text") from None
    return parse_config(text, f"{CONFIG_FILE} at {str(base.id)[:10]}")


def change_base(repo: Repo, rev: str) -> pygit2.Commit:
    """The base of the change ``rev..HEAD``: the merge base of ``rev`` and HEAD, as a work
    branch's base is its merge base with main. So a base branch that moved on after the change
    forked does not count its newer commits as the change's removals."""
    head = repo.head()
    if head is None:
        raise UsageError("the repository has no commits: there is no change to gate", hint="commit the change first")
    fetch = "fetch the base's history (actions/checkout with `fetch-depth: 0`, or `git fetch origin REV`)"
    try:
        base = repo.resolve(rev)
    except NotFoundError:
        raise NotFoundError(f"unknown base commit or branch `{rev}`", hint=f"check `git log --oneline`; in CI, {fetch}") from None
    try:
        merge_base = repo.git.merge_base(base.id, head.id)
    except pygit2.GitError:
        merge_base = None
    if merge_base is None:
        raise NotFoundError(
            f"the base `{rev}` shares no history with HEAD", hint=f"pass the commit the change started from; in CI, {fetch}"
        )
    return repo.git[merge_base].peel(pygit2.Commit)


def _ledger_ids(view: Repo, base: pygit2.Commit) -> set[str] | None:
    """The evidence ids recorded at ``base`` (None when its ledger cannot be read: the evidence
    rules report a broken ledger)."""
    data = view.read_at(base, LEDGER_PATH)
    if data is None:
        return set()
    try:
        return {e.id for e in parse_ledger(data.decode("utf-8"))}
    except (FormatError, UnicodeDecodeError):
        return None
