"""The one seam to language models: a litellm client, its settings, replies, usage and budgets.

Everything else in kb talks to a model through ``LiteLLMClient.complete`` and gets a
``ModelReply`` back: plain frozen data, tool-call arguments kept as the raw string the model wrote
(parsing and validating them is the caller's job, so invalid JSON reaches the caller intact).

litellm is imported lazily, inside ``load_litellm``: it takes seconds to import and, unless told
otherwise, fetches a price list over the network at import. API keys are never part of the
settings: litellm reads them from each provider's own environment variables, and no message this
module builds contains one.
"""

from __future__ import annotations

import os
import re
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kb.config import PRICE_OPTIONS, Loop, ModelRole
from kb.errors import ModelError

RETRY_BASE_DELAY_S = 1.0
RETRY_MAX_DELAY_S = 30.0

_SECRET_ENV_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)")
_CREDENTIAL_TROUBLE = re.compile(
    r"missing credentials|no api key|api key (?:is )?(?:missing|not (?:set|provided|found))|unauthori[sz]ed", re.IGNORECASE
)


def load_litellm() -> ModuleType:
    """Import litellm offline and quiet; the only place kb imports it."""
    # Without this, importing litellm fetches its model price list over the network.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # pydantic warns about litellm's ReadOnly TypedDicts on first use; noise on kb's stderr.
    warnings.filterwarnings("ignore", message=r".*ReadOnly.*", category=UserWarning)
    import litellm

    # litellm prints "Give Feedback / Get Help" banners to stdout on errors; kb owns the output.
    litellm.suppress_debug_info = True
    return litellm


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model wrote it, possibly invalid


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "prompt_tokens": self.prompt_tokens,
        }

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            calls=self.calls + other.calls,
        )


@dataclass(frozen=True)
class ModelReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    finish_reason: str | None
    raw_model: str | None  # the model name the provider reported


@dataclass(frozen=True)
class Budget:
    """Limits of one agent loop; None means unlimited."""

    max_rounds: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None


def budget_for(loop: Loop) -> Budget:
    """The budget of one run of the change loop, from ``kb.config.yaml``'s ``loop:``."""
    return Budget(max_rounds=loop.max_rounds, max_tokens=loop.max_tokens, max_cost_usd=loop.max_cost_usd)


def check_budget(budget: Budget, usage: Usage, rounds: int) -> str | None:
    """Why no further round may start, or None while every limit still has room.

    A limit counts as spent once it is reached: after ``max_rounds`` rounds there is no next one.
    """
    if budget.max_rounds is not None and rounds >= budget.max_rounds:
        return f"round budget spent: {rounds} of {budget.max_rounds} rounds"
    if budget.max_tokens is not None and usage.total_tokens >= budget.max_tokens:
        return f"token budget spent: {usage.total_tokens} of {budget.max_tokens} tokens"
    if budget.max_cost_usd is not None and usage.cost_usd >= budget.max_cost_usd:
        return f"cost budget spent: ${usage.cost_usd:.4f} of ${budget.max_cost_usd:.4f}"
    return None


def retry_delay(attempt: int) -> float:
    """Seconds to wait after failed attempt ``attempt`` (0-based): 1, 2, 4, ... capped at 30."""
    return float(min(RETRY_BASE_DELAY_S * 2**attempt, RETRY_MAX_DELAY_S))


