"""Review notes that `kb merge` must not take for a review (issue 11, "What was forgeable").

Each test writes the forged note the way a hostile or careless person would (by hand, with the
note API, or copying a real one), then runs the real `kb merge` and checks the one-line refusal,
its exit code, and that neither main nor the branch moved.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.protocols import AgentIdentity
from kb.repo import Repo
from kb.signing import SIGNERS_FILE, SigningKey, load_or_create_key, sign, verify
from pipeline.loop import run_loop
from pipeline.propose import propose, trailers_for
from pipeline.records import REVIEWS_REF, ReviewRecord, ReviewSigner, add_review, parse_trailers, reviews_of
from pipeline.workspace import open_workspace
from tests.agents.scripted import Call, scripted_provider
from tests.conftest import CliResult

OFFLINE_REVIEWER = ("kb-offline/deterministic", "kb-deterministic")
EXTRACTIVE = AgentIdentity("kb-offline/extractive", "kb-extractive")
T1, T2 = "2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z"


@dataclass(frozen=True)
class Work:
    """A work branch as the tests forge notes for it."""

    branch: str
    head: str
    base: str
    proposer: AgentIdentity = EXTRACTIVE
    evidence_ids: tuple[str, ...] = ()


def record(proposal: Work, verdict: str = "approve", at: str = T1, **fields: str) -> ReviewRecord:
    """A review of the proposal's head as `kb review` would record it, before signing."""
    data = {
        "branch": proposal.branch,
        "head": proposal.head,
        "base": proposal.base,
        "round": 1,
        "verdict": verdict,
        "reviewer_model": OFFLINE_REVIEWER[0],
        "reviewer_family": OFFLINE_REVIEWER[1],
        "proposer_model": proposal.proposer.model,
        "proposer_family": proposal.proposer.family,
        "at": at,
    }
    return ReviewRecord(**(data | fields))


def write_note(repo: Repo, commit: str, text: str) -> None:
    """A note written by hand (what `git notes --ref kb-reviews add -f -m TEXT COMMIT` does)."""
    sig = repo.signature()
    repo.git.create_note(text, sig, sig, commit, REVIEWS_REF, True)


def refused(result: CliResult, code: int, words: str) -> None:
    assert result.code == code, f"exit {result.code}, wanted {code}: {result.err}{result.out}"
    lines = result.err.strip().splitlines()
    assert lines[0].startswith("error: ") and words in lines[0], lines[0]
    assert len(lines) <= 2 and "Traceback" not in result.err and "crash" not in result.err


@pytest.fixture
def proposed(sample_repo: tuple[Repo, dict[str, str]]) -> tuple[Repo, Work]:
    repo, ids = sample_repo
    proposal = propose(repo, [ids["s1"]])
    assert proposal.head is not None
    return repo, Work(proposal.branch, proposal.head, proposal.base, proposal.proposer, proposal.evidence_ids)


def merge_refused(cli: Callable[..., CliResult], repo: Repo, proposal: Work, code: int, words: str) -> None:
    main_before = repo.head().id
    refused(cli("merge", proposal.branch, "--no-index", cwd=repo.root), code, words)
    repo = Repo(repo.root)
    assert repo.head().id == main_before and repo.dirty_paths() == []
    assert str(repo.git.branches.local[proposal.branch].peel().id) == proposal.head


# ---- a malformed note -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("note", "words"),
    [
        ('{"verdict": "approve"}', "does not match the review schema: missing branch, head, base"),
        ("approved, trust me", "is not valid JSON"),
        ('["approve"]', "is a str, not a JSON object"),
        ("ROUND", "round: Input should be a valid integer"),
        ("UNKNOWN", "signed_off: Unexpected keyword argument"),
        ("AT", "at: Value error"),
    ],
)
def test_a_malformed_note_is_a_clear_error_never_a_crash(cli, proposed: tuple[Repo, Work], note: str, words: str) -> None:
    repo, proposal = proposed
    good = record(proposal).to_json()
    if note == "ROUND":
        note = json.dumps(good | {"round": "1"})
    elif note == "UNKNOWN":
        note = json.dumps(good | {"signed_off": True})
    elif note == "AT":
        note = json.dumps(good | {"at": "yesterday"})
    write_note(repo, proposal.head, note)
    merge_refused(cli, repo, proposal, 11, words)


# ---- the latest verdict of each reviewer on the exact head decides ----------------------------


@pytest.mark.parametrize(
    "order",
    [
        [("approve", T1), ("request_changes", T2)],  # approved, then the same reviewer asked for changes
        [("request_changes", T2), ("approve", T1)],  # an older approval appended after the refusal
        [("request_changes", "2025-01-01T01:00:00"), ("approve", "2025-01-01T02:00:00+03:00")],  # by time, not text: 23:00Z is earlier
    ],
)
def test_an_approval_does_not_outweigh_a_later_request_for_changes(cli, proposed: tuple[Repo, Work], order) -> None:
    repo, proposal = proposed
    signer = ReviewSigner(repo)
    for verdict, at in order:
        add_review(repo, signer.sign(record(proposal, verdict, at)))
    merge_refused(cli, repo, proposal, 13, "latest verdict of kb-offline/deterministic")


