"""The agent loop: a model calling tools until it calls a terminal tool (function calling, ReAct).

``run_agent`` sends the conversation and the tool schemas to the model, validates and performs
each tool call it answers with (``agents.tools.dispatch``), returns the results as tool messages,
and repeats until the model calls a terminal tool (``submit``, ``verdict``). The validated
payload of that call is the run's result; ``comment`` calls are collected on the way. The loop
performs nothing itself beyond the backend methods the model asked for.

Every run is recorded as JSON-serialisable data (``AgentRun``): each message as sent, each
model call with its usage and finish reason, each tool call with its raw arguments and what came
of it. A run that stops without a result (invalid calls over and over, the step limit, the
budget, a failed model call) raises an error that still carries the run, so nothing is lost:
``stopped_run(error)`` gives it back for the caller to save.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from agents.backend import ReadBackend
from agents.llm import Budget, LiteLLMClient, ModelReply, ToolCall, Usage, check_budget
from agents.prompts import tool_reminder
from agents.schemas import Comment, ReviewComment
from agents.tools import Tool, ToolOutcome, dispatch, tool_specs
from kb.errors import BudgetExceededError, KbError, ModelError

TRANSCRIPT_VERSION = 1
TEXT_ONLY = "the reply called no tool (text only)"


@dataclass(frozen=True)
class AgentRun:
    """One agent run as data; ``to_dict`` / ``to_json`` give its audit record."""

    model: str
    messages: tuple[dict[str, Any], ...]  # system, user, assistant and tool messages, as sent
    steps: tuple[dict[str, Any], ...]  # one per model call: usage, finish reason, tool calls
    usage: Usage
    result: BaseModel | None  # the terminal tool's payload (Submission, Verdict, ...); None when the run stopped
    comments: tuple[Comment, ...] = ()
    stopped: str | None = None  # why the run ended without a result

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": TRANSCRIPT_VERSION,
            "model": self.model,
            "usage": self.usage.to_dict(),
            "result": self.result.model_dump(mode="json") if self.result is not None else None,
            "result_type": type(self.result).__name__ if self.result is not None else None,
            "comments": [comment.model_dump(mode="json") for comment in self.comments],
            "stopped": self.stopped,
            "steps": list(self.steps),
            "messages": list(self.messages),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2, sort_keys=True) + "\n"


class AgentModelError(ModelError):
    """A run stopped by the model: invalid calls, no result within the step limit, a failed call."""

    def __init__(self, message: str, run: AgentRun, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.run = run


class AgentBudgetError(BudgetExceededError):
    """A run stopped because its token or cost budget was spent."""

    def __init__(self, message: str, run: AgentRun, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.run = run


def stopped_run(error: KbError) -> AgentRun | None:
    """The partial run an error from ``run_agent`` carries, for the caller to save."""
    if isinstance(error, AgentModelError | AgentBudgetError):
        return error.run
    return None


def remaining_budget(budget: Budget, spent: Usage) -> Budget:
    """What is left of ``budget`` after ``spent``, e.g. for the next round of a review loop."""
    return Budget(
        max_rounds=budget.max_rounds,
        max_tokens=None if budget.max_tokens is None else max(budget.max_tokens - spent.total_tokens, 0),
        max_cost_usd=None if budget.max_cost_usd is None else max(budget.max_cost_usd - spent.cost_usd, 0.0),
    )


@dataclass
class _Recorder:
    model: str
    messages: list[dict[str, Any]]
    steps: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    comments: list[Comment] = field(default_factory=list)

    def reply(self, reply: ModelReply) -> None:
        self.usage = self.usage + reply.usage
        # Content as the provider gave it; "" rather than None only for a reply without calls.
        content = reply.content if reply.content or reply.tool_calls else ""
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.tool_calls:
            message["tool_calls"] = [_call_message(call) for call in reply.tool_calls]
        self.messages.append(message)
        self.steps.append(
            {
                "step": len(self.steps) + 1,
                "finish_reason": reply.finish_reason,
                "raw_model": reply.raw_model,
                "usage": reply.usage.to_dict(),
                "calls": [],
            }
        )

    def outcome(self, call: ToolCall, outcome: ToolOutcome) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.text})
        self._call(call, outcome.status, outcome.text if outcome.invalid or outcome.traceback else None)
        if outcome.traceback:
            self.steps[-1]["calls"][-1]["traceback"] = outcome.traceback
        if isinstance(outcome.payload, ReviewComment):
            self.comments.append(Comment(**outcome.payload.model_dump()))

    def skipped(self, calls: Sequence[ToolCall], why: str) -> None:
        for call in calls:
            self._call(call, "skipped", why)

    def remind(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def run(self, result: BaseModel | None = None, stopped: str | None = None) -> AgentRun:
        return AgentRun(
            model=self.model,
            messages=tuple(self.messages),
            steps=tuple(self.steps),
            usage=self.usage,
            result=result,
            comments=tuple(self.comments),
            stopped=stopped,
        )

    def _call(self, call: ToolCall, status: str, error: str | None) -> None:
        record: dict[str, Any] = {
            "id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "status": status,
        }
        if error is not None:
            record["error"] = error
        self.steps[-1]["calls"].append(record)


def run_agent(
    client: LiteLLMClient,
    system: str,
    user: str,
    tools: Sequence[Tool],
    backend: ReadBackend,
    max_steps: int,
    max_invalid: int = 3,
    budget: Budget | None = None,
) -> AgentRun:
    """Run the model with ``tools`` until it calls a terminal tool; return the recorded run.

    A step is one model call. An invalid tool call (unknown tool, arguments not JSON, arguments
    against the schema) and a reply without any tool call are answered with the error and count
    as invalid; ``max_invalid`` of them in a row stop the run. An error the backend raises is
    returned to the model and does not count. Budgets apply to tokens and cost and are checked
    before each model call (``max_rounds`` is the caller's: rounds of a review loop, not steps).

    Raises AgentModelError (a ModelError) or AgentBudgetError (a BudgetExceededError), each
    carrying the partial run.
    """
    terminal = [tool.name for tool in tools if tool.role == "terminal"]
    if not terminal:
        raise ValueError("run_agent needs at least one terminal tool (submit or verdict)")
    recorder = _Recorder(
        model=client.settings.model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
    )
    specs = tool_specs(tools)
    reminder = tool_reminder([tool.name for tool in tools], terminal)
    invalid_in_a_row = 0
    for _ in range(max_steps):
        _check_budget(budget, recorder)
        try:
            # A copy: the record must stay what was sent, whatever a provider adapter does to it.
            reply = client.complete(copy.deepcopy(recorder.messages), specs)
        except ModelError as exc:
            raise AgentModelError(exc.message, recorder.run(stopped=exc.message), hint=exc.hint) from exc
        recorder.reply(reply)
        if not reply.tool_calls:
            invalid_in_a_row += 1
            _check_invalid(invalid_in_a_row, max_invalid, TEXT_ONLY, recorder)
            recorder.remind(reminder)
            continue
        for index, call in enumerate(reply.tool_calls):
            outcome = dispatch(tools, backend, call)
            recorder.outcome(call, outcome)
            later = reply.tool_calls[index + 1 :]
            if outcome.invalid:
                invalid_in_a_row += 1
                if invalid_in_a_row >= max_invalid:
                    recorder.skipped(later, "the run stopped before this call")
                _check_invalid(invalid_in_a_row, max_invalid, outcome.text, recorder)
                continue
            invalid_in_a_row = 0
            if outcome.status == "terminal":
                recorder.skipped(later, f"after {call.name}, which ends the run")
                assert outcome.payload is not None
                return recorder.run(result=outcome.payload)
    message = f"{client.settings.model}: no {' or '.join(terminal)} after {max_steps} steps"
    raise AgentModelError(
        message,
        recorder.run(stopped=message),
        hint="the change may be too large for one run: split the evidence, or raise the step limit",
    )


def _check_budget(budget: Budget | None, recorder: _Recorder) -> None:
    if budget is None:
        return
    reason = check_budget(dataclasses.replace(budget, max_rounds=None), recorder.usage, rounds=0)
    if reason is None:
        return
    message = f"{recorder.model}: {reason} after {len(recorder.steps)} model calls"
    raise AgentBudgetError(
        message,
        recorder.run(stopped=message),
        hint="raise the budget in kb.config.yaml, or split the evidence",
    )


def _check_invalid(count: int, limit: int, last_error: str, recorder: _Recorder) -> None:
    if count < limit:
        return
    message = f"the model produced invalid tool calls {count} times: {last_error}"
    raise AgentModelError(
        message,
        recorder.run(stopped=message),
        hint="see the saved transcript; a model with reliable tool calling may be needed",
    )


def _call_message(call: ToolCall) -> dict[str, Any]:
    # Arguments go back to the provider as the model wrote them, unless they are not a JSON
    # object: some providers' adapters (Anthropic's, in litellm) parse them and would fail the
    # whole request. The raw text stays in the step record and the error text quotes the problem.
    return {
        "id": call.id,
        "type": "function",
        "function": {
            "name": call.name,
            "arguments": call.arguments if _is_json_object(call.arguments) else "{}",
        },
    }


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False
