"""Model families: which vendor trained a model, derived from its litellm model name.

The Reviewer must come from another family than the Proposer, so that one vendor's blind spots
are not approved by the same blind spots. The family is read from the model name, not from the
provider that serves it: ``openrouter/anthropic/claude-...``, ``bedrock/anthropic.claude-...``
and ``claude-...`` are all anthropic, ``groq/llama-...`` and ``ollama/llama3`` are meta.

A name that names no known family (a local server's own alias, ``openai/my-model`` on an
OpenAI-compatible server) needs ``family:`` declared in the role's config; a declared family
always wins.
"""

from __future__ import annotations

import re

from kb.errors import ConfigError

# Checked against each name token (the path after the provider, split on "/" and "."), last
# token first, so the model's own name outranks the organisation or route in front of it.
_NAME_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), family)
    for pattern, family in (
        (r"(gpt-?\d|gpt-|chatgpt|ft:gpt|o\d+(-|$)|codex|text-davinci)", "openai"),
        (r"claude", "anthropic"),
        (r"(gemini|gemma|learnlm)", "google"),
        (r"deepseek", "deepseek"),
        (r"(kimi|moonshot)", "moonshot"),
        (r"(qwen|qwq|qvq)", "qwen"),
        (r"(llama|meta-llama|codellama)", "meta"),
        (r"(mistral|mixtral|codestral|magistral|ministral|devstral|pixtral|open-mi[sx]tral)", "mistral"),
        (r"grok", "xai"),
        (r"(glm|chatglm|codegeex)", "zhipu"),
        (r"(command-|command$|c4ai-)", "cohere"),
        (r"(nova-|titan-)", "amazon"),
        (r"phi-?\d", "microsoft"),
    )
)

# Organisation names that appear as a path segment (openrouter/x-ai/...) or a Bedrock-style
# prefix (anthropic.claude-...), used when the model's own name is not recognised.
_VENDOR_TOKENS: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "meta": "meta",
    "meta-llama": "meta",
    "mistralai": "mistral",
    "deepseek-ai": "deepseek",
    "moonshotai": "moonshot",
    "qwen": "qwen",
    "x-ai": "xai",
    "z-ai": "zhipu",
    "zai-org": "zhipu",
    "thudm": "zhipu",
    "cohere": "cohere",
    "amazon": "amazon",
    "microsoft": "microsoft",
}

# Providers that serve a single family whatever the model is called. "openai/" is absent on
# purpose: it is also litellm's route to any OpenAI-compatible server, where the name is free.
_SINGLE_FAMILY_PROVIDERS: dict[str, str] = {
    "azure": "openai",
    "text-completion-openai": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "deepseek": "deepseek",
    "moonshot": "moonshot",
    "dashscope": "qwen",
    "xai": "xai",
    "mistral": "mistral",
    "codestral": "mistral",
    "zai": "zhipu",
    "cohere": "cohere",
    "cohere_chat": "cohere",
}


def model_family(model: str, declared: str | None = None) -> str:
    """The family of ``model``: ``declared`` when given, else derived from the name.

    Raises ConfigError when the name names no known family and none is declared.
    """
    if declared is not None and declared.strip():
        return declared.strip().lower()
    family = _derive_family(model)
    if family is None:
        raise ConfigError(
            f"cannot tell which model family {model!r} belongs to",
            hint=(
                f"set `family:` next to `model: {model}` in this role's config in kb.config.yaml "
                "(for example `family: meta` for a Llama model served locally)"
            ),
        )
    return family


def check_distinct_families(proposer_family: str, reviewer_family: str, allow_same_family: bool) -> None:
    """Refuse a Reviewer of the Proposer's own family unless the config explicitly allows it."""
    if allow_same_family:
        return
    if proposer_family.strip().lower() == reviewer_family.strip().lower():
        raise ConfigError(
            f"proposer and reviewer are both {proposer_family.strip().lower()} models; the reviewer must come from another model family",
            hint=("configure a reviewer model from another family, or set `allow_same_family: true` in kb.config.yaml"),
        )


def _derive_family(model: str) -> str | None:
    name = model.strip().lower()
    provider, slash, path = name.partition("/")
    if not slash:
        provider, path = "", name
    if provider == "azure":
        return "openai"
    tokens = [token for token in re.split(r"[/.]", path) if token]
    for token in reversed(tokens):
        for pattern, family in _NAME_PATTERNS:
            if pattern.match(token):
                return family
    for token in reversed(tokens[:-1]):
        if token in _VENDOR_TOKENS:
            return _VENDOR_TOKENS[token]
    return _SINGLE_FAMILY_PROVIDERS.get(provider)
