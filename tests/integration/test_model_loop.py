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
