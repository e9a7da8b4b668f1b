"""The run plan: a scenario validated once, with the run settings applied, frozen.

Everything that runs a scenario (the runner, worker processes) is given a plan, never a
scenario to check again: the checks ran where the plan was made; each agent is given
only its own part of it (`for_agent`: errorflow.scenario.agent_plan). A plan is made two ways:

- `RunPlan.of(scenario, trials=..., seed=..., propagation=...)`: the settings applied
  and the whole scenario sent through the loader's pipeline (errorflow.scenario.
  overrides `with_settings`), so a scenario built in Python meets a file's checks;
- `RunPlan(scenario)`: for a scenario that has just come out of that pipeline with
  every setting applied (`load`, `apply`, `with_settings`, `without_faults`): the
  command line's, a sweep's cells, a baseline. It is not checked again.

A worker in another process rebuilds the plan from the wire (`from_wire`): the pydantic
model is built again (a `Scenario` cannot exist without its own field and cross-reference
validators), but the loader's second pass is not rerun: the digest proves it is the
scenario that passed it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from errorflow.core.errors import ErrorflowError
from errorflow.scenario.agent_plan import AgentPlan
from errorflow.scenario.overrides import with_settings
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.model import AgentSpec, Scenario

#: The run settings a command line or a caller may give over a scenario's own.
SETTINGS = ("trials", "seed", "propagation")


class PlanDamaged(ErrorflowError, ValueError):
    """A plan read from the wire is not the one that was sent."""


@dataclass(frozen=True)
class RunSettings:
    """The run settings given over the scenario's own (None: the scenario's)."""

    trials: int | None = None
    seed: int | None = None
    propagation: str | None = None

    def given(self) -> dict[str, object]:
        return {k: v for k in SETTINGS if (v := getattr(self, k)) is not None}


@dataclass(frozen=True)
class RunPlan:
    """What a run is given: the validated scenario, its settings applied."""

    scenario: Scenario

    @classmethod
    def of(
        cls,
        scenario: Scenario,
        *,
        trials: int | None = None,
        seed: int | None = None,
        propagation: str | None = None,
    ) -> RunPlan:
        """The scenario with these settings (None: its own), validated once."""
        return cls(with_settings(scenario, trials=trials, seed=seed, propagation=propagation))

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def seed(self) -> int:
        return self.scenario.seed

    @property
    def trials(self) -> int:
        return self.scenario.trials

    @property
    def propagation(self) -> str:
        return self.scenario.propagation

    def agent(self, name: str) -> AgentSpec:
        return self.scenario.agents[name]

    def for_agent(self, name: str) -> AgentPlan:
        """What the agent `name` is given of the run (errorflow.scenario.agent_plan)."""
        return self._agent_plans[name]

    @functools.cached_property
    def _agent_plans(self) -> dict[str, AgentPlan]:
        public = identity.public(self.scenario)  # made once for every agent's view
        return {n: AgentPlan.of(self.scenario, n, public, self.code) for n in self.scenario.agents}

    @functools.cached_property
    def code(self) -> dict[str, str]:
        """The digests of its python agents' and tools' code (identity.code_of), read
        once: the roll calls of a run all say what it began with."""
        return identity.code_of(self.scenario)

    @functools.cached_property
    def sha(self) -> str:
        """The exact scenario's digest (seed, trials and propagation included)."""
        return identity.sha(self.scenario)

    def to_wire(self) -> bytes:
        return self.scenario.model_dump_json().encode()

    @classmethod
    def from_wire(cls, data: bytes | str, sha: str) -> RunPlan:
        """The plan `to_wire` sent, checked against its digest (not against the loader's
        checks again: it passed them where it was made); PlanDamaged if it differs."""
        plan = cls(Scenario.model_validate_json(data))
        if plan.sha != sha:
            raise PlanDamaged("the scenario did not arrive intact")
        return plan
