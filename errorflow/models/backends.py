"""Choosing a model backend for an agent from its scenario `model:` block, and how the
process serves real models (errorflow/models/serving.py): a dry run answers with the
simulated model, a replay from a cassette, a real run from the server (through the
response cache when one is given)."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from errorflow.core.draws import Draws, DrawsMode
from errorflow.core.errors import InputError
from errorflow.core.seeding import stream
from errorflow.faults.crash import OnCrash
from errorflow.models.api_keys import (
    KEY_ENVS,
    ApiKeys,
    key_for,
    local_hint,
)
from errorflow.models.backend import InfrastructureError as InfrastructureError
from errorflow.models.backend import ModelBackend
from errorflow.models.exchange import Experiment, Place
from errorflow.models.model_faults import model_call_faults, wrap
from errorflow.models.serving import (
    Serving,
    current,
    model_label,
    note_scenario,
    noted_scenario,
)
from errorflow.models.simulated import SimulatedModel
from errorflow.scenario.spec.model import ModelSpec, Scenario


class ConfigurationError(InputError):
    """A run cannot start as configured (said in one line, before any trial runs)."""


if TYPE_CHECKING:
    from errorflow.models.anthropic.backend import AnthropicBackend
    from errorflow.models.anthropic.request import TemperaturePolicy
    from errorflow.models.openai.backend import OpenAIBackend
    from errorflow.models.wire import Client, Wire


def _temperature(serving: Serving) -> TemperaturePolicy:
    policy = serving.temperature
    return "always" if policy == "always" else "never" if policy == "never" else "auto"


def _anthropic(spec: ModelSpec, api_key: str, serving: Serving | None = None) -> AnthropicBackend:
    # Imported here, not at the top: the SDK and its HTTP stack load only for a run that
    # calls a real model (a simulated sweep never pays for them).
    from errorflow.models.anthropic.backend import AnthropicBackend

    serving = serving or current()
    return AnthropicBackend(
        spec,
        api_key,
        limiter=serving.limiter(model_label(spec)),
        temperature=_temperature(serving),
        prompt_cache=serving.prompt_cache,
        max_pacing_s=serving.max_pacing_s,
        timeout_s=serving.request_timeout_s,
        busy=serving.busy_server(model_label(spec)),
        busy_wait_s=serving.server_wait_s,
    )


def _openai(spec: ModelSpec, api_key: str, serving: Serving) -> OpenAIBackend:
    from errorflow.models.openai.backend import OpenAIBackend

    return OpenAIBackend(
        spec,
        api_key,
        limiter=serving.limiter(model_label(spec)),
        temperature=serving.temperature,
        max_pacing_s=serving.max_pacing_s,
        timeout_s=serving.request_timeout_s,
        busy=serving.busy_server(model_label(spec)),
        busy_wait_s=serving.server_wait_s,
    )


def _client(spec: ModelSpec, api_key: str, serving: Serving) -> Client:
    """The client of the API `spec.backend` names, sending through `serving`'s limiter."""
    if spec.backend == "openai":
        return _openai(spec, api_key, serving)
    return _anthropic(spec, api_key, serving)


def _wire(spec: ModelSpec, serving: Serving) -> Wire:
    if spec.backend == "openai":
        from errorflow.models.openai.wire import ChatWire

        return ChatWire.of(spec, serving.temperature)
    from errorflow.models.anthropic.messages_wire import MessagesWire
    from errorflow.models.anthropic.request import WireFormat

    return MessagesWire(WireFormat.of(spec, _temperature(serving), serving.prompt_cache))


def client_for(spec: ModelSpec, api_key: str, serving: Serving) -> Client:
    """The client of a real backend (errorflow calibrate asks it outside any run)."""
    return _client(spec, api_key, serving)


def wire_for(spec: ModelSpec, serving: Serving) -> Wire:
    """How `spec`'s requests are rendered and its replies parsed."""
    return _wire(spec, serving)


