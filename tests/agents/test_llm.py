"""The litellm client, run through litellm's real code path against the scripted provider."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from agents.llm import (
    Budget,
    LiteLLMClient,
    Usage,
    check_budget,
    load_litellm,
    retry_delay,
)
from kb.config import ModelRole
from kb.errors import ModelError
from tests.agents.scripted import Call, ScriptedLLM, Turn
from tests.builders import ROOT

litellm = load_litellm()

Install = Callable[[dict[str, list[object]]], ScriptedLLM]
ASK = [{"role": "user", "content": "What changed?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_page",
            "description": "Read one page.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def client(model: str = "scripted/proposer", **settings: Any) -> tuple[LiteLLMClient, list[float]]:
    slept: list[float] = []
    return LiteLLMClient(ModelRole(model=model, **settings), sleep=slept.append), slept


def rate_limited() -> Exception:
    error: Exception = litellm.RateLimitError(message="slow down", llm_provider="scripted", model="proposer")
    return error


def test_a_text_reply(scripted: Install) -> None:
    handler = scripted({"proposer": [Turn(content="Nothing changed.", prompt_tokens=12, completion_tokens=3)]})
    reply = client()[0].complete(ASK)

    assert reply.content == "Nothing changed."
    assert reply.tool_calls == ()
    assert reply.finish_reason == "stop"
    assert reply.raw_model == "proposer"
    assert reply.usage == Usage(prompt_tokens=12, completion_tokens=3, cost_usd=0.0, calls=1)
    assert handler.requests_for("proposer")[0].messages == ASK


def test_two_tool_calls_keep_their_raw_arguments(scripted: Install) -> None:
    handler = scripted({"proposer": [[Call("read_page", '{"path": "a.md"}', id="c1"), Call("read_page", '{"path":"b.md"}')]]})
    reply = client()[0].complete(ASK, tools=TOOLS)

    assert [(call.name, call.arguments) for call in reply.tool_calls] == [
        ("read_page", '{"path": "a.md"}'),
        ("read_page", '{"path":"b.md"}'),
    ]
    assert reply.tool_calls[0].id == "c1"
    assert reply.tool_calls[1].id
    assert reply.finish_reason == "tool_calls"
    assert handler.requests[0].tools == TOOLS


def test_invalid_json_arguments_arrive_unchanged(scripted: Install) -> None:
    scripted({"proposer": [Call("read_page", '{"path": "a.md",,')]})
    reply = client()[0].complete(ASK, tools=TOOLS)
    assert reply.tool_calls[0].arguments == '{"path": "a.md",,'


def test_a_rate_limit_is_retried_after_a_backoff(scripted: Install) -> None:
    handler = scripted({"proposer": [rate_limited(), rate_limited(), "done"]})
    llm, slept = client(max_retries=3)

    assert llm.complete(ASK).content == "done"
    assert slept == [retry_delay(0), retry_delay(1)] == [1.0, 2.0]
    assert len(handler.requests) == 3


@pytest.mark.parametrize(
    "error",
    [
        lambda: litellm.Timeout(message="timed out", model="proposer", llm_provider="scripted"),
        lambda: litellm.APIConnectionError(message="refused", llm_provider="scripted", model="proposer"),
        lambda: litellm.ServiceUnavailableError(message="503", llm_provider="scripted", model="proposer"),
        lambda: litellm.InternalServerError(message="500", llm_provider="scripted", model="proposer"),
    ],
    ids=["timeout", "connection", "unavailable", "internal"],
)
def test_other_transient_errors_are_retried(scripted: Install, error: Callable[[], Exception]) -> None:
    scripted({"proposer": [error(), "done"]})
    llm, slept = client(max_retries=1)
    assert llm.complete(ASK).content == "done"
    assert slept == [1.0]


def test_exhausted_retries_become_a_model_error(scripted: Install) -> None:
    scripted({"proposer": [rate_limited(), rate_limited(), rate_limited(), "never reached"]})
    llm, slept = client(max_retries=2)

    with pytest.raises(ModelError) as raised:
        llm.complete(ASK)
    assert raised.value.message == ("scripted/proposer: RateLimitError: slow down (gave up after 3 attempts)")
    assert "max_retries" in raised.value.hint
    assert slept == [1.0, 2.0]


def test_an_auth_error_fails_at_once_without_showing_the_key(scripted: Install, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-scripted-0123456789abcdef"
    monkeypatch.setenv("SCRIPTED_API_KEY", key)
    auth = litellm.AuthenticationError(
        message=f"Incorrect API key provided: {key}\nsee the docs", llm_provider="scripted", model="proposer"
    )
    handler = scripted({"proposer": [auth, "never reached"]})
    llm, slept = client(max_retries=5)

    with pytest.raises(ModelError) as raised:
        llm.complete(ASK)
    assert raised.value.message == "scripted/proposer: AuthenticationError: Incorrect API key provided: ***"
    assert key not in raised.value.hint
    assert slept == []
    assert handler.remaining("proposer") == 1


def test_an_auth_error_with_a_key_set_says_the_key_was_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    # litellm's mock_response raises the error inside litellm.completion for a real model name.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key-0123456789")
    auth = litellm.AuthenticationError(message="bad key", llm_provider="openai", model="gpt-4o")
    llm, _ = client("gpt-4o", options={"mock_response": auth})

    with pytest.raises(ModelError) as raised:
        llm.complete(ASK)
    assert raised.value.hint == "the provider rejected the API key in its environment variable; check or replace it"


def test_a_missing_api_key_fails_before_any_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm, slept = client("openai/gpt-4o", max_retries=4)
    with pytest.raises(ModelError) as raised:
        llm.complete(ASK)
    assert raised.value.message == "openai/gpt-4o: no API key: OPENAI_API_KEY is not set"
    assert raised.value.hint.startswith("export OPENAI_API_KEY=") and raised.value.exit_code == 10
    assert slept == []
    # a local server needs no key: the call goes ahead (and here meets the mocked reply)
    local, _ = client("openai/gpt-4o", api_base="http://127.0.0.1:9", options={"mock_response": "ok"})
    assert local.complete(ASK).content == "ok"


def test_missing_credentials_reported_as_a_server_error_are_not_retried(scripted: Install) -> None:
    outage = litellm.InternalServerError(message="Missing credentials. Please pass an api_key", llm_provider="scripted", model="proposer")
    handler = scripted({"proposer": [outage, "never reached"]})
    llm, slept = client(max_retries=4)
    with pytest.raises(ModelError, match="Missing credentials"):
        llm.complete(ASK)
    assert slept == [] and handler.remaining("proposer") == 1


def test_a_bad_request_is_not_retried(scripted: Install) -> None:
    bad = litellm.BadRequestError(message="unknown parameter", llm_provider="scripted", model="proposer")
    scripted({"proposer": [bad, "never reached"]})
    llm, slept = client()

    with pytest.raises(ModelError, match="BadRequestError: unknown parameter"):
        llm.complete(ASK)
    assert slept == []


def test_an_unscripted_call_fails_loudly(scripted: Install) -> None:
    scripted({"proposer": []})
    with pytest.raises(ModelError, match="no turns left"):
        client()[0].complete(ASK)


def test_usage_accumulates_and_is_priced(scripted: Install) -> None:
    scripted({"proposer": ["one", Turn(content="two", prompt_tokens=100, completion_tokens=50)]})
    llm, _ = client(options={"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6})

    total = llm.complete(ASK).usage + llm.complete(ASK).usage
    assert (total.prompt_tokens, total.completion_tokens, total.calls) == (110, 55, 2)
    assert total.total_tokens == 165
    assert total.cost_usd == pytest.approx(110e-6 + 110e-6)


def test_a_model_without_a_price_costs_nothing(scripted: Install) -> None:
    scripted({"reviewer": ["ok"]})
    assert client("scripted/reviewer")[0].complete(ASK).usage.cost_usd == 0.0


def test_two_scripted_models_keep_separate_queues(scripted: Install) -> None:
    handler = scripted({"proposer": ["p"], "scripted/reviewer": ["r"]})
    assert client("scripted/reviewer")[0].complete(ASK).content == "r"
    assert client("scripted/proposer")[0].complete(ASK).content == "p"
    assert [request.model for request in handler.requests] == ["reviewer", "proposer"]


def test_the_double_serves_async_calls_too(scripted: Install) -> None:
    scripted({"proposer": [Call("read_page", "{}")]})
    response = asyncio.run(litellm.acompletion(model="scripted/proposer", messages=ASK, tools=TOOLS))
    assert response.choices[0].message.tool_calls[0].function.name == "read_page"


def test_the_provider_is_unregistered_afterwards() -> None:
    from tests.agents.scripted import scripted_provider

    with scripted_provider({"proposer": []}):
        pass
    assert "scripted" not in litellm._custom_providers
    with pytest.raises(ModelError):
        client()[0].complete(ASK)


def test_retry_delays_double_up_to_a_cap() -> None:
    assert [retry_delay(attempt) for attempt in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


@pytest.mark.parametrize(
    ("rounds", "usage", "reason"),
    [
        (2, Usage(prompt_tokens=100, completion_tokens=10, cost_usd=0.01, calls=4), None),
        (3, Usage(), "round budget spent: 3 of 3 rounds"),
        (1, Usage(prompt_tokens=900, completion_tokens=100), "token budget spent: 1000 of 1000 tokens"),
        (1, Usage(cost_usd=0.75), "cost budget spent: $0.7500 of $0.5000"),
    ],
)
def test_budget_checks(rounds: int, usage: Usage, reason: str | None) -> None:
    budget = Budget(max_rounds=3, max_tokens=1000, max_cost_usd=0.5)
    assert check_budget(budget, usage, rounds) == reason


def test_an_unlimited_budget_is_never_spent() -> None:
    assert check_budget(Budget(), Usage(prompt_tokens=10**9, cost_usd=1e6), rounds=10**6) is None


@pytest.mark.parametrize(
    "settings",
    [
        {"model": "gpt-4o", "api_key": "sk-nope"},
        {"model": "gpt-4o", "options": {"api_key": "sk-nope"}},
        {"model": "gpt-4o", "options": {"azure_ad_token": "x"}},
        {"model": "gpt-4o", "options": {"num_retries": 5}},
        {"model": "gpt-4o", "options": {"input_cost_per_token": 1e-6}},
        {"model": ""},
    ],
)
def test_settings_refuse_keys_and_reserved_options(settings: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        ModelRole.model_validate(settings)


def test_importing_the_adapter_does_not_import_litellm() -> None:
    code = "import sys, agents.llm, agents.family; print('litellm' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "False"
