"""`kb run` with configured models, driven end to end by scripted replies delivered through
litellm's custom-provider interface (the real adapter, tool-calling and loop code runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.markdown import format_citation
from kb.repo import Repo
from kb.scaffold import init_repository
from pipeline.records import parse_trailers, reviews_of, status_of
from tests.agents.scripted import Call, scripted_provider
from tests.builders import SAMPLES, add_evidence, page_text

MODELS = """  proposer: {model: scripted/proposer, family: scripted-a}
  reviewer: {model: scripted/reviewer, family: scripted-b}
"""


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Repo, str]:
    repo = init_repository(tmp_path / "kb")
    ev = add_evidence(repo, (SAMPLES / "alice-2025-03-02.json").read_bytes(), "alice.json", "conversation", "alice")
    config = repo.root / "kb.config.yaml"
    config.write_text(
        config.read_text()
        .replace("  allow_same_family: false", MODELS + "  allow_same_family: false")
        .replace("max_rounds: 3", "max_rounds: 2")
    )
    repo.commit_worktree_paths(["kb.config.yaml"], "configure scripted models\n")
    return Repo(repo.root), ev


def food_page(ev: str, claim: str = "Alice does not drink alcohol.") -> str:
    body = (
        f"# Alice's food and drink\n\n- {claim}[^1]\n- Alice is vegetarian.[^2]\n\n"
        + format_citation("1", ev, 5, 5, "I do not drink alcohol")
        + "\n"
        + format_citation("2", ev, 5, 5, "I am vegetarian")
        + "\n"
    )
    return page_text(
        "users/alice/food",
        "Alice's food and drink",
        "Alice is vegetarian and does not drink alcohol.",
        "user:alice",
        body,
        type="preference",
        sources=[ev],
    )


def index_page() -> str:
    return page_text(
        "users/alice/index",
        "Alice's memory",
        "What Alice told us.",
        "user:alice",
        "# Alice's memory\n\n## Pages\n\n- [[users/alice/food]]: Alice is vegetarian and does not drink alcohol.\n",
        type="index",
    )


def write(path: str, text: str) -> Call:
    return Call("write_page", json.dumps({"path": path, "content": text}))


def submit(ev: str) -> Call:
    return Call("submit", json.dumps({"title": "Record Alice's diet", "rationale": "She said so.", "evidence_ids": [ev]}))


def verdict(kind: str, summary: str = "Checked every claim against the evidence.") -> Call:
    return Call("verdict", json.dumps({"verdict": kind, "summary": summary}))


def proposer_turns(ev: str, claim: str = "Alice does not drink alcohol.") -> list:
    return [
        Call("search", json.dumps({"query": "alice diet"})),
        Call("read_evidence", json.dumps({"evidence_id": ev, "start": 1, "end": 8})),
        [write("users/alice/food.md", food_page(ev, claim)), write("users/alice/index.md", index_page())],
        Call("run_checks", "{}"),
        submit(ev),
    ]


def test_approve_on_the_first_round(cli, repo: tuple[Repo, str]) -> None:
    r, ev = repo
    with scripted_provider(
        {
            "proposer": proposer_turns(ev),
            "reviewer": [Call("read_evidence", json.dumps({"evidence_id": ev, "start": 5, "end": 5})), verdict("approve")],
        }
    ) as llm:
        result = cli("run", "--no-index", cwd=r.root)
    assert result.code == 0, result.err + result.out
    head = Repo(r.root).head()
    trailers = parse_trailers(head.message)
    assert trailers["Kb-Proposer-Model"] == "scripted/proposer" and trailers["Kb-Reviewer-Family"] == "scripted-b"
    assert trailers["Kb-Verdicts"] == "r1:approve" and ev in trailers["Kb-Evidence"]
    assert (r.root / "users/alice/food.md").read_text() == food_page(ev)
    reviewer_prompt = json.dumps(llm.requests_for("reviewer")[0].messages)
    assert "untrusted-data" in reviewer_prompt and "I do not drink alcohol" in reviewer_prompt
    runs = list((r.root / ".kb" / "runs").glob("*/proposer.json"))
    assert runs and json.loads(runs[0].read_text())["result"]["title"] == "Record Alice's diet"


def test_request_changes_then_fix_then_approve(cli, repo: tuple[Repo, str]) -> None:
    r, ev = repo
    fix = Call(
        "edit_page",
        json.dumps(
            {
                "path": "users/alice/food.md",
                "old": "- Alice is vegetarian.[^2]",
                "new": "- Alice is vegetarian (she said so when booking).[^2]",
            }
        ),
    )
    comment = Call(
        "comment", json.dumps({"path": "users/alice/food.md", "line": 13, "message": "Say when she said it.", "evidence": f"{ev}#L5"})
    )
    with scripted_provider(
        {
            "proposer": proposer_turns(ev) + [fix, submit(ev)],
            "reviewer": [comment, verdict("request_changes", "One qualifier missing."), verdict("approve")],
        }
    ) as llm:
        result = cli("run", "--no-index", cwd=r.root)
    assert result.code == 0, result.err + result.out
    trailers = parse_trailers(Repo(r.root).head().message)
    assert trailers["Kb-Verdicts"] == "r1:request_changes, r2:approve" and trailers["Kb-Rounds"] == "2"
    revision_prompt = json.dumps(llm.requests_for("proposer")[5].messages)
    assert "Say when she said it." in revision_prompt
    # the revising Proposer sees its change so far, as a diff against the base
    assert "current diff" in revision_prompt and "+- Alice is vegetarian.[^2]" in revision_prompt
    assert "she said so when booking" in (r.root / "users/alice/food.md").read_text()


def test_gate_findings_go_to_the_proposer_before_the_model_reviewer(cli, repo: tuple[Repo, str]) -> None:
    r, ev = repo
    fix = Call(
        "edit_page", json.dumps({"path": "users/alice/food.md", "old": "Alice drinks alcohol.", "new": "Alice does not drink alcohol."})
    )
    with scripted_provider(
        {"proposer": proposer_turns(ev, "Alice drinks alcohol.") + [fix, submit(ev)], "reviewer": [verdict("approve")]}
    ) as llm:
        result = cli("run", "--no-index", cwd=r.root)
    assert result.code == 0, result.err + result.out
    assert len(llm.requests_for("reviewer")) == 1  # round 1 was refused by the gate, no model call
    trailers = parse_trailers(Repo(r.root).head().message)
    assert trailers["Kb-Verdicts"] == "r1:request_changes, r2:approve"
    assert "grounding.negation" in json.dumps(llm.requests_for("proposer")[5].messages)


def test_no_convergence_within_budget_leaves_the_branch_marked(cli, repo: tuple[Repo, str]) -> None:
    r, ev = repo
    base = r.head().id
    retry = Call(
        "edit_page", json.dumps({"path": "users/alice/food.md", "old": "# Alice's food and drink", "new": "# Alice: food and drink"})
    )
    with scripted_provider(
        {
            "proposer": proposer_turns(ev) + [retry, submit(ev)],
            "reviewer": [verdict("request_changes", "No."), verdict("request_changes", "Still no.")],
        }
    ):
        result = cli("run", "--no-index", cwd=r.root)
    assert result.code == 1 and "needs-human" in result.out
    repo2 = Repo(r.root)
    assert repo2.head().id == base
    branch = next(b for b in repo2.git.branches.local if b.startswith("kb/"))
    head = repo2.git.branches.local[branch].peel().id
    assert status_of(repo2, str(head))["status"] == "needs-human"
    assert [x.verdict for x in reviews_of(repo2, str(head))] == ["request_changes"]


def test_invalid_tool_call_json_is_retried_then_fails_cleanly(cli, repo: tuple[Repo, str]) -> None:
    r, ev = repo
    base = r.head().id
    bad = Call("write_page", '{"path": "users/alice/food.md", "content": ')
    with scripted_provider({"proposer": [bad, bad, bad], "reviewer": []}) as llm:
        result = cli("run", "--no-index", cwd=r.root)
    assert result.code == 10, result.err
    assert result.err.startswith("error: ") and "invalid tool calls 3 times" in result.err and "Traceback" not in result.err
    assert "not valid JSON" in json.dumps(llm.requests_for("proposer")[1].messages) or "JSON" in json.dumps(
        llm.requests_for("proposer")[1].messages
    )
    repo2 = Repo(r.root)
    assert repo2.head().id == base and repo2.dirty_paths() == []
    assert not [b for b in repo2.git.branches.local if b.startswith("kb/")]
    transcripts = list((r.root / ".kb" / "runs").glob("*/proposer.json"))
    assert transcripts and json.loads(transcripts[0].read_text())["stopped"]


INFERRED = "Alice is vegetarian for health reasons."  # the quote says she is vegetarian, not why


def inferred_page(ev: str) -> str:
    return food_page(ev).replace("- Alice is vegetarian.[^2]", f"- {INFERRED}[^2]")


def fault_comment(ev: str, line: int) -> Call:
    return Call(
        "comment",
        json.dumps(
            {
                "path": "users/alice/food.md",
                "line": line,
                "fault": "unsupported_inference",
                "evidence": f"{ev}#L5",
                "message": 'The page says "for health reasons"; L5 says only "I am vegetarian". Drop the reason.',
            }
        ),
    )


def test_a_meaning_fault_blocks_the_merge_and_reaches_the_proposer(cli, repo: tuple[Repo, str]) -> None:
    r, ev = repo
    page = inferred_page(ev)
    line = page.splitlines().index(f"- {INFERRED}[^2]") + 1
    turns = [[write("users/alice/food.md", page), write("users/alice/index.md", index_page())], submit(ev)]
    reviewer = [
        Call("read_evidence", json.dumps({"evidence_id": ev, "start": 2, "end": 8})),
        fault_comment(ev, line),
        verdict("request_changes", "One claim infers a reason nobody gave."),
    ]
    with scripted_provider({"proposer": turns, "reviewer": reviewer}) as llm:
        assert cli("propose", cwd=r.root).code == 0
        branch = next(b for b in Repo(r.root).git.branches.local if b.startswith("kb/"))
        review = cli("review", branch, cwd=r.root)
        assert review.code == 1 and f"users/alice/food.md:{line}" in review.out
        # the claims checklist put the inferred claim, its page line and its citation in front of the Reviewer
        prompt = json.dumps(llm.requests_for("reviewer")[0].messages)
        assert f"users/alice/food.md:{line}: {INFERRED}" in prompt and f"{ev}#L5-L5" in prompt
        merge = cli("merge", branch, "--no-index", cwd=r.root)
        assert merge.code == 13 and "latest verdict of scripted/reviewer" in merge.err, merge.err
        head = Repo(r.root).git.branches.local[branch].peel()
        recorded = reviews_of(Repo(r.root), str(head.id))[0].comments[0]
        assert (recorded["line"], recorded["fault"], recorded["evidence"]) == (line, "unsupported_inference", f"{ev}#L5")


def test_the_loop_hands_a_meaning_fault_to_the_proposer(cli, repo: tuple[Repo, str]) -> None:
    r, ev = repo
    page = inferred_page(ev)
    line = page.splitlines().index(f"- {INFERRED}[^2]") + 1
    proposer = [
        [write("users/alice/food.md", page), write("users/alice/index.md", index_page())],
        submit(ev),
        Call("edit_page", json.dumps({"path": "users/alice/food.md", "old": INFERRED, "new": "Alice is vegetarian."})),
        submit(ev),
    ]
    reviewer = [fault_comment(ev, line), verdict("request_changes", "One claim infers a reason nobody gave."), verdict("approve")]
    with scripted_provider({"proposer": proposer, "reviewer": reviewer}) as llm:
        result = cli("run", "--no-index", cwd=r.root)
    assert result.code == 0, result.err + result.out
    assert parse_trailers(Repo(r.root).head().message)["Kb-Verdicts"] == "r1:request_changes, r2:approve"
    revision = json.dumps(llm.requests_for("proposer")[2].messages)
    assert f"users/alice/food.md:{line} [unsupported_inference]: " in revision and f"(evidence {ev}#L5)" in revision
    assert INFERRED not in (r.root / "users/alice/food.md").read_text()


def test_a_claim_fault_without_its_lines_is_sent_back_to_the_reviewer(cli, repo: tuple[Repo, str]) -> None:
    r, ev = repo
    vague = Call("comment", json.dumps({"path": "users/alice/food.md", "line": 0, "fault": "over_generalisation", "message": "Too broad."}))
    with scripted_provider(
        {"proposer": proposer_turns(ev), "reviewer": [vague, fault_comment(ev, 12), verdict("request_changes", "Too broad.")]}
    ) as llm:
        assert cli("propose", cwd=r.root).code == 0
        branch = next(b for b in Repo(r.root).git.branches.local if b.startswith("kb/"))
        assert cli("review", branch, cwd=r.root).code == 1
    answer = json.dumps(llm.requests_for("reviewer")[1].messages[-1])
    assert "invalid arguments for comment" in answer and "must give the page line of the claim" in answer
    head = Repo(r.root).git.branches.local[branch].peel()
    assert [c["line"] for c in reviews_of(Repo(r.root), str(head.id))[0].comments] == [12]
