"""Scenario files: the pydantic model of a scenario.

A scenario names the agents (role, what they do, model, tools, policy, who they send
to), the tools (their kind, schema and injected faults), the world of facts the tools
serve, and the task. The loader (errorflow.scenario.loader) validates everything a run
needs before anything starts, and words every problem for the person who wrote the
file. The blocks live in their own modules (world_model, tool_model, need_model; the
faults' in errorflow.faults); cross-references are checked in
errorflow.scenario.checks.references.
See scenarios/FORMAT.md for the reference.
"""

from __future__ import annotations

import difflib
import functools
from typing import Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from errorflow.core.draws import DrawsMode
from errorflow.core.shapes import (
    Extended,
    Ident,
    Probability,
    Strict,
)
from errorflow.faults.agent import AgentFault
from errorflow.faults.bus import BusFaultSpec
from errorflow.faults.model import ModelFault
from errorflow.protocol import topics
from errorflow.scenario.checks.fault_checks import bus_problems
from errorflow.scenario.checks.references import all_problems, key_columns
from errorflow.scenario.provenance.profile_file import InlinedProfile
from errorflow.scenario.provenance.view import ProfileView, profile_view, tendencies_of
from errorflow.scenario.spec.agent_policy import AgentPolicy
from errorflow.scenario.spec.behaviour import (
    BEHAVIOURS,
    ROLE_PRESETS,
    Behaviour,
    BehaviourName,
    behaviour_of,
)
from errorflow.scenario.spec.catalog import BATCH_KINDS
from errorflow.scenario.spec.defence_model import InspectorSpec
from errorflow.scenario.spec.discussion_model import DiscussionSpec
from errorflow.scenario.spec.need_model import FromNeed, NeedSpec, TaskSpec
from errorflow.scenario.spec.profiles import Tendencies
from errorflow.scenario.spec.service_model import ArrivalSpec, ServiceSpec
from errorflow.scenario.spec.sweep_model import SweepAxis, SweepSpec
from errorflow.scenario.spec.tool_model import BusinessFailure, ToolSpec
from errorflow.scenario.spec.world_model import Paper, TableSpec, WorldSpec

__all__ = [
    "AgentSpec",
    "BusinessFailure",
    "FromNeed",
    "ModelSpec",
    "NeedSpec",
    "Paper",
    "Probability",
    "Reference",
    "Scenario",
    "SweepAxis",
    "SweepSpec",
    "TableSpec",
    "TaskSpec",
    "ToolSpec",
    "WorldSpec",
]

#: Documented limits (scenarios/FORMAT.md "Limits"); the loader refuses anything beyond
#: them. MAX_TOOLS, MAX_STEPS, MAX_DOCUMENT_BYTES and MAX_FINDINGS_BYTES are checked by
#: the loader's second pass (errorflow.scenario.checks.scenario_checks): a scenario built
#: from data, an override or a stored run may exceed them.
MAX_TRIALS = 100_000
#: Names the bus uses for itself: the runner, broadcasts and event observers.
RESERVED_NAMES = frozenset({"runner", "all", "observers"})
MAX_AGENTS = 64
MAX_NEEDS = 64
MAX_TOOLS = 64
#: Largest `guards.max_steps` an agent's policy may set (agent steps per task).
MAX_STEPS = 1_000
#: Largest single world document (UTF-8 bytes); tools return documents inside messages.
MAX_DOCUMENT_BYTES = 64 * 1024
#: How long a python agent's own code may run (`function_timeout_s`): below the runner's
#: trial timeout (120 s), so a trial whose code never returns shows the agent's timeout,
#: not a bus fault.
DEFAULT_FUNCTION_TIMEOUT_S = 60.0
#: Largest total of what a task's needs fetch (UTF-8 bytes): half the bus message limit
#: (errorflow.protocol.envelope.MAX_MESSAGE_BYTES, 256 KiB), leaving room for the envelope,
#: the errors and a report that quotes the findings.
MAX_FINDINGS_BYTES = 128 * 1024


