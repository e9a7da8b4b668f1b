"""What one agent is given of a run: its own spec and policy, its place in the graph
and in a discussion, the task, the run's settings, read once from the validated
scenario (errorflow.scenario.run_plan).

The agent (errorflow.agents) never sees the whole scenario: what it needs of the tool
world (the tools it calls, the ground truth, which identifiers a fault withholds) comes
through errorflow.world.tool_world, and its model backends are made for it at the edge
(errorflow.runtime.participants). A plan is frozen; the specs it holds are the scenario's
own, read and never changed by an agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from pydantic import JsonValue

from errorflow.faults.bus import BusFaultPlan
from errorflow.policies.config import PolicyConfig
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.model import AgentSpec, Scenario, TaskSpec
from errorflow.scenario.spec.run_time import arrival_times

#: The tool kind whose call delivers the agent's report.
REPORT_SINK = "report_sink"


@dataclass(frozen=True, eq=False)
class AgentPlan:
    """One agent's view of the run (built by `of`, or `RunPlan.for_agent`)."""

    name: str
    spec: AgentSpec
    #: The run's settings an agent acts on.
    seed: int
    propagation: Literal["explicit", "implicit"]
    time_scale: float
    #: State lives across trials: trials arrive over run time (`arrivals`).
    run_scoped: bool
    #: The run's agents (who may send to whom on the bus).
    members: frozenset[str]
    #: The agents whose results it waits for (none: the runner's task).
    upstream: tuple[str, ...]
    #: Reviewers that may send its work back, and the last revision round they may ask.
    returners: tuple[str, ...]
    last_revision: int
    #: Its discussion peers (none: not in a discussion), the discussion's rounds, whether
    #: its last answer goes on, and which of its peers' do.
    peers: tuple[str, ...]
    rounds: int
    decides: bool
    deciding_peers: tuple[str, ...]
    task: TaskSpec
    #: Its manager when it is a delegate, and the needs of the sub-task it gets (None:
    #: the whole task).
    manager: str | None
    assigned: frozenset[str] | None
    #: A manager's delegates and the needs each one's sub-task holds (empty: none).
    dispatch: Mapping[str, tuple[str, ...]]
    #: Its tools whose call delivers the report.
    delivers: frozenset[str]
    #: When each trial arrives, in run time (run-scoped runs only; empty otherwise).
    arrivals: tuple[float, ...]
    #: The faults its endpoint injects into the messages it sends (None: none).
    bus_faults: BusFaultPlan | None
    #: The part of the run's public scenario an agent's behaviour depends on: a roll
    #: call naming another is another experiment.
    identity: Mapping[str, JsonValue]

    @classmethod
    def of(
        cls,
        scenario: Scenario,
        name: str,
        public: Mapping[str, JsonValue] | None = None,
        code: Mapping[str, str] | None = None,
    ) -> AgentPlan:
        """`name`'s view of `scenario` (`public`: its public form, `code`: its code's
        digests, when already made)."""
        spec = scenario.agents[name]
        returners = tuple(n for n, a in scenario.agents.items() if a.returns_to == name)
        peers = tuple(scenario.peers_of(name))
        assigned = scenario.assigned_needs(name)
        view = identity.agent_view(
            public if public is not None else identity.public(scenario),
            code if code is not None else identity.code_of(scenario),
        )
        return cls(
            name=name,
            spec=spec,
            seed=scenario.seed,
            propagation=scenario.propagation,
            time_scale=scenario.time_scale,
            run_scoped=scenario.run_scoped,
            members=frozenset(scenario.agents),
            upstream=tuple(scenario.upstream_of(name)),
            returners=returners,
            last_revision=max((scenario.agents[r].max_revisions for r in returners), default=0),
            peers=peers,
            rounds=scenario.discussion.rounds if peers else 0,
            decides=scenario.decides(name),
            deciding_peers=tuple(p for p in peers if scenario.decides(p)),
            task=scenario.task,
            manager=scenario.manager_of(name),
            assigned=None if assigned is None else frozenset(assigned),
            dispatch=MappingProxyType(
                {d: tuple(scenario.assigned_needs(d) or ()) for d in spec.delegates}
            ),
            delivers=frozenset(t for t in spec.tools if scenario.tools[t].kind == REPORT_SINK),
            arrivals=arrival_times(scenario) if scenario.run_scoped else (),
            bus_faults=scenario.bus.plan(scenario.seed, scenario.time_scale),
            identity=MappingProxyType(view),
        )

    @property
    def policy(self) -> PolicyConfig:
        """Its policy, built when the scenario was validated."""
        return self.spec.policy.config

    def arrival(self, trial: int) -> float:
        """The run time (simulated seconds) at which `trial` arrives."""
        return self.arrivals[trial] if 0 <= trial < len(self.arrivals) else 0.0

    def need_tools(self, key: str) -> list[str]:
        """The tools that serve a claim's need (`need` or `need.item`): its tool and its
        second sources (none for a key no need has)."""
        need = next((n for n in self.task.needs if n.id == key.split(".", 1)[0]), None)
        return need.tools if need is not None else []
