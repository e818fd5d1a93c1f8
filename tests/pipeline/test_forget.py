"""`kb forget` on a repository with two users and shared knowledge, built by the real ingest
(offline agents, gate, signed reviews, merge, index): visibility revoked before any rebuild,
then no byte of the forgotten material in any git object, under .kb/ or in the index; the other
user and shared knowledge unchanged and searchable; checks and the ledger chain still pass."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agents.read_tools import RepoReader
from ci.run import run_checks
from kb.errors import NotFoundError
from kb.evidence import ledger_at, show_item, verify_chain
from kb.forgotten import load_key
from kb.memory_context import build_context
from kb.repo import Repo
from kb.retrieval.reading import grep, read_page
from kb.retrieval.search import make_query, search
from kb.scaffold import init_repository
from pipeline.forget import Target, apply_head_change, complete, plan_forget, purge_derived, revoke, rewrite_history, scan
from pipeline.memory import ingest
from tests.builders import add_file, commit, write_chat

ALICE_1 = [
    ("user", "I live in Lyon and my SSN is 078-05-1120."),
    ("user", "My card number is 4111 1111 1111 1111 and I am allergic to peanuts."),
]
ALICE_2 = [("user", "I started learning the cello with Madame Girardot-Pons last spring.")]
BOB = [("user", "I live in Oslo and my car is a 2020 Volvo XC40.")]
ALICE_SECRETS = ("078-05-1120", "4111 1111 1111 1111", "allergic to peanuts", "Girardot-Pons")


def _two_users(tmp: Path) -> Repo:
    repo = init_repository(tmp / "kb")
    # what is forgotten here must first be stored: SSNs and cards are kept, not masked at ingest
    config = (repo.root / "kb.config.yaml").read_text(encoding="utf-8")
    config = config.replace("  ssn: mask\n  card: mask\n", "  ssn: keep\n  card: keep\n")
    assert "card: keep" in config
    commit(repo, {"kb.config.yaml": config}, "config: keep SSNs and cards\n")
    add_file(repo, "travel-policy.md", "document")
    a1 = write_chat(tmp / "a1.json", ALICE_1, "2024-03-01T10:00:00Z")
    a2 = write_chat(tmp / "a2.json", ALICE_2, "2024-04-02T10:00:00Z")
    ingest(repo, "alice", [a1, a2])
    ingest(repo, "bob", [write_chat(tmp / "b.json", BOB, "2024-05-05T08:00:00Z")])
    return repo


def _all_bytes(repo: Repo) -> bytes:
    """Every git object (reachable or not) and every file under .kb/ but the forget records."""
    objects = subprocess.run(["git", "-C", str(repo.root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True)
    files = b"".join(p.read_bytes() for p in (repo.root / ".kb").rglob("*") if p.is_file() and "forget" not in p.parts)
    return objects.stdout + files


def _files_under(repo: Repo, prefix: str) -> dict[str, bytes]:
    return {p.relative_to(repo.root).as_posix(): p.read_bytes() for p in (repo.root / prefix).rglob("*") if p.is_file()}


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return _two_users(tmp_path)


def test_forget_user_revokes_at_once_then_removes_every_copy(repo: Repo, cli) -> None:
    alice_ids = [e.id for e in ledger_at(repo, repo.head()) if e.scope == "user:alice"]
    bob_before = _files_under(repo, "users/bob")
    shared_before = _files_under(repo, "knowledge")
    assert all(s.encode() in _all_bytes(repo) for s in ALICE_SECRETS)

    plan = plan_forget(repo, Target(user="alice"), load_key(repo, create=True) or b"")
    revoke(repo, plan)
    # Revoked before any rebuild: the serving index still holds the text, no read returns it.
    assert b"078-05-1120" in _all_bytes(repo)
    hits = search(repo, make_query("Lyon SSN card peanuts cello", "user:alice", k=20, include_evidence=True))
    assert not [h for h in hits if h.scope == "user:alice"] and not any("078-05" in h.text for h in hits)
    with pytest.raises(NotFoundError):
        read_page(repo, "users/alice/profile", "user:alice")
    assert grep(repo, "078-05-1120", "user:alice").hits == ()
    with pytest.raises(NotFoundError):
        show_item(repo, alice_ids[0])
    reader = RepoReader(repo, repo, "user:alice", lambda: "")
    with pytest.raises(NotFoundError):
        reader.read_evidence(alice_ids[0])
    assert "users/alice" not in reader.list_pages()
    assert "078-05" not in build_context(repo, "alice", "What is my SSN?", budget=1500).text()

    apply_head_change(repo, plan)
    rewrite_history(repo, plan)
    purge_derived(repo, plan)
    report = scan(repo, plan.fingerprints)
    assert report.clean and report.objects > 20 and report.files > 3
    complete(repo, plan, report)

    everything = _all_bytes(repo)
    assert not [s for s in ALICE_SECRETS if s.encode() in everything]
    assert not (repo.root / "users/alice").exists()
    assert _files_under(repo, "users/bob") == bob_before and _files_under(repo, "knowledge") == shared_before
    assert [h.id for h in search(repo, make_query("Oslo Volvo", "user:bob", k=3))][0] == "users/bob/profile"
    assert "Volvo" in build_context(repo, "bob", "What car do I drive?", budget=1500).text()
    assert run_checks(repo).ok
    for line in subprocess.run(["git", "-C", str(repo.root), "rev-list", "--all"], capture_output=True, text=True).stdout.split():
        assert verify_chain(ledger_at(repo, repo.resolve(line))) == []
    ledger = ledger_at(repo, repo.head())
    assert not set(alice_ids) & {e.id for e in ledger} and [e.kind for e in ledger].count("forgotten") == 2
    assert ledger[-1].kind == "forget" and ledger[-1].meta["evidence"] == 2 and "alice" not in ledger[-1].to_line()
    result = cli("--repo", str(repo.root), "forget", "--verify")
    assert result.code == 0 and "clean" in result.out


def test_forget_one_evidence_item_removes_its_claims_only(repo: Repo, cli) -> None:
    first = next(
        e.id for e in ledger_at(repo, repo.head()) if e.scope == "user:alice" and e.meta.get("session_date", "").startswith("2024-03")
    )
    result = cli("--repo", str(repo.root), "forget", first)
    assert result.code == 0, result.err
    assert "verification: clean" in result.out
    everything = _all_bytes(repo)
    assert b"078-05-1120" not in everything and b"4111 1111 1111 1111" not in everything
    assert b"Girardot-Pons" in everything  # the other item of alice and its claims stay
    assert read_page(repo, "users/alice/index", "user:alice")
    assert run_checks(repo).ok and verify_chain(ledger_at(repo, repo.head())) == []
    assert "Girardot-Pons" in search(repo, make_query("cello teacher", "user:alice", k=3, include_evidence=True))[0].text + str(
        [h.text for h in search(repo, make_query("cello teacher", "user:alice", k=5, include_evidence=True))]
    )


def test_forget_match_redacts_the_text_and_keeps_the_item(repo: Repo, cli) -> None:
    result = cli("--repo", str(repo.root), "forget", "--match", "4111 1111 1111 1111")
    assert result.code == 0, result.err
    everything = _all_bytes(repo)
    assert b"4111 1111 1111 1111" not in everything
    assert b"078-05-1120" in everything  # only the text goes, not the rest of the item
    entry = next(e for e in ledger_at(repo, repo.head()) if e.kind == "conversation" and e.scope == "user:alice" and e.lines == 2)
    assert "[forgotten]" in (repo.root / entry.path).read_text()
    assert run_checks(repo).ok  # the item matches its recorded (new) hash; the chain verifies
    assert cli("--repo", str(repo.root), "forget", "--verify").code == 0


def test_dry_run_changes_nothing_and_bad_targets_are_refused(repo: Repo, cli) -> None:
    head = repo.head().id
    result = cli("--repo", str(repo.root), "forget", "--user", "alice", "--dry-run")
    assert (
        result.code == 0 and "would forget (user): 2 evidence item(s)" in result.out and "delete page users/alice/profile.md" in result.out
    )
    assert repo.head().id == head and not (repo.root / ".kb/forget/denied.json").exists()
    assert search(repo, make_query("Lyon", "user:alice", k=3))
    result = cli("--repo", str(repo.root), "forget")
    assert result.code == 2 and "exactly one of" in result.err
    result = cli("--repo", str(repo.root), "forget", "--user", "carol")
    assert result.code == 6 and "no evidence and no pages for user 'carol'" in result.err
    result = cli("--repo", str(repo.root), "forget", "--match", "ab")
    assert result.code == 2 and "at least 4 characters" in result.err


@pytest.mark.parametrize("stop", ["revoked", "committed", "rewritten"])
def test_an_interrupted_forget_is_resumed_by_the_same_command(repo: Repo, cli, stop: str) -> None:
    plan = plan_forget(repo, Target(user="alice"), load_key(repo, create=True) or b"")
    revoke(repo, plan)
    if stop != "revoked":
        apply_head_change(repo, plan)
    if stop == "rewritten":
        rewrite_history(repo, plan)
    (repo.root / "users/bob/profile.md").write_text("half-written\n")  # what a killed run may leave
    result = cli("--repo", str(repo.root), "forget", "--user", "alice")
    assert result.code == 0 and "verification: clean" in result.out, result.out + result.err
    assert (repo.root / ".kb/forget/denied.json").read_text().strip() == "{}"  # the deny entry lifted
    records = sorted((repo.root / ".kb/forget").glob("fg-*.json"))
    assert [r.stem for r in records] == [plan.op]  # the same forgetting finished, not a second one
    assert not [s for s in ALICE_SECRETS if s.encode() in _all_bytes(repo)]
    assert [e.kind for e in ledger_at(repo, repo.head())].count("forget") == 1
    assert run_checks(repo).ok and not repo.dirty_paths()
    again = cli("--repo", str(repo.root), "forget", "--user", "alice")  # after completion: verified again
    assert again.code == 0 and "verification: clean" in again.out
