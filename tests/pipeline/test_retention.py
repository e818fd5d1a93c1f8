"""`kb retention apply`: evidence older than its configured age is forgotten through the
forget machinery in one forgetting (a clock is injected to age the items); younger items and
kinds without a rule stay; a bad rule is refused with one line. Memory pages expire by the
``memory`` rule or their user's scope rule, counted from their last change; the folder index
stops listing them; shared knowledge never expires by age."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

from ci.run import run_checks
from kb.clock import utc_now
from kb.config import load_config
from kb.errors import ConfigError
from kb.evidence import ledger_at, verify_chain
from kb.repo import Repo
from kb.scaffold import init_repository
from pipeline.forget import verify_all
from pipeline.retention import apply_retention, expired_items, expired_pages
from tests.builders import add_evidence, commit, make_sample_repo

LOG_LINE = "probe 7731: disk /dev/sdb2 answered in 412 ms"


def _repo(tmp: Path, rules: str) -> tuple[Repo, str, str]:
    repo = init_repository(tmp / "kb")
    config = (repo.root / "kb.config.yaml").read_text(encoding="utf-8") + rules
    commit(repo, {"kb.config.yaml": config}, "config: retention\n")
    tool = add_evidence(repo, f"# Probe\n\n{LOG_LINE}\n".encode(), "probe.log", "tool-output", None)
    doc = add_evidence(repo, b"# Travel\n\nBook trains for trips under four hours.\n", "travel.md", "document", None)
    return repo, tool, doc


def _in_days(days: int):  # type: ignore[no-untyped-def]
    return lambda: utc_now() + dt.timedelta(days=days)


def test_expired_items_are_forgotten_in_one_forgetting(tmp_path: Path) -> None:
    repo, tool, doc = _repo(tmp_path, "retention:\n  tool-output: 30d\n  document: 365d\n")
    assert expired_items(repo, _in_days(10)) == []
    head = repo.head().id
    expired, result = apply_retention(repo, dry_run=True, now=_in_days(40))
    assert [e.entry.id for e in expired] == [tool] and expired[0].rule == "tool-output" and result is not None
    assert repo.head().id == head  # a dry run changes nothing

    expired, result = apply_retention(repo, now=_in_days(40))
    assert result is not None and result.record is not None and result.record["result"] == "clean"
    assert result.plan["kind"] == "retention"
    ledger = ledger_at(repo, repo.head())
    assert tool not in {e.id for e in ledger} and doc in {e.id for e in ledger}
    assert [e.kind for e in ledger].count("forget") == 1 and ledger[-1].meta["target"] == "retention"
    objects = subprocess.run(["git", "-C", str(repo.root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True)
    assert LOG_LINE.encode() not in objects.stdout and b"four hours" in objects.stdout
    assert verify_chain(ledger) == [] and run_checks(repo).ok
    assert [r["result"] for r in verify_all(repo)] == ["clean"]
    assert apply_retention(repo, now=_in_days(40)) == ([], None)  # nothing left to expire


def test_the_shortest_age_that_applies_wins_and_scopes_count(tmp_path: Path, cli) -> None:
    repo, tool, doc = _repo(tmp_path, "retention:\n  document: 365d\n  system: 20d\n")
    expired = expired_items(repo, _in_days(25))
    assert sorted(e.entry.id for e in expired) == sorted([tool, doc]) and {e.rule for e in expired} == {"system"}
    result = cli("--repo", str(repo.root), "retention", "apply", "--dry-run")
    assert result.code == 0 and "nothing has expired" in result.out  # the real clock: added today


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ("retention:\n  chats: 30d\n", "'chats' is neither an evidence kind"),
        ("retention:\n  memories: 30d\n", r"nor a scope \(system, user:<id>\), nor memory"),
        ("retention:\n  tool-output: 30 days\n", "is not an age in days"),
    ],
)
def test_a_bad_rule_is_refused(tmp_path: Path, rules: str, message: str) -> None:
    repo = init_repository(tmp_path / "kb")
    (repo.root / "kb.config.yaml").write_text((repo.root / "kb.config.yaml").read_text() + rules)
    with pytest.raises(ConfigError, match=message):
        load_config(repo.root)


PREFERENCE = "Alice prefers window seats and is vegetarian."


def _sample(tmp: Path, rules: str) -> tuple[Repo, dict[str, str]]:
    repo, ids = make_sample_repo(tmp / "kb")
    config = (repo.root / "kb.config.yaml").read_text(encoding="utf-8") + rules
    commit(repo, {"kb.config.yaml": config}, "config: retention\n")
    return repo, ids


def _objects(repo: Repo) -> bytes:
    return subprocess.run(
        ["git", "-C", str(repo.root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout


def test_memory_pages_expire_by_the_memory_rule_and_their_evidence_stays(tmp_path: Path) -> None:
    repo, ids = _sample(tmp_path, "retention:\n  memory: 30d\n  conversation: 365d\n")
    assert expired_pages(repo, _in_days(10)) == []
    pages = expired_pages(repo, _in_days(40))
    assert [(p.path, p.rule, p.limit_days) for p in pages] == [("users/alice/preferences.md", "memory", 30)]
    assert pages[0].age_days in (39, 40)

    expired, result = apply_retention(repo, now=_in_days(40))
    assert [getattr(e, "path", None) for e in expired] == ["users/alice/preferences.md"]
    assert result is not None and result.record is not None and result.record["result"] == "clean"
    assert result.plan["deleted_pages"] == ["users/alice/preferences.md"] and result.plan["evidence"] == []
    assert not (repo.root / "users/alice/preferences.md").exists()
    index = (repo.root / "users/alice/index.md").read_text(encoding="utf-8")
    assert "users/alice/preferences" not in index  # the folder index no longer lists it
    assert ids["chat"] in {e.id for e in ledger_at(repo, repo.head())}  # the conversation is younger than 365 days
    assert (repo.root / "knowledge/travel/visas.md").exists()  # shared knowledge never expires by age
    everything = _objects(repo)
    assert b"Prefers window seats.[^1]" not in everything and b"Schengen" in everything
    assert run_checks(repo).ok and verify_chain(ledger_at(repo, repo.head())) == []
    assert [r["result"] for r in verify_all(repo)] == ["clean"]
    assert apply_retention(repo, now=_in_days(40)) == ([], None)


def test_a_user_scope_rule_expires_the_users_evidence_and_pages(tmp_path: Path) -> None:
    repo, ids = _sample(tmp_path, "retention:\n  user:alice: 30d\n")
    expired, result = apply_retention(repo, dry_run=True, now=_in_days(40))
    assert sorted(getattr(e, "path", "") or e.entry.id for e in expired) == sorted([ids["chat"], "users/alice/preferences.md"])
    assert result is not None and result.dry_run and (repo.root / "users/alice/preferences.md").exists()

    expired, result = apply_retention(repo, now=_in_days(40))
    assert result is not None and result.record is not None and result.record["result"] == "clean"
    ledger = ledger_at(repo, repo.head())
    assert ids["chat"] not in {e.id for e in ledger} and ids["doc"] in {e.id for e in ledger}
    assert not (repo.root / "users/alice/preferences.md").exists() and run_checks(repo).ok


def test_retention_apply_lists_expired_pages(tmp_path: Path, cli) -> None:
    repo, _ids = _sample(tmp_path, "retention:\n  memory: 1d\n")
    result = cli("--repo", str(repo.root), "retention", "apply", "--dry-run")
    assert result.code == 0 and "nothing has expired" in result.out  # changed today
    config = load_config(repo.root)
    assert config.retention == {"memory": "1d"}