class BackendFactory:
    """Makes the backend an agent uses for one trial.

    `scenario` is the run's (for the keys of the response cache and the traffic log);
    without it, the one `check_backends` noted for this run is used."""

    def __init__(
        self,
        spec: ModelSpec,
        seed: int,
        agent: str,
        api_key: str | ApiKeys | None = None,
        scenario: Scenario | None = None,
    ) -> None:
        self.spec, self.seed, self.agent = spec, seed, agent
        self.draws: DrawsMode = scenario.draws if scenario is not None else "sequential"
        self.serving = current()
        #: Injected model faults and crashes (errorflow/models/model_faults.py); an agent
        #: process sets `on_crash` so that a crash ends it (errorflow/runtime/agent_process.py).
        self.faults = model_call_faults(spec, scenario, agent, seed)
        self.on_crash: OnCrash | None = None
        self._shared: Client | None = None
        real = spec.backend != "simulated"
        if not real or self.serving.tally is not None:  # a dry run: the simulation answers
            self._tendencies = spec.tendencies()
        if not real:
            return
        self.label = model_label(spec)
        served = scenario or noted_scenario()
        self.experiment = Experiment.of(served) if served is not None else None
        self.wire = _wire(spec, self.serving)
        if self.serving.calls_servers:
            key = key_for(api_key, spec.backend)
            if not key:
                raise ConfigurationError(f"{spec.backend} backend needs an API key")
            self._shared = _client(spec, key, self.serving)

    def for_trial(self, trial: int, owner: str | None = None) -> ModelBackend:
        name = owner or self.agent
        backend = self._backend(trial, name)
        return wrap(self.faults, backend, trial, name, self.on_crash)

    def _backend(self, trial: int, name: str) -> ModelBackend:
        if self.spec.backend == "simulated":
            rng = stream(self.seed, trial, name, "model")
            return SimulatedModel(self._tendencies, rng, self._paired(trial, name))
        tally = self.serving.tally
        if tally is not None:
            from errorflow.models.model_estimate import EstimatingBackend

            rng = stream(self.seed, trial, name, "model")
            simulated = SimulatedModel(self._tendencies, rng, self._paired(trial, name))
            return EstimatingBackend(simulated, self.wire, tally, self.label)
        from errorflow.models.served_backend import ServedBackend

        place = Place(trial, name)
        return ServedBackend(
            self.wire, self._shared, self.serving, self.label, self.experiment, place
        )

    def _paired(self, trial: int, name: str) -> Draws | None:
        """A stream per decision when the scenario asks for paired draws
        (errorflow.core.draws); None keeps the conversation's one stream."""
        if self.draws != "paired":
            return None
        return Draws.of_conversation(self.seed, trial, name, "paired")

    async def aclose(self) -> None:
        if self._shared is not None:
            await self._shared.aclose()


def check_backends(scenario: Scenario, env: Mapping[str, str] | None = None) -> ApiKeys | None:
    """Everything the model backends need, checked before a run starts (and the scenario
    noted for the backends made next: see `note_scenario`).

    Returns the API keys of the real backends the agents use (from the environment
    only: never from the scenario file, errorflow/models/api_keys.py) or None when no
    agent needs one (none calls a real model, or a cassette or a dry run answers for
    them)."""
    note_scenario(scenario)
    env = os.environ if env is None else env
    needs_key = [n for n, a in scenario.agents.items() if a.model.backend in KEY_ENVS]
    for name, agent in scenario.agents.items():
        if agent.model.backend == "simulated":
            try:
                agent.model.tendencies()
            except ValueError as exc:
                raise ConfigurationError(f"agents.{name}.model: {exc}") from None
        elif not agent.model.model:
            raise ConfigurationError(f"agents.{name}.model.model: name the model to call")
    serving = current()
    if not needs_key or serving.tally is not None:
        return None
    cassette = serving.cassette
    if cassette is not None:
        if Experiment.of(scenario).digest not in cassette.experiments:
            raise ConfigurationError(
                f"{cassette.path.name} recorded {cassette.recorded()}, not this experiment "
                f"({scenario.name} seed {scenario.seed}, propagation {scenario.propagation}): "
                "replay the scenario, seed and --set options it was recorded with"
            )
        return None
    return ApiKeys({backend: _key(scenario, backend, env) for backend in _backends(scenario)})


def _backends(scenario: Scenario) -> list[str]:
    """The real backends the agents use, each once, in the order of the agents."""
    named = (a.model.backend for a in scenario.agents.values())
    return list(dict.fromkeys(b for b in named if b in KEY_ENVS))


def _key(scenario: Scenario, backend: str, env: Mapping[str, str]) -> str:
    name = KEY_ENVS[backend]
    key = env.get(name)
    if not key:
        users = [n for n, a in scenario.agents.items() if a.model.backend == backend]
        raise ConfigurationError(
            f"agent(s) {', '.join(users)} use the {backend} backend but {name} "
            f"is not set ({local_hint(backend)})"
        )
    return key


#: A model server as the check asks it: backend, base_url, model.
_Server = tuple[str, str | None, str | None]


async def check_servers(
    scenario: Scenario, api_key: str | ApiKeys | None, only: Collection[str] | None = None
) -> None:
    """Ask every real model server the agents (or the agents `only` names) call, once
    per (server, model), before the first trial: reachable, key accepted, model present.
    A failure raises `InfrastructureError` naming the agents and the server; a simulated
    model needs no check, nor does any model of a replay or a dry run. `api_key` is
    what `check_backends` returned."""
    if not current().calls_servers:
        return
    users: dict[_Server, list[str]] = {}
    specs: dict[_Server, ModelSpec] = {}
    for name, agent in scenario.agents.items():
        if agent.model.backend == "simulated" or (only is not None and name not in only):
            continue
        where: _Server = (agent.model.backend, agent.model.base_url, agent.model.model)
        users.setdefault(where, []).append(name)
        specs.setdefault(where, agent.model)
    for where, names in users.items():
        key = key_for(api_key, where[0])
        if not key:
            raise ConfigurationError(f"{where[0]} backend needs an API key")
        backend = _client(specs[where], key, current())
        try:
            await backend.check()
        except InfrastructureError as exc:
            agents = ", ".join(f"agents.{n}.model" for n in names)
            raise InfrastructureError(f"{agents}: {exc}") from None
        finally:
            await backend.aclose()
