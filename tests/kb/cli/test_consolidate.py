"""``kb consolidate``: --plan changes nothing, a run reports coverage, status, --json,
--if-needed, and a bad scope is one line with the usage exit code."""

from __future__ import annotations

import json
from pathlib import Path

from kb.errors import UsageError
from tests.kb.cli.helpers import assert_one_error
from tests.pipeline.consolidate.seeded import seed


def test_plan_then_run_then_status_and_if_needed(cli, tmp_path: Path) -> None:
    repo, _ = seed(tmp_path / "kb")
    head = str(repo.git.head.target)
    plan = cli("consolidate", "--plan", "--batch-size", "4", cwd=repo.root)
    assert plan.code == 0, plan.err
    assert "- duplicates:knowledge: 6 page(s) to change" in plan.out and "[index]" in plan.out
    # structure upkeep shows in the plan: the oversized page's split, the tiny page's merge, the stale outline
    assert (
        "[oversized] knowledge/policies/shipping.md: 319 tokens (budget 200): split into knowledge/policies/shipping-delivery" in plan.out
    )
    assert "[tiny] knowledge/policies/pricing-students.md: 1 claim(s): merged into knowledge/policies/pricing.md" in plan.out
    assert "[l1] knowledge/policies/warranty.md: the Overview's outline named gone section(s) claims; missed batteries" in plan.out
    assert str(repo.git.head.target) == head and sorted(repo.git.branches.local) == ["main"]  # the plan changed nothing

    run = cli("consolidate", "--batch-size", "4", "--json", "--no-index", cwd=repo.root)
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert data["status"] == "complete" and data["coverage"]["percent"] == 100.0 and len(data["merged"]) >= 5

    status = cli("consolidate", "status", cwd=repo.root)
    assert status.code == 0 and ": complete, coverage 100%" in status.out and "merged" in status.out

    again = cli("consolidate", "--if-needed", cwd=repo.root)
    assert again.code == 0 and again.out.startswith("no consolidation needed"), again.out


def test_a_bad_scope_is_a_usage_error(cli, tmp_path: Path) -> None:
    repo, _ = seed(tmp_path / "kb")
    assert_one_error(cli("consolidate", "--scope", "elsewhere", cwd=repo.root), UsageError.exit_code, "invalid scope 'elsewhere'")
    assert_one_error(
        cli("consolidate", "--scope", "users/nobody", cwd=repo.root), UsageError.exit_code, "scope 'users/nobody' has no pages"
    )


def test_the_consolidation_section_is_validated_strictly() -> None:
    import pytest

    from kb.config import parse_config
    from kb.errors import ConfigError

    config = parse_config("version: 1\nconsolidation:\n  batch_pages: 10\n  if_needed: {days: 7}\n")
    assert config.consolidation.batch_pages == 10 and config.consolidation.if_needed.days == 7
    with pytest.raises(ConfigError, match="unknown key `consolidation.if_needed.weeks`"):
        parse_config("version: 1\nconsolidation:\n  if_needed: {weeks: 2}\n")
    with pytest.raises(ConfigError, match="consolidation.batch_pages"):
        parse_config("version: 1\nconsolidation:\n  batch_pages: 0\n")


def test_if_needed_starts_a_cycle_when_new_evidence_passes_the_threshold(cli, tmp_path: Path) -> None:
    from tests.builders import add_evidence, commit

    repo, _ = seed(tmp_path / "kb")
    assert cli("consolidate", "--no-index", cwd=repo.root).code == 0
    text = (
        (repo.root / "kb.config.yaml").read_text().replace("consolidation:\n", "consolidation:\n  if_needed: {new_evidence: 1, days: 0}\n")
    )
    commit(repo, {"kb.config.yaml": text}, "config")
    assert cli("consolidate", "--if-needed", cwd=repo.root).out.startswith("no consolidation needed")
    add_evidence(repo, b"# Note\nThe canteen closes at 3pm.\n", "note.md", "document")
    result = cli("consolidate", "--if-needed", "--no-index", cwd=repo.root)
    assert result.code == 0 and result.out.startswith("consolidation needed: 1 new evidence item(s)"), result.out


def test_the_plan_says_what_offline_skips_and_status_lists_disputed_pages(cli, tmp_path: Path) -> None:
    from tests.pipeline.consolidate.test_model_jobs import repo_with
    from tests.pipeline.consolidate.test_revision import seed as seed_one_page_conflict

    repo, _ = repo_with(tmp_path / "para", {"refunds": ([("Refunds are allowed.", 1)], "")})
    plan = cli("consolidate", "--plan", cwd=repo.root)
    assert plan.code == 0, plan.err
    assert "    skipped: re-verification: 1 claim(s) in other words than their quote: meaning not re-checked (needs a model)" in plan.out

    repo = seed_one_page_conflict(tmp_path / "kb")
    run = cli("consolidate", "--no-index", cwd=repo.root)
    assert run.code == 0 and ": complete, coverage 100%" in run.out, run.err
    status = cli("consolidate", "status", cwd=repo.root)
    assert "disputed, for a person to decide: knowledge/policies/hours.md" in status.out


def test_if_needed_starts_a_cycle_after_new_sessions_of_one_user(cli, tmp_path: Path) -> None:
    """Sessions count per user: two of alice pass a threshold of 2, one of alice and one of bob do not."""
    from tests.builders import add_conversation, commit

    repo, _ = seed(tmp_path / "kb")
    assert cli("consolidate", "--no-index", cwd=repo.root).code == 0
    text = (repo.root / "kb.config.yaml").read_text()
    text = text.replace("consolidation:\n", "consolidation:\n  if_needed: {new_evidence: 0, new_sessions: 2, days: 0}\n")
    commit(repo, {"kb.config.yaml": text}, "config")
    add_conversation(repo, [{"role": "user", "content": "I moved to Porto in May."}], user="alice", name="a1.json")
    add_conversation(repo, [{"role": "user", "content": "I adopted a cat."}], user="bob", name="b1.json")
    quiet = cli("consolidate", "--if-needed", cwd=repo.root)
    assert quiet.code == 0 and quiet.out.startswith("no consolidation needed"), quiet.out
    add_conversation(repo, [{"role": "user", "content": "My cat is called Miso."}], user="alice", name="a2.json")
    result = cli("consolidate", "--if-needed", "--no-index", cwd=repo.root)
    assert result.code == 0, result.err
    assert result.out.startswith("consolidation needed: 2 new session(s) of user alice since the last cycle (threshold 2)"), result.out
    assert "user bob" not in result.out