class LiteLLMClient:
    """Chat completions through litellm, with kb's retry policy and error messages."""

    def __init__(self, settings: ModelRole, sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self._sleep = sleep

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> ModelReply:
        """One completion; transient failures are retried, the rest raise ModelError at once."""
        litellm = load_litellm()
        transient = (
            litellm.RateLimitError,
            litellm.Timeout,
            litellm.APIConnectionError,
            litellm.ServiceUnavailableError,
            litellm.InternalServerError,
            litellm.BadGatewayError,
        )
        _require_api_key(litellm, self.settings)
        request = self._request(messages, tools)
        attempts = self.settings.max_retries + 1
        for attempt in range(attempts):
            try:
                response = litellm.completion(**request)
            except transient as exc:
                if _CREDENTIAL_TROUBLE.search(str(exc)):  # some providers report a missing key as a 500
                    raise ModelError(f"{self.settings.model}: {_describe(exc)}", hint=_key_hint(litellm, self.settings.model)) from exc
                if attempt + 1 == attempts:
                    raise ModelError(
                        f"{self.settings.model}: {_describe(exc)} (gave up after {attempts} attempts)",
                        hint="wait and retry, check the provider's status, or raise max_retries",
                    ) from exc
                self._sleep(retry_delay(attempt))
            except _openai_error() as exc:
                raise _permanent_error(litellm, self.settings.model, exc) from exc
            else:
                return _parse_reply(litellm, response, self.settings)
        raise AssertionError("unreachable: the loop returns or raises")

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        settings = self.settings
        request: dict[str, Any] = {
            **settings.options,
            "model": settings.model,
            "messages": messages,
            "timeout": settings.timeout_s,
            # kb retries itself (above); litellm's and the provider SDK's retries would multiply it.
            "num_retries": 0,
        }
        if tools:
            request["tools"] = tools
        if settings.temperature is not None:
            request["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            request["max_tokens"] = settings.max_tokens
        if settings.api_base is not None:
            request["api_base"] = settings.api_base
        return request


def _require_api_key(litellm: ModuleType, settings: ModelRole) -> None:
    """Fail before the first call when the provider's API-key variable is not set.

    Only ``*_API_KEY`` variables count: a local server (``api_base``) or a provider that can take
    credentials from elsewhere (cloud roles, application-default credentials) is left to try.
    """
    if settings.api_base is not None or "api_key" in settings.options:
        return
    try:
        missing = list(litellm.validate_environment(model=settings.model).get("missing_keys") or [])
    except Exception:  # an unknown provider: let the call itself say what is wrong
        return
    if missing and all(name.endswith("_API_KEY") for name in missing):
        raise ModelError(
            f"{settings.model}: no API key: {' or '.join(missing)} is not set",
            hint=f"export {missing[0]}=... (the provider's key), or configure another model in kb.config.yaml",
        )


def _openai_error() -> type[Exception]:
    # Every litellm exception type derives from openai.OpenAIError; openai comes with litellm.
    import openai

    return openai.OpenAIError


def _permanent_error(litellm: ModuleType, model: str, exc: Exception) -> ModelError:
    message = f"{model}: {_describe(exc)}"
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return ModelError(message, hint=_key_hint(litellm, model))
    if isinstance(exc, litellm.NotFoundError):
        return ModelError(message, hint="check the model name in kb.config.yaml")
    if isinstance(exc, litellm.ContextWindowExceededError):
        return ModelError(message, hint="the conversation is too long for this model; use a model with a larger context")
    if isinstance(exc, litellm.BadRequestError):
        return ModelError(message, hint="check the model name and options in kb.config.yaml")
    return ModelError(message, hint="check the model settings in kb.config.yaml")


def _key_hint(litellm: ModuleType, model: str) -> str:
    missing = litellm.validate_environment(model=model).get("missing_keys") or []
    if missing:
        return f"set {' or '.join(missing)} in the environment"
    return "the provider rejected the API key in its environment variable; check or replace it"


def _describe(exc: Exception) -> str:
    """One line naming the error, with any credential from the environment masked."""
    text = str(getattr(exc, "message", None) or exc).strip()
    first_line = text.splitlines()[0] if text else ""
    first_line = re.sub(r"^litellm\.\w+:\s*", "", first_line)  # the type name follows anyway
    return f"{type(exc).__name__}: {_redact(first_line, os.environ)}"


def _redact(text: str, environ: Mapping[str, str]) -> str:
    for name in sorted(environ):
        value = environ[name]
        if _SECRET_ENV_NAME.search(name) and len(value) >= 8 and value in text:
            text = text.replace(value, "***")
    return re.sub(r"\b(sk-[A-Za-z0-9_-]{4})[A-Za-z0-9_-]{8,}", r"\1***", text)


def _parse_reply(litellm: ModuleType, response: Any, settings: ModelRole) -> ModelReply:
    choice = response.choices[0]
    message = choice.message
    tool_calls = tuple(
        ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments or "") for call in (message.tool_calls or ())
    )
    usage = getattr(response, "usage", None)
    return ModelReply(
        content=message.content,
        tool_calls=tool_calls,
        usage=Usage(
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            cost_usd=_cost_usd(litellm, response, settings),
            calls=1,
        ),
        finish_reason=choice.finish_reason,
        raw_model=getattr(response, "model", None),
    )


def _cost_usd(litellm: ModuleType, response: Any, settings: ModelRole) -> float:
    prices = {name: settings.options[name] for name in PRICE_OPTIONS if name in settings.options}
    try:
        cost = litellm.completion_cost(
            completion_response=response,
            model=settings.model,
            custom_cost_per_token=prices or None,
        )
    # completion_cost raises a bare Exception (or BadRequestError) for a model without a price,
    # which is normal for local and new models: such a call costs 0.0, not a failed run.
    except Exception:
        return 0.0
    return float(cost or 0.0)