class ModelSpec(Extended):
    added_fields = frozenset({"faults", "profile_file", "record_content"})

    backend: Literal["simulated", "anthropic", "openai"] = "simulated"
    #: A built-in profile's name, or a profile file (errorflow.scenario.provenance).
    profile: str = Field(default="small-local", min_length=1, max_length=1000)
    #: Behaviour overrides of the profile, as written (checked against the profile's
    #: fields by the loader: errorflow.scenario.spec.profiles).
    params: dict[str, object] = Field(default_factory=dict, description="behaviour overrides")
    model: str | None = None
    base_url: str | None = None
    max_tokens: int = Field(default=1024, ge=1, le=200_000)
    temperature: float = Field(default=0.7, ge=0, le=2)
    #: Injected 429s, 529s, 5xxs and timeouts on the model's calls (errorflow.faults.model).
    faults: list[ModelFault] = Field(default_factory=list, max_length=16)
    #: The profile file `profile` names, as the loader read it (never written by hand).
    profile_file: InlinedProfile | None = None
    #: Keep each call's request and reply (redacted, clipped) in its `model_call` event,
    #: for traces and OTLP spans. Off: a real model's content stays out of the store.
    record_content: bool = False

    def tendencies(self) -> Tendencies:
        """What the simulated model acts on: the profile with `params` on top."""
        return tendencies_of(self.profile, self.params, self.profile_file)

    def profile_view(self) -> ProfileView:
        """The profile with where each parameter came from."""
        return profile_view(self.profile, self.params, self.profile_file)


