"""The agent loop, run through litellm's real code path against the scripted provider."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from agents.llm import Budget, LiteLLMClient, Usage, load_litellm
from agents.loop import (
    TEXT_ONLY,
    AgentBudgetError,
    AgentModelError,
    AgentRun,
    remaining_budget,
    run_agent,
    stopped_run,
)
from agents.schemas import Submission
from agents.tools import PROPOSER_TOOLS, tool_specs
from kb.config import ModelRole
from kb.errors import BudgetExceededError, ModelError
from tests.agents.fakes import EVIDENCE_ID, FakeBackend
from tests.agents.scripted import Call, ScriptedLLM, TurnSpec

litellm = load_litellm()

Install = Callable[[Mapping[str, Sequence[TurnSpec]]], ScriptedLLM]

SUBMIT = Call(
    "submit",
    json.dumps({"title": "Record window seats", "rationale": "Alice said so.", "evidence_ids": [EVIDENCE_ID]}),
)
READ = Call("read_evidence", json.dumps({"evidence_id": EVIDENCE_ID, "start": 1, "end": 1}))
BROKEN = Call("read_evidence", '{"evidence_id": ')


def client() -> LiteLLMClient:
    return LiteLLMClient(ModelRole(model="scripted/proposer", max_retries=0), sleep=lambda _: None)


def run(backend: FakeBackend, max_steps: int = 10, max_invalid: int = 3, budget: Budget | None = None) -> AgentRun:
    return run_agent(client(), "system prompt", "task", PROPOSER_TOOLS, backend, max_steps, max_invalid, budget)


def saved(agent_run: AgentRun) -> dict[str, Any]:
    """What a caller writes to disk, read back."""
    data: dict[str, Any] = json.loads(agent_run.to_json())
    return data


def test_a_run_calls_the_backend_and_ends_with_a_submission(scripted: Install, backend: FakeBackend) -> None:
    edit = Call("edit_page", json.dumps({"path": "users/alice/travel.md", "old": "aisle", "new": "window"}))
    handler = scripted({"proposer": [READ, Call("search", '{"query": "seats"}'), [edit, Call("run_checks")], SUBMIT]})
    result = run(backend)

    assert result.result == Submission(title="Record window seats", rationale="Alice said so.", evidence_ids=[EVIDENCE_ID])
    assert backend.called() == ["read_evidence", "search", "edit_page", "run_checks"]
    assert "Prefers window seats" in backend.pages["users/alice/travel.md"]
    assert result.usage == Usage(prompt_tokens=40, completion_tokens=20, calls=4)
    assert result.stopped is None
    assert handler.requests[0].tools == tool_specs(PROPOSER_TOOLS)
    assert handler.requests[0].messages[:2] == [
        {"role": "system", "content": "system prompt"},
        {"role": "user", "content": "task"},
    ]
    # The model sees each tool result, tied to its call.
    last = handler.requests[-1].messages
    assert [message["role"] for message in last[-3:]] == ["assistant", "tool", "tool"]
    assert last[-1]["tool_call_id"] == last[-3]["tool_calls"][1]["id"]
    assert "no findings" in last[-1]["content"]

    record = saved(result)
    assert record["result"] == {
        "title": "Record window seats",
        "rationale": "Alice said so.",
        "evidence_ids": [EVIDENCE_ID],
    }
    assert record["result_type"] == "Submission"
    assert [len(step["calls"]) for step in record["steps"]] == [1, 1, 2, 1]
    assert record["steps"][2]["usage"] == {
        "calls": 1,
        "completion_tokens": 5,
        "cost_usd": 0.0,
        "prompt_tokens": 10,
    }
    assert len(record["messages"]) == 2 + 4 + 5


def test_invalid_json_is_returned_to_the_model_then_a_valid_call_succeeds(scripted: Install, backend: FakeBackend) -> None:
    handler = scripted({"proposer": [BROKEN, READ, SUBMIT]})
    result = run(backend)

    assert isinstance(result.result, Submission)
    assert backend.called() == ["read_evidence"]
    retry = handler.requests[1].messages
    assert retry[-1]["role"] == "tool"
    assert retry[-1]["content"].startswith("error: the arguments of read_evidence are not valid JSON")
    # The provider gets a parseable stand-in; the record keeps what the model really wrote.
    assert retry[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    first = saved(result)["steps"][0]
    assert first["calls"][0]["arguments"] == '{"evidence_id": '
    assert first["calls"][0]["status"] == "invalid"


def test_repeated_invalid_calls_stop_the_run_with_its_transcript(scripted: Install, backend: FakeBackend) -> None:
    bad_schema = Call("read_evidence", '{"evidence_id": "ev-1"}')
    scripted({"proposer": [BROKEN, Call("delete_everything"), bad_schema, SUBMIT]})

    with pytest.raises(ModelError) as raised:
        run(backend)
    assert raised.value.message.startswith("the model produced invalid tool calls 3 times: error: invalid arguments for read_evidence")
    partial = stopped_run(raised.value)
    assert partial is not None
    assert partial.result is None
    assert partial.stopped == raised.value.message
    assert len(partial.steps) == 3
    assert partial.usage.calls == 3
    assert saved(partial)["stopped"] == raised.value.message
    assert backend.calls == []


def test_a_backend_error_is_not_an_invalid_call(scripted: Install, backend: FakeBackend) -> None:
    failing_edit = Call("edit_page", json.dumps({"path": "users/alice/travel.md", "old": "nowhere", "new": "x"}))
    scripted({"proposer": [BROKEN, BROKEN, failing_edit, BROKEN, BROKEN, SUBMIT]})
    result = run(backend)

    assert isinstance(result.result, Submission)
    assert [call["status"] for step in result.steps for call in step["calls"]] == [
        "invalid",
        "invalid",
        "error",
        "invalid",
        "invalid",
        "terminal",
    ]


class BuggyBackend(FakeBackend):
    """A backend with a programming error: a regex search compiles the pattern unguarded."""

    def grep_docs(self, pattern: str, page_id: str | None = None, regex: bool = False) -> str:
        self.calls.append(("grep_docs", {"pattern": pattern, "page_id": page_id, "regex": regex}))
        matcher = re.compile(pattern if regex else re.escape(pattern))
        return "\n".join(path for path, text in sorted(self.pages.items()) if matcher.search(text)) or "no hits"


def test_a_tool_that_raises_a_non_kb_error_answers_the_model_and_the_run_goes_on(
    scripted: Install, caplog: pytest.LogCaptureFixture
) -> None:
    backend = BuggyBackend(pages={"users/alice/travel.md": "Prefers window seats."})
    grep = Call("grep_docs", json.dumps({"pattern": "(window", "regex": True}))
    handler = scripted({"proposer": [grep, Call("grep_docs", json.dumps({"pattern": "window"})), SUBMIT]})
    with caplog.at_level("ERROR", logger="agents"):
        result = run(backend)

    assert isinstance(result.result, Submission)
    assert backend.called() == ["grep_docs", "grep_docs"]
    calls = [call for step in result.steps for call in step["calls"]]
    assert [call["status"] for call in calls] == ["error", "ok", "terminal"]
    # the model gets one bounded line naming the failure, not a traceback
    answer = handler.requests[1].messages[-1]
    assert answer["role"] == "tool" and "grep_docs failed" in answer["content"] and "missing )" in answer["content"]
    assert "Traceback" not in answer["content"] and len(answer["content"]) < 800
    # the programming error is logged, and kept in the run record with its traceback
    assert any("grep_docs" in r.getMessage() and r.exc_info for r in caplog.records)
    assert (
        "Traceback" in calls[0]["traceback"]
        and "grep_docs" in calls[0]["traceback"]
        and "Traceback" not in json.dumps(saved(result)["messages"])
    )


def test_a_text_reply_gets_a_reminder_and_counts_as_invalid(scripted: Install, backend: FakeBackend) -> None:
    handler = scripted({"proposer": ["I will now think about it.", SUBMIT]})
    assert isinstance(run(backend).result, Submission)
    reminder = handler.requests[1].messages[-1]
    assert reminder["role"] == "user"
    assert "call submit" in reminder["content"]

    scripted({"proposer": ["one", "two", "three"]})
    with pytest.raises(AgentModelError, match=re.escape(f"invalid tool calls 3 times: {TEXT_ONLY}")):
        run(backend)


def test_calls_after_the_terminal_call_are_not_performed(scripted: Install, backend: FakeBackend) -> None:
    write = Call("write_page", json.dumps({"path": "users/alice/late.md", "content": "too late"}))
    scripted({"proposer": [[READ, SUBMIT, write]]})
    result = run(backend)

    assert backend.called() == ["read_evidence"]
    assert [call["status"] for call in result.steps[0]["calls"]] == ["ok", "terminal", "skipped"]


def test_the_budget_stops_the_run(scripted: Install, backend: FakeBackend) -> None:
    scripted({"proposer": [READ, READ, READ, SUBMIT]})
    with pytest.raises(BudgetExceededError) as raised:
        run(backend, budget=Budget(max_rounds=1, max_tokens=30))
    assert raised.value.message == "scripted/proposer: token budget spent: 30 of 30 tokens after 2 model calls"
    assert isinstance(raised.value, AgentBudgetError)
    partial = stopped_run(raised.value)
    assert partial is not None and partial.usage.total_tokens == 30
    assert backend.called() == ["read_evidence", "read_evidence"]


def test_remaining_budget_subtracts_what_was_spent() -> None:
    left = remaining_budget(
        Budget(max_rounds=3, max_tokens=100, max_cost_usd=1.0),
        Usage(prompt_tokens=80, completion_tokens=40, cost_usd=0.25),
    )
    assert left == Budget(max_rounds=3, max_tokens=0, max_cost_usd=0.75)
    assert remaining_budget(Budget(), Usage(prompt_tokens=5)) == Budget()


def test_the_step_limit_stops_the_run(scripted: Install, backend: FakeBackend) -> None:
    scripted({"proposer": [READ, READ, SUBMIT]})
    with pytest.raises(AgentModelError, match=r"scripted/proposer: no submit after 2 steps") as raised:
        run(backend, max_steps=2)
    assert len(raised.value.run.steps) == 2


def test_a_failed_model_call_keeps_the_run_so_far(scripted: Install, backend: FakeBackend) -> None:
    refused = litellm.BadRequestError(message="context too long", llm_provider="scripted", model="proposer")
    scripted({"proposer": [READ, refused]})
    with pytest.raises(AgentModelError, match="BadRequestError: context too long") as raised:
        run(backend)
    assert raised.value.hint
    assert [step["calls"][0]["name"] for step in raised.value.run.steps] == ["read_evidence"]
