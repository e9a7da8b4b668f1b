"""Scenario files: the pydantic model of a scenario.

A scenario names the agents (role, model, tools, policy, who they send to), the tools
(their kind, schema and injected faults), the world of facts the tools serve, and the
task. The loader (errorflow.scenario.loader) validates everything a run needs before
anything starts, and words every problem for the person who wrote the file.
See scenarios/FORMAT.md for the reference.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from errorflow.scenario.agent_policy import AgentPolicy
from errorflow.scenario.catalog import BATCH_KINDS, ToolKind

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Ident = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]

#: Documented limits (scenarios/FORMAT.md "Limits"); the loader refuses anything beyond
#: them. MAX_TOOLS, MAX_STEPS, MAX_DOCUMENT_BYTES and MAX_FINDINGS_BYTES are checked by
#: the loader's second pass (errorflow.scenario.checks): a scenario built from data, an
#: override or a stored run may exceed them.
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
#: Largest total of what a task's needs fetch (UTF-8 bytes): half the bus message limit
#: (errorflow.bus.envelope.MAX_MESSAGE_BYTES, 256 KiB), leaving room for the envelope,
#: the errors and a report that quotes the findings.
MAX_FINDINGS_BYTES = 128 * 1024

FaultKind = Literal[
    "transient",
    "timeout",
    "rate_limit",
    "bad_args",
    "permission",
    "not_found",
    "business_rule",
    "empty",
    "partial",
    "malformed_call",
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FaultSpec(Strict):
    """One injected fault. It fires on the first `first_n` calls, or with probability
    `p` per call, or on every call when neither is given."""

    kind: FaultKind
    first_n: int | None = Field(default=None, ge=0, le=1_000_000)
    p: Probability | None = None
    status: int | None = Field(default=None, ge=100, le=599)
    retry_after_s: float | None = Field(default=None, ge=0, le=86_400)
    duration_s: float | None = Field(default=None, ge=0, le=86_400)
    reason: str | None = Field(default=None, max_length=500)
    mode: Literal["missing_field", "wrong_type", "extra_field", "truncated_json"] | None = None
    item_p: Probability | None = Field(default=None, description="partial: per-item failure p")
    error_text: str | None = Field(default=None, max_length=2000, description="raw error text")

    @model_validator(mode="after")
    def _one_trigger(self) -> FaultSpec:
        if self.first_n is not None and self.p is not None:
            raise ValueError("give either first_n or p, not both")
        return self


class ToolSpec(Strict):
    kind: ToolKind
    description: str = ""
    idempotent: bool = True
    latency_s: float = Field(default=0.05, ge=0, le=3600)
    faults: list[FaultSpec] = Field(default_factory=list, max_length=32)


class ModelSpec(Strict):
    backend: Literal["simulated", "anthropic"] = "simulated"
    profile: str = "small-local"
    #: Behaviour overrides of the profile, as written (checked against the profile's
    #: fields by the loader: errorflow.scenario.profiles).
    params: dict[str, object] = Field(default_factory=dict, description="behaviour overrides")
    model: str | None = None
    base_url: str | None = None
    max_tokens: int = Field(default=1024, ge=1, le=200_000)
    temperature: float = Field(default=0.7, ge=0, le=2)


class AgentSpec(Strict):
    role: Literal["researcher", "writer", "reviewer"]
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


class Paper(Strict):
    id: Ident
    title: str
    topic: str


class WorldSpec(Strict):
    metrics: dict[str, float | int | str] = Field(default_factory=dict)
    papers: list[Paper] = Field(default_factory=list)
    documents: dict[str, str] = Field(default_factory=dict)


class NeedSpec(Strict):
    """One fact the task needs. `wording` is how the task phrases it; `value` is the
    identifier the tool really accepts. When the tool carries a `bad_args` fault the
    identifier is not given to the model, which must guess it from the wording."""

    id: Ident
    tool: Ident
    arg: Ident = "name"
    wording: str
    value: str | list[str]


class TaskSpec(Strict):
    prompt: str = Field(min_length=1, max_length=10_000)
    needs: list[NeedSpec] = Field(min_length=1, max_length=MAX_NEEDS)


class SweepAxis(Strict):
    """One axis of a sweep: a label per value, each a set of dotted-path overrides."""

    name: str = Field(min_length=1, max_length=64)
    values: dict[str, dict[str, object]] = Field(min_length=1, max_length=64)


class SweepSpec(Strict):
    axes: list[SweepAxis] = Field(min_length=1, max_length=2)


class Reference(Strict):
    """Published figures printed next to ours (never used to compute anything)."""

    source: str
    note: str = ""
    cells: dict[str, dict[str, float | int | str]] = Field(default_factory=dict)


@dataclass(frozen=True)
class _Reference:
    """One cross-reference problem: where, what is wrong, and the value found there."""

    loc: tuple[str | int, ...]
    message: str
    found: object

    def details(self) -> InitErrorDetails:
        error = PydanticCustomError("reference", self.message)
        return InitErrorDetails(type=error, loc=self.loc, input=self.found)


def _unknown(what: str, name: str, known: Iterable[str]) -> str:
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return f"unknown {what} {name!r}; did you mean {close[0]!r}?"
    return f"unknown {what} {name!r}; expected one of: {', '.join(names) or '(none)'}"


class Scenario(Strict):
    name: Ident
    description: str = ""
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    trials: int = Field(default=20, ge=1, le=MAX_TRIALS)
    propagation: Literal["explicit", "implicit"] = "explicit"
    time_scale: float = Field(default=0.0, ge=0, le=100)
    max_in_flight: int = Field(default=32, ge=1, le=1024, description="trials run at once")
    world: WorldSpec = Field(default_factory=WorldSpec)
    tools: dict[Ident, ToolSpec] = Field(default_factory=dict)
    agents: dict[Ident, AgentSpec] = Field(min_length=1, max_length=MAX_AGENTS)
    task: TaskSpec
    sweep: SweepSpec | None = None
    reference: Reference | None = None

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        """Cross-references, each reported at the path that names it (so the loader can
        point at the line): every problem at once, as one ValidationError."""
        problems = [
            *self._agent_problems(),
            *self._fault_problems(),
            *self._need_problems(),
        ]
        if not problems and not self.entry_agents():
            problems.append(
                _Reference(
                    ("agents",),
                    "no entry agent: every agent receives from another (sends_to forms a "
                    "cycle); expected at least one agent that nobody sends to",
                    list(self.agents),
                )
            )
        if problems:
            raise ValidationError.from_exception_data(
                "Scenario", [problem.details() for problem in problems]
            )
        return self

    def _agent_problems(self) -> Iterator[_Reference]:
        for name, agent in self.agents.items():
            if name in RESERVED_NAMES:
                yield _Reference(
                    ("agents", name),
                    f"{name!r} is reserved for the bus "
                    f"({', '.join(sorted(RESERVED_NAMES))}); rename the agent",
                    name,
                )
            yield from self._sends_to_problems(name, agent)
            upstream = self.upstream_of(name)
            if agent.returns_to is not None and agent.returns_to not in upstream:
                msg = (
                    f"returns_to must name an agent that sends to {name!r} "
                    f"({', '.join(upstream) or 'none does'})"
                )
                yield _Reference(("agents", name, "returns_to"), msg, agent.returns_to)
            for i, tool_name in enumerate(agent.tools):
                if tool_name not in self.tools:
                    msg = _unknown("tool", tool_name, self.tools) + " (define it under tools:)"
                    yield _Reference(("agents", name, "tools", i), msg, tool_name)

    def _sends_to_problems(self, name: str, agent: AgentSpec) -> Iterator[_Reference]:
        for i, target in enumerate(agent.sends_to):
            loc = ("agents", name, "sends_to", i)
            if target == name:
                yield _Reference(loc, f"agent {name!r} sends to itself", target)
            elif target not in self.agents:
                yield _Reference(loc, _unknown("agent", target, self.agents), target)
            elif target in agent.sends_to[:i]:
                yield _Reference(loc, f"agent {target!r} is named twice", target)

    def _fault_problems(self) -> Iterator[_Reference]:
        for tname, tool in self.tools.items():
            for i, fault in enumerate(tool.faults):
                if fault.kind == "partial" and tool.kind not in BATCH_KINDS:
                    yield _Reference(
                        ("tools", tname, "faults", i, "kind"),
                        f"fault 'partial' cannot apply to tool {tname!r}: expected a batch "
                        f"tool (kind: {', '.join(sorted(BATCH_KINDS))}), found kind "
                        f"{tool.kind!r}",
                        fault.kind,
                    )
                if fault.item_p is not None and fault.kind != "partial":
                    yield _Reference(
                        ("tools", tname, "faults", i, "item_p"),
                        f"item_p applies only to kind 'partial', found kind {fault.kind!r}",
                        fault.item_p,
                    )

    def _need_problems(self) -> Iterator[_Reference]:
        seen: dict[str, int] = {}
        for i, need in enumerate(self.task.needs):
            if need.id in seen:
                yield _Reference(
                    ("task", "needs", i, "id"),
                    f"duplicate need id {need.id!r} (first at task.needs.{seen[need.id]})",
                    need.id,
                )
            seen.setdefault(need.id, i)
            if need.tool not in self.tools:
                yield _Reference(
                    ("task", "needs", i, "tool"),
                    _unknown("tool", need.tool, self.tools) + " (define it under tools:)",
                    need.tool,
                )

    # -- topology -------------------------------------------------------------
    def upstream_of(self, agent: str) -> list[str]:
        return [n for n, a in self.agents.items() if agent in a.sends_to]

    def entry_agents(self) -> list[str]:
        """Agents that receive the task from the runner (nobody sends to them)."""
        return [n for n in self.agents if not self.upstream_of(n)]

    def terminal_agents(self) -> list[str]:
        """Agents whose results go to the runner."""
        return [n for n, a in self.agents.items() if not a.sends_to]
