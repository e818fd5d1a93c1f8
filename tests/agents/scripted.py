"""A scripted model served through litellm's own custom-provider interface.

``ScriptedLLM`` is a ``litellm.CustomLLM``: registered under the provider name ``scripted``, a
model such as ``scripted/proposer`` goes through ``litellm.completion`` exactly like a real one
(argument handling, exception pass-through, the ModelResponse the adapter parses), and only the
final network request is replaced by a queue of scripted turns. Each call is recorded.

A turn is one of:
    "text"                       a plain assistant reply
    Call("name", '{"raw": 1}')   one tool call; arguments are raw text, so invalid JSON works
    [Call(...), Call(...)]       several tool calls in one reply
    Turn(content=..., calls=..., prompt_tokens=..., completion_tokens=...)   full control
    an exception instance        raised by the provider, e.g. litellm.RateLimitError(...)
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agents.llm import load_litellm

load_litellm()  # before the imports below: keeps litellm's import offline

import litellm  # noqa: E402
from litellm.exceptions import BadRequestError  # noqa: E402
from litellm.llms.custom_llm import CustomLLM  # noqa: E402
from litellm.types.utils import (  # noqa: E402
    ChatCompletionMessageToolCall,
    Choices,
    Function,
    Message,
    ModelResponse,
)
from litellm.types.utils import Usage as LiteLLMUsage  # noqa: E402

PROVIDER = "scripted"


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str = "{}"
    id: str | None = None  # defaults to call_<turn>_<index>


@dataclass(frozen=True)
class Turn:
    content: str | None = None
    calls: tuple[Call, ...] = ()
    prompt_tokens: int = 10
    completion_tokens: int = 5
    finish_reason: str | None = None  # defaults to "tool_calls" with calls, else "stop"


@dataclass(frozen=True)
class Request:
    """What the scripted model received in one call."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    optional_params: dict[str, Any]


TurnSpec = str | Call | Sequence[Call] | Turn | BaseException


def as_turn(spec: TurnSpec) -> Turn | BaseException:
    if isinstance(spec, BaseException | Turn):
        return spec
    if isinstance(spec, str):
        return Turn(content=spec)
    if isinstance(spec, Call):
        return Turn(calls=(spec,))
    return Turn(calls=tuple(spec))


class ScriptedLLM(CustomLLM):
    """Replays scripted turns per model name (the part after ``scripted/``)."""

    def __init__(self, turns: dict[str, list[Turn | BaseException]]) -> None:
        super().__init__()
        self.turns = turns
        self.requests: list[Request] = []

    def requests_for(self, model: str) -> list[Request]:
        return [request for request in self.requests if request.model == _short(model)]

    def remaining(self, model: str) -> int:
        return len(self.turns.get(_short(model), []))

    # litellm calls both with keyword arguments only (see CustomLLM for the full list).
    def completion(self, model: str, messages: list[Any], *_args: Any, **kwargs: Any) -> ModelResponse:
        return self._reply(model, messages, kwargs.get("optional_params") or {})

    async def acompletion(self, model: str, messages: list[Any], *_args: Any, **kwargs: Any) -> ModelResponse:
        return self._reply(model, messages, kwargs.get("optional_params") or {})

    def _reply(self, model: str, messages: list[Any], optional_params: dict[str, Any]) -> ModelResponse:
        params = copy.deepcopy(dict(optional_params))
        self.requests.append(
            Request(
                model=model,
                messages=copy.deepcopy(list(messages)),
                tools=params.get("tools"),
                optional_params=params,
            )
        )
        queue = self.turns.get(model)
        if not queue:
            # A BadRequestError is not retried, so an unscripted call fails the test at once.
            raise BadRequestError(
                message=f"scripted model {model!r} has no turns left",
                model=model,
                llm_provider=PROVIDER,
            )
        turn = queue.pop(0)
        if isinstance(turn, BaseException):
            raise turn
        return _model_response(model, turn, call_number=len(self.requests))


def _model_response(model: str, turn: Turn, call_number: int) -> ModelResponse:
    # Tool calls must be ChatCompletionMessageToolCall objects (or dicts of the same shape:
    # id, type "function", function {name, arguments}); arguments stay a string, untouched.
    tool_calls = [
        ChatCompletionMessageToolCall(
            id=call.id or f"call_{call_number}_{index}",
            type="function",
            function=Function(name=call.name, arguments=call.arguments),
        )
        for index, call in enumerate(turn.calls)
    ]
    finish_reason = turn.finish_reason or ("tool_calls" if tool_calls else "stop")
    message = Message(content=turn.content, role="assistant", tool_calls=tool_calls or None)
    return ModelResponse(
        id=f"scripted-{call_number}",
        model=model,
        choices=[Choices(index=0, finish_reason=finish_reason, message=message)],
        usage=LiteLLMUsage(
            prompt_tokens=turn.prompt_tokens,
            completion_tokens=turn.completion_tokens,
            total_tokens=turn.prompt_tokens + turn.completion_tokens,
        ),
    )


def _short(model: str) -> str:
    return model.removeprefix(f"{PROVIDER}/")


@contextmanager
def scripted_provider(turns_by_model: Mapping[str, Sequence[TurnSpec]]) -> Iterator[ScriptedLLM]:
    """Register a ScriptedLLM as litellm's ``scripted`` provider for the duration of the block.

    Keys may be given as ``proposer`` or ``scripted/proposer``.
    """
    handler = ScriptedLLM(turns={_short(model): [as_turn(spec) for spec in specs] for model, specs in turns_by_model.items()})
    saved_map = litellm.custom_provider_map
    had_provider = PROVIDER in litellm.provider_list
    had_custom = PROVIDER in litellm._custom_providers
    litellm.custom_provider_map = [{"provider": PROVIDER, "custom_handler": handler}]
    try:
        yield handler
    finally:
        litellm.custom_provider_map = saved_map
        # litellm appends the provider name to these lists on first use and never removes it;
        # undo that so a later test without the double sees an unknown provider, not a stale one.
        if not had_provider and PROVIDER in litellm.provider_list:
            litellm.provider_list.remove(PROVIDER)
        if not had_custom and PROVIDER in litellm._custom_providers:
            litellm._custom_providers.remove(PROVIDER)