class AgentSpec(Extended):
    added_fields = frozenset(
        {
            "behaviour",
            "instructions",
            "waits_for",
            "faults",
            "wait_s",
            "peers",
            "challenge",
            "inspector",
            "function",
            "delegates",
            "function_timeout_s",
        }
    )

    # `behaviour` comes first so that `role` is checked knowing it (a dump leaves it
    # out while it is None, so the order of an older file's dump is unchanged).
    behaviour: BehaviourName | None = None
    #: A preset (researcher, writer, reviewer) or a name of the user's, with `behaviour`.
    role: Ident
    #: The system prompt a real model gets (default: the behaviour's).
    instructions: str | None = Field(default=None, min_length=1, max_length=20_000)
    model: ModelSpec = Field(default_factory=ModelSpec)
    tools: list[Ident] = Field(default_factory=list, max_length=32)
    #: The preset and overrides as written, and the PolicyConfig they build.
    policy: AgentPolicy = Field(default_factory=AgentPolicy.default)
    sends_to: list[Ident] = Field(default_factory=list, max_length=MAX_AGENTS)
    returns_to: Ident | None = Field(
        default=None,
        description="reviewers: the upstream agent to send work back to for revision",
    )
    max_revisions: int = Field(default=1, ge=0, le=5, description="send-back rounds per trial")
    #: A manager's workers: each gets a sub-task (the needs its tools serve) and sends
    #: its result back to this agent, which then does its own work with their answers
    #: (errorflow.scenario.checks.delegation_checks).
    delegates: list[Ident] = Field(default_factory=list, max_length=MAX_AGENTS)
    #: Upstream agents, declared from the receiving side (the same edges as their
    #: `sends_to`: a result goes to every agent that waits for it).
    waits_for: list[Ident] = Field(default_factory=list, max_length=MAX_AGENTS)
    #: Faults injected into the agent itself (errorflow.faults.agent).
    faults: list[AgentFault] = Field(default_factory=list, max_length=16)
    #: How long (simulated seconds) the agent waits for an input before going on without it.
    wait_s: float = Field(default=120.0, gt=0, le=86_400)
    #: Agents it discusses with, both ways, for `discussion.rounds` (discussion_model).
    peers: list[Ident] = Field(default_factory=list, max_length=MAX_AGENTS)
    #: Defences (defence_model): re-check received claims; an inspector on its inputs.
    challenge: Probability = 0.0
    inspector: InspectorSpec | None = None
    #: `behaviour: python`: the async callable that does the agent's work
    #: (`package.module:callable` or `path/file.py:callable`; errorflow.agents.own).
    function: str | None = Field(default=None, min_length=3, max_length=500)
    #: How long (real seconds) `function` may run on its own, its tool and model calls
    #: not counted; past it the agent fails with a timeout (errorflow.agents.own).
    function_timeout_s: float = Field(default=DEFAULT_FUNCTION_TIMEOUT_S, gt=0, le=3600)

    @model_validator(mode="after")
    def _function_with_python(self) -> AgentSpec:
        if self.behaviour == "python" and self.function is None:
            raise ValueError("a python agent needs `function: package.module:callable`")
        if self.function is not None and self.behaviour != "python":
            raise ValueError("`function` is for `behaviour: python` agents only")
        if "function_timeout_s" in self.model_fields_set and self.behaviour != "python":
            raise ValueError("`function_timeout_s` is for `behaviour: python` agents only")
        return self

    @field_validator("role")
    @classmethod
    def _preset_or_behaviour(cls, role: str, info: ValidationInfo) -> str:
        if role in ROLE_PRESETS or info.data.get("behaviour") is not None:
            return role
        *others, last = (repr(r) for r in ROLE_PRESETS)
        presets = f"{', '.join(others)} or {last}"
        close = difflib.get_close_matches(role, ROLE_PRESETS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise PydanticCustomError(
            "role",
            f"role {role!r} is not a preset: expected one of {presets}{hint}, or say what "
            f"the agent does with `behaviour: {' | '.join(BEHAVIOURS)}`",
        )

    @property
    def does(self) -> Behaviour:
        """The behaviour: declared, or the role preset's."""
        return behaviour_of(self.role, self.behaviour)


class Reference(Strict):
    """Published figures printed next to ours (never used to compute anything)."""

    source: str
    note: str = ""
    cells: dict[str, dict[str, float | int | str]] = Field(default_factory=dict)


class Scenario(Extended):
    added_fields = frozenset({"services", "arrivals", "discussion", "bus", "draws"})

    name: Ident
    description: str = ""
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    trials: int = Field(default=20, ge=1, le=MAX_TRIALS)
    propagation: Literal["explicit", "implicit"] = "explicit"
    #: The simulated model's random source (errorflow.core.draws): one stream per
    #: conversation, or one per decision so that two arms answer alike where they can.
    draws: DrawsMode = "sequential"
    time_scale: float = Field(default=0.0, ge=0, le=100)
    max_in_flight: int = Field(default=32, ge=1, le=1024, description="trials run at once")
    world: WorldSpec = Field(default_factory=WorldSpec)
    tools: dict[Ident, ToolSpec] = Field(default_factory=dict)
    #: Services behind the tools, with state for the whole run (service_model).
    services: dict[Ident, ServiceSpec] = Field(default_factory=dict, max_length=64)
    arrivals: ArrivalSpec = Field(default_factory=ArrivalSpec)
    discussion: DiscussionSpec = Field(default_factory=DiscussionSpec)
    #: Faults in the messages between agents (errorflow.faults.bus).
    bus: BusFaultSpec = Field(default_factory=BusFaultSpec)
    agents: dict[Ident, AgentSpec] = Field(min_length=1, max_length=MAX_AGENTS)
    task: TaskSpec
    sweep: SweepSpec | None = None
    reference: Reference | None = None

    @field_validator("arrivals", "discussion", "bus", mode="before")
    @classmethod
    def _none_is_the_default(cls, value: object) -> object:
        """`bus: null` (or `--set bus=null`) means what leaving it out means: FORMAT.md
        gives these blocks' default as none."""
        return {} if value is None else value

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        """Cross-references, each reported at the path that names it (so the loader can
        point at the line): every problem at once, as one ValidationError."""
        problems = [*all_problems(self, RESERVED_NAMES), *bus_problems(self.agents, self.bus)]
        if problems:
            raise ValidationError.from_exception_data(
                "Scenario", [problem.details() for problem in problems]
            )
        # `waits_for` is the receiving side of `sends_to`: one set of edges for the rest.
        for name, agent in self.agents.items():
            for sender in agent.waits_for:
                if name not in self.agents[sender].sends_to:
                    self.agents[sender].sends_to.append(name)
        return self

    # -- topology -------------------------------------------------------------
    def upstream_of(self, agent: str) -> list[str]:
        """The senders of the agent's round-0 inputs (a delegate's: its manager)."""
        waits = self.agents[agent].waits_for if agent in self.agents else []
        return [
            n
            for n, a in self.agents.items()
            if agent in a.sends_to or n in waits or agent in a.delegates
        ]

    def downstream_of(self, agent: str) -> list[str]:
        """Where the agent's results go (a delegate's: back to its manager)."""
        spec = self.agents[agent]
        waiting = [n for n, a in self.agents.items() if agent in a.waits_for]
        manager = self.manager_of(agent)
        return list(dict.fromkeys([*spec.sends_to, *waiting, *([manager] if manager else [])]))

    def manager_of(self, agent: str) -> str | None:
        """The agent that delegates to `agent`, if one does."""
        return next((n for n, a in self.agents.items() if agent in a.delegates), None)

    def result_targets(self, agent: str) -> list[str]:
        """The recipients of the agent's result: its `sends_to`, its manager, or the
        runner (a reviewer's work sent back aside)."""
        spec = self.agents[agent]
        manager = self.manager_of(agent)
        return spec.sends_to or ([manager] if manager else [topics.RUNNER])

    def assigned_needs(self, agent: str) -> list[str] | None:
        """The needs a delegate's sub-task holds: each need of its manager's sub-task
        goes to the first of the manager's delegates that fetches it (with its own
        tool, or through delegates of its own); None when `agent` is nobody's delegate
        (it answers for the whole task)."""
        manager = self.manager_of(agent)
        if manager is None:
            return None
        scope = self.assigned_needs(manager)
        mine: list[str] = []
        for need in self.task.needs:
            if scope is not None and need.id not in scope:
                continue
            takers = [d for d in self.agents[manager].delegates if self._fetches(d, need.tool)]
            if takers and takers[0] == agent:
                mine.append(need.id)
        return mine

    def _fetches(self, agent: str, tool: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether `agent` fetches needs of `tool`, itself or through its delegates."""
        spec = self.agents[agent]
        if tool in spec.tools and spec.does.gathers:
            return True
        return any(self._fetches(d, tool, seen | {agent}) for d in spec.delegates if d not in seen)

    def reaches(self, src: str, dst: str) -> bool:
        """Whether `src`'s results reach `dst` (through any number of agents). A manager
        passes what it received from upstream on to its delegates (its round 0), but
        not what its delegates send it (its round 1 comes after theirs)."""
        seen: set[tuple[str, str]] = set()
        todo = [(n, src) for n in self.downstream_of(src)]
        while todo:
            node, came_from = todo.pop()
            if node == dst:
                return True
            if (node, came_from) in seen or node not in self.agents:
                continue
            seen.add((node, came_from))
            onward = list(self.downstream_of(node))
            delegates = self.agents[node].delegates
            if came_from not in delegates:
                onward += delegates
            todo.extend((n, node) for n in onward)
        return False

    @functools.cached_property
    def run_scoped(self) -> bool:
        """Whether state lives across trials (a service, a breaker with `scope: run`):
        trials then arrive over run time and run one at a time, in arrival order.
        (Cached: every agent asks in every trial, and the answer looks at every agent.)"""
        if self.services or self.arrivals.process != "all_at_once":
            return True
        return any(
            "run" in (c.breaker.scope, c.limiter.scope, c.bulkhead.scope)
            for c in (a.policy.config for a in self.agents.values())
        )

    def gatherers_of(self, tool: str) -> list[str]:
        """Agents that fetch needs with `tool` (they hold it and gather or synthesise)."""
        return [n for n, a in self.agents.items() if tool in a.tools and a.does.gathers]

    def is_batch_tool(self, tool: str) -> bool:
        """Calls fetch several items, so some may fail (a `partial` fault)."""
        spec = self.tools[tool]
        if spec.kind in BATCH_KINDS:
            return True
        if spec.kind != "lookup" or spec.table not in self.world.tables:
            return False
        columns = self.world.tables[spec.table].columns
        return any(
            (spec.args or {}).get(a) is not None and (spec.args or {})[a].type == "array"
            for a in key_columns(spec, columns)
        )

    def peers_of(self, agent: str) -> list[str]:
        """The agents `agent` discusses with (a peer edge is named on either side)."""
        mine = self.agents[agent].peers if agent in self.agents else []
        named = [n for n, a in self.agents.items() if agent in a.peers]
        return list(dict.fromkeys([*mine, *named]))

    def decides(self, agent: str) -> bool:
        """Whether the agent's last answer goes on (every agent not in a discussion)."""
        if not self.peers_of(agent):
            return True
        chosen = self.discussion.decides
        return chosen is None or agent in chosen

    def entry_agents(self) -> list[str]:
        """Agents that receive the task from the runner (nobody sends to them)."""
        return [n for n in self.agents if not self.upstream_of(n)]

    def terminal_agents(self) -> list[str]:
        """Agents whose results go to the runner."""
        return [n for n in self.agents if not self.downstream_of(n) and self.decides(n)]
