"""What an agent's trials share: its plan (spec, policy, the run's settings), its
persona, its model backends and tool world, the breakers and limits of a `scope: run`
policy, a discussion member's memory, and the endpoint its events and results go out
through.

The agent (errorflow.agents.agent) builds one kit and hands it to every trial's work
(errorflow.agents.trial_work), which makes its gates and turns from it.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import JsonValue

from errorflow.agents.call_limits import CallLimits
from errorflow.agents.discussion import Discussion, Memory
from errorflow.agents.loop import Persona
from errorflow.agents.model_gate import ModelGate
from errorflow.agents.tool_gate import ToolGate, TraceEntry
from errorflow.bus.endpoint import Endpoint
from errorflow.core.seeding import LazyStream, stream
from errorflow.core.simclock import SimClock
from errorflow.faults.agent import AgentFaults
from errorflow.models.backend import (
    NeedView,
    Stance,
    TaskTurn,
    ToolDef,
    UpstreamTurn,
    shape_of,
)
from errorflow.models.backends import BackendFactory
from errorflow.policies.breaker import BreakerBank
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure
from errorflow.policies.loop_guard import LoopGuard
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope, JsonObject
from errorflow.protocol.events import Emit
from errorflow.protocol.result import answer_of
from errorflow.scenario.agent_plan import AgentPlan
from errorflow.scenario.python_agent_ref import AgentCallable, load_agent_callable
from errorflow.scenario.spec.model import FromNeed, NeedSpec
from errorflow.world.tool_world import ToolWorld

#: Receives each trial's local tool trace (unredacted: it never leaves the process).
OnTrace = Callable[[str, int, list[TraceEntry]], None]


class AgentKit:
    def __init__(
        self,
        plan: AgentPlan,
        world: ToolWorld,
        endpoint: Endpoint,
        backends: BackendFactory,
        on_trace: OnTrace | None = None,
    ) -> None:
        self.plan = plan
        self.name = name = plan.name
        self.spec = plan.spec
        self.policy = plan.policy
        self.mode = plan.propagation
        self.endpoint = endpoint
        self.backends = backends
        self.world = world
        self.on_trace = on_trace
        self.catalog = world.catalog
        does = self.spec.does
        tools = [
            ToolDef(
                t,
                self.catalog.descriptions[t],
                self.catalog.schemas[t],
                delivers=t in plan.delivers,
            )
            for t in (self.spec.tools if does.calls_tools else [])
        ]
        system = self.spec.instructions or does.instructions
        stance = Stance(challenge=self.spec.challenge)
        self.persona = Persona(name, self.spec.role, system, tools, does, stance)
        self.talk = Discussion.of(plan)
        #: A delegate's manager, and the needs of the sub-task it gets (None: the task).
        self.manager = plan.manager
        self.assigned = plan.assigned
        #: A python agent's callable (errorflow.agents.own), imported once per process.
        self.own: AgentCallable | None = (
            load_agent_callable(name, self.spec.function) if self.spec.function else None
        )
        self.memory: dict[int, Memory] = {}  # discussion members, by trial
        self._fault_pool: list[JsonValue] | None = None
        self._need_shapes: dict[str, str | None] | None = None
        self._views: dict[tuple[str, bool], NeedView] = {}  # by need and hidden: the same
        # `scope: run`: one breaker (limiter, bulkhead) per tool for the whole run, which
        # is reproducible because such runs take their trials one at a time, in order.
        self._run_breakers = BreakerBank(self.policy.breaker)
        self._run_limits = CallLimits.of(self.policy)

    # -- gates ----------------------------------------------------------------------
    def model_gate(
        self, trial: int, owner: str, clock: SimClock, budget: Budget, emit: Emit
    ) -> ModelGate:
        return ModelGate(
            self.backends.for_trial(trial, owner),
            self.policy,
            clock,
            LazyStream(self.plan.seed, trial, owner, "model-retry"),
            budget,
            emit,
            agent=self.name,
            record_content=self.spec.model.record_content,
        )

    def tool_gate(
        self,
        trial: int,
        owner: str,
        clock: SimClock,
        budget: Budget,
        guard: LoopGuard,
        emit: Emit,
    ) -> ToolGate:
        """The policy layer of one trial's tool calls (breakers, limiter and bulkhead
        of the run when their `scope` is `run`)."""
        breakers = (
            self._run_breakers
            if self.policy.breaker.scope == "run"
            else BreakerBank(self.policy.breaker)
        )
        return ToolGate(
            agent=self.name,
            trial=trial,
            policy=self.policy,
            client=self.world.client(trial, owner),
            clock=clock,
            rng=LazyStream(self.plan.seed, trial, owner, "retry"),
            budget=budget,
            breakers=breakers,
            limits=self._limits_for_trial(),
            guard=guard,
            implicit=self.mode == "implicit",
            emit=emit,
        )

    def _limits_for_trial(self) -> CallLimits:
        """The run's limiter and bulkhead when either is `scope: run`, else fresh ones."""
        p = self.policy
        if p.limiter.scope == "run" or p.bulkhead.scope == "run":
            return self._run_limits
        return CallLimits.of(p)

    def faults(self, trial: int, round_: int) -> AgentFaults | None:
        """This round's fault draws (None for an agent without faults: no stream made)."""
        if not self.spec.faults:
            return None
        if self._fault_pool is None:
            self._fault_pool = list(self.world.truths().values())
        rng = stream(self.plan.seed, trial, self.name, round_, "agent-faults")
        return AgentFaults(self.spec.faults, rng, self._fault_pool)

    # -- what the model is shown ------------------------------------------------------
    def task_turn(self, trial: int) -> TaskTurn:
        """The task as this agent is given it: a delegate's sub-task holds the needs
        assigned to it."""
        task = self.plan.task
        given = [n for n in task.needs if self.assigned is None or n.id in self.assigned]
        needs = [self._view(n, self.world.hidden(trial, n)) for n in given]
        return TaskTurn(task.prompt, needs)

    def _view(self, need: NeedSpec, hidden: bool) -> NeedView:
        """`_need_view`, made once for each need and hidden-ness (frozen, never changed)."""
        view = self._views.get((need.id, hidden))
        if view is None:
            view = self._views[need.id, hidden] = self._need_view(need, hidden)
        return view

    def own_needs(self, needs: list[NeedView]) -> list[NeedView]:
        """The needs among `needs` this agent answers for (its behaviour says which)."""
        return self.spec.does.own_needs(self.spec.tools, needs)

    def _need_view(self, need: NeedSpec, hidden: bool) -> NeedView:
        args = need.arguments()
        primary = need.primary
        return NeedView(
            need.id,
            need.tool,
            primary,
            need.wording,
            None if hidden else need.identifier,
            meant=need.identifier,
            fixed={k: v for k, v in args.items() if k != primary and not isinstance(v, FromNeed)},  # type: ignore[misc]
            depends={k: (v.from_, v.field) for k, v in need.depends_on().items()},
            shape=self._shapes().get(need.id),
            sources=tuple(need.sources),
        )

    def _shapes(self) -> dict[str, str | None]:
        """Each need's kind of answer (computed once: it may call Python tools)."""
        if self._need_shapes is None:
            truths = self.world.truths()  # the tools this agent loaded
            self._need_shapes = {k: shape_of(v) for k, v in truths.items()}
        return self._need_shapes

    def upstream_turn(self, env: Envelope) -> UpstreamTurn:
        return UpstreamTurn(
            sender=env.sender,
            status=env.status.value,
            confidence=env.confidence,
            errors=[e.model_dump(mode="json") for e in env.errors],
            answer=answer_of(env.payload),
        )

    def missing_turn(self, failure: Failure) -> UpstreamTurn:
        """An input that never came, as the model is told of it: a timed-out wait
        (explicit), or, swallowed (implicit), an empty answer that says ok."""
        if self.mode == "implicit":
            return UpstreamTurn(failure.tool, "ok", 1.0, [], FinalAnswer())
        error: JsonObject = {
            "code": failure.code.value,
            "origin": failure.tool,
            "message": failure.raw,
        }
        return UpstreamTurn(failure.tool, "failed", 0.0, [error], FinalAnswer(abstained=True))
