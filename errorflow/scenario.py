"""Scenario files: the pydantic model of a scenario and the YAML loader.

A scenario names the agents (role, model, tools, policy, who they send to), the tools
(their kind, schema and injected faults), the world of facts the tools serve, and the
task. `load_scenario` validates everything a run needs before anything starts.
See scenarios/FORMAT.md for the reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Ident = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]

#: Documented limits (README "Limits"); the loader refuses anything beyond them.
MAX_TRIALS = 100_000
MAX_AGENTS = 64
MAX_NEEDS = 64

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
ToolKind = Literal["metric_store", "paper_search", "batch_fetch", "report_sink"]
BATCH_KINDS: frozenset[str] = frozenset({"batch_fetch"})


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
    params: dict[str, Any] = Field(default_factory=dict, description="behaviour overrides")
    model: str | None = None
    base_url: str | None = None
    max_tokens: int = Field(default=1024, ge=1, le=200_000)
    temperature: float = Field(default=0.7, ge=0, le=2)


class AgentSpec(Strict):
    role: Literal["researcher", "writer", "reviewer"]
    model: ModelSpec = Field(default_factory=ModelSpec)
    tools: list[Ident] = Field(default_factory=list, max_length=32)
    policy: dict[str, Any] = Field(default_factory=lambda: {"strategy": "resilient"})
    sends_to: list[Ident] = Field(default_factory=list, max_length=MAX_AGENTS)


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

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        for name, agent in self.agents.items():
            for target in agent.sends_to:
                if target not in self.agents:
                    raise ValueError(f"agents.{name}.sends_to names unknown agent {target!r}")
                if target == name:
                    raise ValueError(f"agents.{name}.sends_to names the agent itself")
            for tool_name in agent.tools:
                if tool_name not in self.tools:
                    raise ValueError(f"agents.{name}.tools names unknown tool {tool_name!r}")
        for tname, tool in self.tools.items():
            for fault in tool.faults:
                if fault.kind == "partial" and tool.kind not in BATCH_KINDS:
                    raise ValueError(
                        f"tools.{tname}: fault 'partial' needs a batch tool (kind batch_fetch), "
                        f"not {tool.kind}"
                    )
        for need in self.task.needs:
            if need.tool not in self.tools:
                raise ValueError(f"task.needs.{need.id}.tool names unknown tool {need.tool!r}")
        if not self.entry_agents():
            raise ValueError("no entry agent: every agent receives from another (a cycle)")
        return self

    # -- topology -------------------------------------------------------------
    def upstream_of(self, agent: str) -> list[str]:
        return [n for n, a in self.agents.items() if agent in a.sends_to]

    def entry_agents(self) -> list[str]:
        """Agents that receive the task from the runner (nobody sends to them)."""
        return [n for n in self.agents if not self.upstream_of(n)]

    def terminal_agents(self) -> list[str]:
        """Agents whose results go to the runner."""
        return [n for n, a in self.agents.items() if not a.sends_to]


def load_scenario(path: str | Path) -> Scenario:
    from errorflow.scenario_loader import load

    return load(Path(path))
