"""The gate's conservation and replay rules on a hand-made consolidation branch."""

from __future__ import annotations

from pathlib import Path

from ci.gate import run_gate
from kb.repo import Repo
from pipeline.workspace import open_workspace
from tests.pipeline.consolidate.seeded import FOLDER, seed

TRAILER = "\n\nKb-Consolidation: test-cycle\n"


def _branch_removing(repo: Repo, path: str, line_text: str, trailer: str = TRAILER) -> Repo:
    """A work branch whose one commit removes the bullet ``line_text`` and its footnote."""
    head = repo.head()
    assert head is not None
    workspace = open_workspace(repo, "kb/test-change", base=str(head.id))
    file = workspace.root / path
    rows = file.read_text().splitlines()
    label = next(r for r in rows if line_text in r).split("[^")[1].split("]")[0]
    kept = [r for r in rows if line_text not in r and not r.startswith(f"[^{label}]:")]
    file.write_text("\n".join(kept) + "\n")
    workspace.commit("remove a statement" + trailer)
    return workspace.view


def test_a_consolidation_change_that_drops_the_only_citation_of_a_span_is_refused(tmp_path: Path) -> None:
    repo, ev = seed(tmp_path / "kb", replay=None)
    base = repo.head()
    assert base is not None
    view = _branch_removing(repo, f"{FOLDER}/pricing.md", "The annual fee is 120 euros")
    dropped = [f for f in run_gate(view, base).findings if f.rule == "conservation.dropped"]
    assert [f.message for f in dropped] == [f"{ev}#L9-L9 was cited at the base and is cited by no page now"]


def test_a_span_still_cited_elsewhere_or_retired_is_conserved(tmp_path: Path) -> None:
    repo, ev = seed(tmp_path / "kb", replay=None)
    base = repo.head()
    assert base is not None
    # support.md's weekday statement is also on contact.md: nothing is lost
    view = _branch_removing(repo, f"{FOLDER}/support.md", "open on weekdays")
    assert not [f for f in run_gate(view, base).findings if f.rule == "conservation.dropped"]


def test_the_rule_applies_to_consolidation_changes_only(tmp_path: Path) -> None:
    repo, _ = seed(tmp_path / "kb", replay=None)
    base = repo.head()
    assert base is not None
    view = _branch_removing(repo, f"{FOLDER}/pricing.md", "The annual fee is 120 euros", trailer="")
    assert not [f for f in run_gate(view, base).findings if f.rule == "conservation.dropped"]


def test_replay_refuses_a_change_that_hides_a_found_answer(tmp_path: Path) -> None:
    replay = "- question: What is the fee?\n  principal: system\n  page: knowledge/policies/pricing\n  fact: annual fee is 120 euros\n"
    repo, _ = seed(tmp_path / "kb", replay=replay)
    base = repo.head()
    assert base is not None
    view = _branch_removing(repo, f"{FOLDER}/pricing.md", "The annual fee is 120 euros", trailer="")
    lost = [f for f in run_gate(view, base).findings if f.rule == "replay.lost"]
    assert len(lost) == 1 and lost[0].path == "consolidation/replay.yaml" and "'What is the fee?' as system" in lost[0].message
