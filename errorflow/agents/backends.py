"""Choosing a model backend for an agent from its scenario `model:` block."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from errorflow.agents.model import InfrastructureError as InfrastructureError
from errorflow.agents.model import ModelBackend
from errorflow.agents.simulated import SimulatedModel
from errorflow.core.seeding import stream
from errorflow.scenario.model import ModelSpec, Scenario
from errorflow.scenario.profiles import behaviour


class ConfigurationError(Exception):
    """A run cannot start as configured (said in one line, before any trial runs)."""


if TYPE_CHECKING:
    from errorflow.agents.anthropic_backend import AnthropicBackend


def _anthropic(spec: ModelSpec, api_key: str) -> AnthropicBackend:
    # Imported here, not at the top: the SDK and its HTTP stack load only for a run that
    # calls a real model (a simulated sweep never pays for them).
    from errorflow.agents.anthropic_backend import AnthropicBackend

    return AnthropicBackend(spec, api_key)


class BackendFactory:
    """Makes the backend an agent uses for one trial."""

    def __init__(self, spec: ModelSpec, seed: int, agent: str, api_key: str | None = None) -> None:
        self.spec, self.seed, self.agent = spec, seed, agent
        self._shared: ModelBackend | None = None
        if spec.backend == "simulated":
            self._behaviour = behaviour(spec.profile, spec.params)
        else:
            if not api_key:
                raise ConfigurationError("anthropic backend needs an API key")
            self._shared = _anthropic(spec, api_key)

    def for_trial(self, trial: int, owner: str | None = None) -> ModelBackend:
        if self._shared is not None:
            return self._shared
        name = owner or self.agent
        return SimulatedModel(self._behaviour, stream(self.seed, trial, name, "model"))

    async def aclose(self) -> None:
        close = getattr(self._shared, "aclose", None)
        if close is not None:
            await close()


def check_backends(scenario: Scenario, env: Mapping[str, str] | None = None) -> str | None:
    """Everything the model backends need, checked before a run starts.

    Returns the API key for the Anthropic backend (from the environment only: never
    from the scenario file) or None when no agent needs one."""
    env = os.environ if env is None else env
    needs_key = [n for n, a in scenario.agents.items() if a.model.backend == "anthropic"]
    for name, agent in scenario.agents.items():
        if agent.model.backend == "simulated":
            try:
                behaviour(agent.model.profile, agent.model.params)
            except ValueError as exc:
                raise ConfigurationError(f"agents.{name}.model: {exc}") from None
        elif not agent.model.model:
            raise ConfigurationError(f"agents.{name}.model.model: name the model to call")
    if not needs_key:
        return None
    key = env.get("ANTHROPIC_API_KEY")
    if not key:
        raise ConfigurationError(
            f"agent(s) {', '.join(needs_key)} use the anthropic backend but ANTHROPIC_API_KEY "
            "is not set (for Ollama any value works, e.g. ANTHROPIC_API_KEY=ollama)"
        )
    return key


async def check_servers(
    scenario: Scenario, api_key: str | None, only: Collection[str] | None = None
) -> None:
    """Ask every real model server the agents (or the agents `only` names) call, once
    per (server, model), before the first trial: reachable, key accepted, model present.
    A failure raises `InfrastructureError` naming the agents and the server; a simulated
    model needs no check. `api_key` is what `check_backends` returned."""
    users: dict[tuple[str | None, str | None], list[str]] = {}
    specs: dict[tuple[str | None, str | None], ModelSpec] = {}
    for name, agent in scenario.agents.items():
        if agent.model.backend == "simulated" or (only is not None and name not in only):
            continue
        where = (agent.model.base_url, agent.model.model)
        users.setdefault(where, []).append(name)
        specs.setdefault(where, agent.model)
    for where, names in users.items():
        if not api_key:
            raise ConfigurationError("anthropic backend needs an API key")
        backend = _anthropic(specs[where], api_key)
        try:
            await backend.check()
        except InfrastructureError as exc:
            agents = ", ".join(f"agents.{n}.model" for n in names)
            raise InfrastructureError(f"{agents}: {exc}") from None
        finally:
            await backend.aclose()