def test_a_later_approval_by_the_same_reviewer_decides(cli, proposed: tuple[Repo, Work]) -> None:
    repo, proposal = proposed
    signer = ReviewSigner(repo)
    add_review(repo, signer.sign(record(proposal, "request_changes", T1)))
    add_review(repo, signer.sign(record(proposal, "approve", T2)))
    result = cli("merge", proposal.branch, "--no-index", cwd=repo.root)
    assert result.code == 0, result.err
    assert parse_trailers(Repo(repo.root).head().message)["Kb-Verdicts"] == "r1:request_changes, r1:approve"


# ---- a hand-written approval of what only the model Reviewer rejects --------------------------

MODEL_REVIEWER = "  reviewer: {model: scripted/reviewer, family: scripted-b}\n"


def other_key(tmp_path: Path) -> SigningKey:
    key, created = load_or_create_key(tmp_path / "stranger_ed25519")
    assert created
    return key


@pytest.mark.parametrize("forgery", ["unsigned", "stranger", "edited"])
def test_a_forged_approval_does_not_merge_what_the_reviewer_rejected(cli, sample_repo, tmp_path: Path, forgery: str) -> None:
    repo, ids = sample_repo
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text().replace("  allow_same_family: false", MODEL_REVIEWER + "  allow_same_family: false"))
    repo.commit_worktree_paths(["kb.config.yaml"], "configure a model reviewer\n")
    repo = Repo(repo.root)
    proposed = propose(repo, [ids["s1"]])
    assert proposed.head is not None
    proposal = Work(proposed.branch, proposed.head, proposed.base, proposed.proposer)
    comment = {
        "path": "users/alice/profile.md",
        "line": 1,
        "message": "The page says more than the session does.",
        "fault": "over_generalisation",
        "evidence": f"{ids['s1']}#L2",
    }
    reply = [Call("comment", json.dumps(comment)), Call("verdict", json.dumps({"verdict": "request_changes", "summary": "Overstated."}))]
    with scripted_provider({"reviewer": reply}):
        assert cli("review", proposal.branch, cwd=repo.root).code == 1
    genuine = reviews_of(repo, proposal.head)[0]
    assert genuine.verdict == "request_changes" and genuine.signature.startswith("-----BEGIN SSH SIGNATURE-----")
    merge_refused(cli, repo, proposal, 13, "latest verdict of scripted/reviewer")
    approval = ReviewRecord(**(genuine.to_json() | {"verdict": "approve", "at": "2999-01-01T00:00:00Z"}))
    if forgery == "unsigned":  # written by hand: no signature at all
        forged = ReviewRecord(**(approval.to_json() | {"signer": "", "signature": ""}))
        words = "is not signed"
    elif forgery == "stranger":  # signed properly, by a key main does not allow
        unsigned = ReviewRecord(**(approval.to_json() | {"signer": "mallory@example.invalid", "signature": ""}))
        forged = ReviewRecord(**(unsigned.to_json() | {"signature": sign(other_key(tmp_path), unsigned.payload())}))
        words = "not an allowed signer"
    else:  # the genuine record and signature, with the verdict and time changed
        forged = approval
        words = "does not verify"
    add_review(repo, forged)
    merge_refused(cli, repo, proposal, 14, words)


# ---- note fields that do not match the commit they annotate ----------------------------------


@pytest.mark.parametrize(
    "field",
    ["head", "branch", "base", "proposer_model", "proposer_family", "reviewer"],
)
def test_a_signed_note_that_does_not_match_its_commit_is_refused(cli, proposed: tuple[Repo, Work], field: str) -> None:
    repo, proposal = proposed
    changes = {
        "head": {"head": proposal.base},  # a genuine approval of another commit, copied here
        "branch": {"branch": "kb/another-branch"},
        "base": {"base": proposal.head},
        "proposer_model": {"proposer_model": "openai/gpt-5"},
        "proposer_family": {"proposer_family": "openai"},
        "reviewer": {"reviewer_model": "anthropic/claude-sonnet-4-5", "reviewer_family": "anthropic"},
    }[field]
    signed = ReviewSigner(repo).sign(record(proposal, **changes))
    write_note(repo, proposal.head, json.dumps([signed.to_json()]))  # on the head, whatever the note says
    words = "names reviewer anthropic/claude-sonnet-4-5" if field == "reviewer" else f"says {field} "
    merge_refused(cli, repo, proposal, 15, words)


# ---- a branch without proposer provenance -----------------------------------------------------


