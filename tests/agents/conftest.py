"""Fixtures for the agents tests: the scripted model, installed per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.agents.scripted import ScriptedLLM, TurnSpec


@pytest.fixture
def scripted() -> Iterator[Callable[[Mapping[str, Sequence[TurnSpec]]], ScriptedLLM]]:
    """Call with {model: turns} to serve ``scripted/<model>``; unregistered after the test."""
    # Imported here, not at the top, so test modules that need no model skip litellm's import.
    from tests.agents.scripted import scripted_provider

    with ExitStack() as stack:

        def install(turns_by_model: Mapping[str, Sequence[TurnSpec]]) -> ScriptedLLM:
            return stack.enter_context(scripted_provider(turns_by_model))

        yield install


def pytest_configure(config: pytest.Config) -> None:
    # litellm builds pydantic models from ReadOnly TypedDicts on its first call; pydantic warns
    # about each one. Harmless here, and not ours to fix.
    config.addinivalue_line("filterwarnings", r"ignore:.*ReadOnly.*:UserWarning")
