"""``kb consolidate`` finishes with no person: a split too large for one review is cut into
parts that each pass ``max_diff_lines`` and merge one after the other."""

from __future__ import annotations

import json
from pathlib import Path

from kb.page import parse_page
from kb.repo import Repo, diff_trees
from tests.builders import commit
from tests.pipeline.consolidate.seeded import FOLDER, seed

CAP = 90  # the seeded split of shipping.md in one change is a 118-line diff


def test_a_split_over_the_diff_cap_merges_in_parts_with_no_person(cli, tmp_path: Path) -> None:
    repo, _ = seed(tmp_path / "kb")
    config = (repo.root / "kb.config.yaml").read_text(encoding="utf-8")
    commit(repo, {"kb.config.yaml": config.replace("consolidation:\n", f"consolidation:\n  max_diff_lines: {CAP}\n", 1)}, "cap")
    run = cli("consolidate", "--batch-size", "4", "--json", "--no-index", cwd=repo.root)
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert data["status"] == "complete" and data["needs_human"] == [] and data["coverage"]["percent"] == 100.0

    repo = Repo(repo.root)
    head = repo.head()
    assert head is not None
    merges = [c for c in repo.git.walk(head.id) if c.message.startswith("Merge kb/consolidate-")]
    sizes = {c.message.splitlines()[0]: _lines(c) for c in merges}
    assert all(n <= CAP for n in sizes.values()), sizes
    splits = [c for c in merges if any(p.startswith(f"{FOLDER}/shipping-") for p in _added(c))]
    assert len(splits) >= 2  # the split went in as several reviewed parts

    parent = parse_page((repo.root / FOLDER / "shipping.md").read_text(encoding="utf-8"), f"{FOLDER}/shipping.md")
    listing = [row for row in (parent.overview() or "").splitlines() if row.startswith(f"- [[{FOLDER}/shipping-")]
    parts = sorted(p.stem for p in (repo.root / FOLDER).glob("shipping-*.md"))
    assert sorted(row[4:].split("]]")[0].rsplit("/", 1)[1] for row in listing) == parts  # each part listed once
    assert (parent.overview() or "").count("This page was split into parts") == 1
    assert "will move to parts of their own" not in parent.body  # nothing announced is left undone
    # the cycle's record names the follow-up batches it added, all done
    status = cli("consolidate", "status", "--json", cwd=repo.root)
    assert status.code == 0, status.err
    assert json.loads(status.out)["waiting"] == []


def _added(merge) -> list[str]:  # type: ignore[no-untyped-def]
    diff = diff_trees(merge.parents[0].tree, merge.tree)
    return [d.delta.new_file.path for d in diff if d.delta.status_char() == "A"]


def _lines(merge) -> int:  # type: ignore[no-untyped-def]
    """The branch's diff from the main it was proposed on, as the cap counts it."""
    stats = diff_trees(merge.parents[0].tree, merge.parents[1].tree).stats
    return int(stats.insertions + stats.deletions)
