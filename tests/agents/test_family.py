"""Model families derived from litellm model names, and the same-family refusal."""

from __future__ import annotations

import pytest

from agents.family import check_distinct_families, model_family
from kb.errors import ConfigError

FAMILIES = [
    # openai
    ("gpt-4o", "openai"),
    ("gpt-4.1-mini", "openai"),
    ("gpt-5", "openai"),
    ("o1-preview", "openai"),
    ("o3-mini", "openai"),
    ("o4-mini", "openai"),
    ("chatgpt-4o-latest", "openai"),
    ("openai/gpt-4o", "openai"),
    ("azure/my-gpt4o-deployment", "openai"),
    ("azure/prod-east", "openai"),
    ("ft:gpt-4o-mini-2024-07-18:acme::abc123", "openai"),
    ("groq/openai/gpt-oss-120b", "openai"),
    # anthropic
    ("claude-sonnet-4-5", "anthropic"),
    ("claude-3-5-haiku-20241022", "anthropic"),
    ("anthropic/claude-opus-4-1", "anthropic"),
    ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "anthropic"),
    ("bedrock/us.anthropic.claude-3-7-sonnet-20250219-v1:0", "anthropic"),
    ("vertex_ai/claude-3-5-sonnet@20240620", "anthropic"),
    ("openrouter/anthropic/claude-3.5-sonnet", "anthropic"),
    # google
    ("gemini/gemini-2.5-pro", "google"),
    ("gemini-1.5-flash", "google"),
    ("vertex_ai/gemini-2.0-flash", "google"),
    ("groq/gemma2-9b-it", "google"),
    ("ollama/gemma3:27b", "google"),
    # deepseek
    ("deepseek/deepseek-chat", "deepseek"),
    ("deepseek-reasoner", "deepseek"),
    ("openrouter/deepseek/deepseek-r1", "deepseek"),
    # moonshot
    ("moonshot/kimi-k2-0711-preview", "moonshot"),
    ("moonshot/moonshot-v1-8k", "moonshot"),
    ("openrouter/moonshotai/kimi-k2", "moonshot"),
    # qwen
    ("dashscope/qwen-max", "qwen"),
    ("qwq-32b", "qwen"),
    ("fireworks_ai/accounts/fireworks/models/qwen2p5-72b-instruct", "qwen"),
    ("hosted_vllm/Qwen/Qwen2.5-7B-Instruct", "qwen"),
    ("ollama_chat/qwen2.5-coder:7b", "qwen"),
    # meta
    ("ollama/llama3", "meta"),
    ("ollama/llama3.1:8b", "meta"),
    ("groq/llama-3.1-70b-versatile", "meta"),
    ("together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo", "meta"),
    ("bedrock/meta.llama3-70b-instruct-v1:0", "meta"),
    ("lm_studio/meta-llama-3.1-8b-instruct", "meta"),
    # mistral
    ("mistral/mistral-large-latest", "mistral"),
    ("mistral/open-mistral-nemo", "mistral"),
    ("groq/mixtral-8x7b-32768", "mistral"),
    ("codestral/codestral-latest", "mistral"),
    ("magistral-medium-2506", "mistral"),
    # xai, zhipu
    ("xai/grok-4", "xai"),
    ("openrouter/x-ai/grok-3-mini", "xai"),
    ("zai/glm-4.5", "zhipu"),
    ("openrouter/z-ai/glm-4.6", "zhipu"),
    # an unknown model name routed through a single-family provider or a known organisation
    ("anthropic/some-future-model", "anthropic"),
    ("openrouter/mistralai/some-future-model", "mistral"),
]


@pytest.mark.parametrize(("model", "family"), FAMILIES)
def test_family_is_derived_from_the_model_name(model: str, family: str) -> None:
    assert model_family(model) == family


def test_the_table_covers_every_family_the_design_names() -> None:
    named = {"openai", "anthropic", "google", "deepseek", "moonshot", "qwen", "meta", "mistral", "xai", "zhipu"}
    assert named <= {family for _, family in FAMILIES}
    assert len(FAMILIES) >= 25


@pytest.mark.parametrize(
    "model",
    ["ollama/my-finetune", "hosted_vllm/acme-7b", "openai/local-model", "lm_studio/whatever", "scripted/proposer"],
)
def test_an_underivable_family_needs_a_declared_one(model: str) -> None:
    with pytest.raises(ConfigError) as raised:
        model_family(model)
    assert model in raised.value.message
    assert "family:" in raised.value.hint


def test_a_declared_family_wins() -> None:
    assert model_family("ollama/my-finetune", declared="meta") == "meta"
    assert model_family("gpt-4o", declared="Acme") == "acme"
    assert model_family("gpt-4o", declared="  ") == "openai"


def test_same_family_is_refused() -> None:
    with pytest.raises(ConfigError) as raised:
        check_distinct_families("anthropic", "Anthropic", allow_same_family=False)
    assert "proposer and reviewer are both anthropic models" in raised.value.message
    assert "allow_same_family: true" in raised.value.hint


def test_same_family_is_allowed_when_the_config_says_so() -> None:
    check_distinct_families("openai", "openai", allow_same_family=True)


def test_different_families_pass() -> None:
    check_distinct_families(model_family("gpt-4o"), model_family("claude-sonnet-4-5"), allow_same_family=False)
