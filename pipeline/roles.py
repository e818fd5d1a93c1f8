"""Which agents play Proposer and Reviewer: configured models (through litellm) or the built-in
offline ones. Both kinds implement the same protocols (``agents.protocols``).

Families come from the model names; a proposer and reviewer of the same family are refused
unless ``models.allow_same_family: true``. The built-in offline agents are families of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from agents.family import check_distinct_families, model_family
from agents.llm import LiteLLMClient, budget_for
from agents.offline.proposer import OfflineProposer
from agents.offline.reviewer import OfflineReviewer
from agents.protocols import AgentIdentity, Proposer, Reviewer
from kb.config import Config, ModelRole


@dataclass(frozen=True)
class Agents:
    proposer: Proposer
    reviewer: Reviewer


def identity_of(role: ModelRole) -> AgentIdentity:
    return AgentIdentity(role.model, model_family(role.model, role.family))


def client_for(role: ModelRole, sleep: Callable[[float], None] = time.sleep) -> LiteLLMClient:
    return LiteLLMClient(role, sleep=sleep)


def make_agents(config: Config) -> Agents:
    """The configured Proposer and Reviewer; the offline ones where no model is set."""
    from agents.proposer import ModelProposer
    from agents.reviewer import ModelReviewer

    models = config.models
    budget = budget_for(config.loop)
    proposer: Proposer = (
        OfflineProposer(config.privacy)
        if models.proposer is None
        else ModelProposer(client_for(models.proposer), identity_of(models.proposer), budget)
    )
    reviewer: Reviewer = (
        OfflineReviewer() if models.reviewer is None else ModelReviewer(client_for(models.reviewer), identity_of(models.reviewer), budget)
    )
    check_distinct_families(proposer.identity.family, reviewer.identity.family, models.allow_same_family)
    return Agents(proposer, reviewer)