def test_a_branch_without_proposer_trailers_is_refused(cli, sample_repo) -> None:
    repo, _ = sample_repo
    workspace = open_workspace(repo, "kb/by-hand")
    index = workspace.read_text("knowledge/index.md")
    workspace.write_page(
        "knowledge/index.md", index.replace("Shared knowledge of this repository.", "The shared knowledge of this repository.")
    )
    head = workspace.commit("Reword the knowledge index")  # no Kb-Proposer-* trailers
    base = str(repo.head().id)
    note = ReviewRecord("kb/by-hand", head, base, 1, "approve", *OFFLINE_REVIEWER, "unknown", "unknown", T1)
    add_review(repo, ReviewSigner(repo).sign(note))
    assert head is not None
    proposal = Work("kb/by-hand", head, base)
    merge_refused(cli, repo, proposal, 16, "has no proposer provenance")


# ---- the deterministic Reviewer, again at merge -----------------------------------------------


def test_the_deterministic_reviewer_refuses_at_merge_whatever_the_notes_say(cli, sample_repo) -> None:
    repo, ids = sample_repo
    assert run_loop(repo, ids=[ids["policy"]], build_index=False).merge is not None
    path = "knowledge/travel-policy.md"
    base = str(repo.head().id)
    workspace = open_workspace(repo, "kb/tidy-policy")
    kept = [line for line in workspace.read_text(path).splitlines() if "meal allowance" not in line]
    workspace.write_page(path, "\n".join(kept) + "\n")
    head = workspace.commit("Tidy the policy", trailers_for((ids["policy"],), base, EXTRACTIVE, 1))
    assert head is not None
    proposal = Work("kb/tidy-policy", head, base)
    add_review(repo, ReviewSigner(repo).sign(record(proposal)))  # a genuine key, used without `kb review`
    merge_refused(cli, repo, proposal, 17, "the deterministic Reviewer does not approve")


# ---- who may sign ---------------------------------------------------------------------------


def test_a_branch_that_changes_the_allowed_signers_is_refused(cli, proposed: tuple[Repo, Work], tmp_path: Path) -> None:
    repo, proposal = proposed
    workspace = open_workspace(repo, proposal.branch, create=False)
    signers = workspace.root / SIGNERS_FILE
    signers.write_text(signers.read_text() + f"mallory@example.invalid {other_key(tmp_path).public}\n")
    trailers = trailers_for(proposal.evidence_ids, proposal.base, proposal.proposer, 1)
    message = "Allow another reviewer\n\n" + "".join(f"{k}: {v}\n" for k, v in trailers.items())
    head = str(workspace.view.commit_worktree_paths([SIGNERS_FILE], message))
    moved = Work(proposal.branch, head, proposal.base, proposal.proposer, proposal.evidence_ids)
    add_review(repo, ReviewSigner(repo).sign(record(moved)))
    merge_refused(cli, repo, moved, 14, f"changes {SIGNERS_FILE}")


def test_review_refuses_without_an_allowed_key_and_writes_no_note(
    cli, proposed: tuple[Repo, Work], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, proposal = proposed
    monkeypatch.setenv("KB_SIGNING_KEY", str(tmp_path / "absent"))
    refused(cli("review", proposal.branch, cwd=repo.root), 14, "no review signing key")
    other_key(tmp_path)
    monkeypatch.setenv("KB_SIGNING_KEY", str(tmp_path / "stranger_ed25519"))
    refused(cli("review", proposal.branch, cwd=repo.root), 14, "is not an allowed signer")
    with pytest.raises(KeyError):
        repo.git.lookup_note(proposal.head, REVIEWS_REF)


def test_keygen_allows_a_new_key_on_main_once(cli, proposed: tuple[Repo, Work], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, proposal = proposed
    key_file = tmp_path / "config" / "kb" / "review_ed25519"
    monkeypatch.setenv("KB_SIGNING_KEY", str(key_file))
    first = cli("keygen", "--principal", "reviewer@ci.example", cwd=repo.root)
    assert first.code == 0, first.err
    assert "created" in first.out and "reviewer@ci.example" in first.out
    assert key_file.stat().st_mode & 0o777 == 0o600
    head = Repo(repo.root).head()
    line = repo.read_at(head, SIGNERS_FILE).decode().splitlines()[-1]
    assert line.startswith('reviewer@ci.example namespaces="kb-review" ssh-ed25519 ')
    again = cli("keygen", "--principal", "reviewer@ci.example", cwd=repo.root)
    assert again.code == 0 and "already allowed" in again.out and Repo(repo.root).head().id == head.id
    assert cli("review", proposal.branch, cwd=repo.root).code == 0
    assert reviews_of(repo, proposal.head)[-1].signer == "reviewer@ci.example"
    assert cli("merge", proposal.branch, "--no-index", cwd=repo.root).code == 0


def test_the_merge_record_keeps_verifiable_signatures(sample_repo) -> None:
    repo, ids = sample_repo
    result = run_loop(repo, ids=[ids["s1"]], build_index=False)
    assert result.merge is not None
    merged = json.loads(repo.read_at(repo.head(), result.merge.record_path))
    review = ReviewRecord(**merged["reviews"][0])
    allowed = repo.read_at(repo.head(), SIGNERS_FILE).decode()
    assert verify(review.signature, review.payload()) in allowed
    assert review.signer == "kb-tests@example.invalid"
