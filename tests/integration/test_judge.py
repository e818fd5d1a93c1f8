"""`kb eval memory --cases --judge` with scripted answer and judge models through litellm."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.agents.scripted import Call, scripted_provider
from tests.builders import index_text, page_text

CASE = {
    "test_id": "t1",
    "conversation_histories": [
        {
            "conversation_id": "c1",
            "timestamp": "2024-05-01 10:00:00",
            "messages": [
                {"role": "user", "content": "My locker code at the gym is 4471, please remember it."},
                {"role": "assistant", "content": "Noted, your locker code is 4471."},
            ],
        }
    ],
    "user_question": "What is my locker code?",
    "evaluation_criteria": "The agent should recall the locker code 4471.",
}
MODELS = """  proposer: {model: scripted/answerer, family: fam-a}
  judge: {model: scripted/judge, family: fam-c}
"""


def test_judge_scores_the_answer_and_retries_invalid_output(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    config = root / "kb.config.yaml"
    config.write_text(config.read_text().replace("  allow_same_family: false", MODELS + "  allow_same_family: false"))
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "t1.yaml").write_text(yaml.safe_dump(CASE))
    # the answerer is also the configured proposer: memory is built with it, so script a change
    body = '# Locker\n\n- The locker code is 4471.[^1]\n\n[^1]: EVID#L1 "My locker code at the gym is 4471"\n'
    page = page_text("users/t1/locker", "Locker", "The user's gym locker code.", "user:t1", body)
    index = index_text("users/t1", "T1", "Memory of t1.", "user:t1", {"users/t1/locker": "The user's gym locker code."})
    from kb.intake import prepare_messages
    from kb.scopes import user_scope
    from kb.sessions import read_sessions

    session = read_sessions(cases / "t1.yaml").sessions[0]
    ev = prepare_messages(list(session.messages), session.source, user_scope("t1"), {}).id
    writes = [
        Call("write_page", json.dumps({"path": "users/t1/locker.md", "content": page.replace("EVID", ev)})),
        Call("write_page", json.dumps({"path": "users/t1/index.md", "content": index})),
        Call("submit", json.dumps({"title": "Locker code", "rationale": "Stated.", "evidence_ids": [ev]})),
    ]
    turns = {"answerer": writes + ["Your locker code is 4471."], "judge": ["not json", '{"score": 1, "reason": "The code is right."}']}
    with scripted_provider(turns) as llm:
        result = cli(
            "eval", "memory", "--cases", str(cases), "--variant", "both", "--judge", "--json", "--workdir", str(tmp_path / "work"), cwd=root
        )
    assert result.code == 0, result.err
    row = json.loads(result.out)["cases"]["cases"][0]["both"]
    assert row["judge_score"] == 1 and row["answer"] == "Your locker code is 4471." and row["found"] == row["key_facts"] == 1
    assert "untrusted-data" in json.dumps(llm.requests_for("answerer")[-1].messages)
    assert len(llm.requests_for("judge")) == 2  # invalid output was answered with the error, then valid
