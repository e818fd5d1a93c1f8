"""Which agents play Proposer and Reviewer: configured models (via litellm) or the offline ones.

Families come from the model names; a proposer and reviewer of the same family are refused
unless ``models.allow_same_family: true``. The built-in offline agents are families of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.family import check_distinct_families, model_family
from kb.config import Config, ModelRole
from pipeline.records import OFFLINE_PROPOSER, OFFLINE_REVIEWER


@dataclass(frozen=True)
class Role:
    model: str
    family: str
    settings: ModelRole | None  # None: the built-in offline agent

    @property
    def offline(self) -> bool:
        return self.settings is None


@dataclass(frozen=True)
class Roles:
    proposer: Role
    reviewer: Role
    allow_same_family: bool


def _role(setting: ModelRole | None, offline: tuple[str, str]) -> Role:
    if setting is None:
        return Role(offline[0], offline[1], None)
    return Role(setting.model, model_family(setting.model, setting.family), setting)


def resolve_roles(config: Config) -> Roles:
    models = config.models
    proposer = _role(models.proposer, OFFLINE_PROPOSER)
    reviewer = _role(models.reviewer, OFFLINE_REVIEWER)
    check_distinct_families(proposer.family, reviewer.family, models.allow_same_family)
    return Roles(proposer, reviewer, models.allow_same_family)


def client_for(role: Role, sleep=None):  # noqa: ANN001, ANN201 - agents.llm types, imported lazily
    """A litellm client for a configured role; invalid options are a ConfigError."""
    import time

    from pydantic import ValidationError

    from agents.llm import LiteLLMClient, ModelSettings
    from kb.errors import ConfigError

    if role.settings is None:
        raise ConfigError(f"{role.model} is a built-in offline agent, not a model")
    try:
        settings = ModelSettings(**role.settings.model_dump())
    except ValidationError as exc:
        raise ConfigError(f"kb.config.yaml: model {role.model}: {exc.errors()[0]['msg']}") from None
    return LiteLLMClient(settings, sleep=sleep or time.sleep)
