"""An agent: an asyncio task that owns an inbox topic and answers each trial's inputs.

For every trial it waits for the inputs its topology promises (`inputs`: the task from
the runner, or a result from each upstream agent), then runs its loop (`loop`: model →
tool calls through the tool gate → model ... → final answer), decides what the result
says about failures (`propagation`, the experiment's switch) and publishes one result
message to every agent it `sends_to` (or to the runner; `result`). Trials run
concurrently; each has its own seeded streams, simulated clock, breakers, guards and
budget, so a trial's events do not depend on what else is in flight.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from pydantic import JsonValue

from errorflow.agents.call_limits import CallLimits
from errorflow.agents.carry import carry_forward
from errorflow.agents.defence_effects import changes, overruled
from errorflow.agents.discussion import Discussion, Heard, Memory
from errorflow.agents.inputs import InputCollector, Ready, Rejected
from errorflow.agents.late_inputs import arrivals
from errorflow.agents.loop import LoopOutcome, Persona, TrialLoop
from errorflow.agents.model_gate import ModelGate
from errorflow.agents.policy_tally import PolicyTally
from errorflow.agents.presence import Presence
from errorflow.agents.propagation import (
    INFRA_STOP,
    InputReport,
    fallback_answer,
    infra_answer,
    infra_failure,
    infra_text,
    open_tools,
    propagate,
    unrecovered,
)
from errorflow.agents.routing import route
from errorflow.agents.run_clock import start_time
from errorflow.agents.tool_gate import GateOutcome, ToolGate, TraceEntry
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.transport import Connection
from errorflow.core.costs import Costs
from errorflow.core.redact import redact
from errorflow.core.seeding import stream
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import ErrorCode
from errorflow.faults.agent import (
    AgentFaults,
    Fired,
    apply_copy,
    mark_fired,
    model_faults_fired,
)
from errorflow.faults.crash import InjectedCrash
from errorflow.models.backend import (
    Inspection,
    NeedView,
    Stance,
    TaskTurn,
    ToolCall,
    ToolDef,
    UpstreamTurn,
    shape_of,
)
from errorflow.models.backends import BackendFactory
from errorflow.policies.breaker import BreakerBank
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure
from errorflow.policies.loop_guard import LoopGuard
from errorflow.protocol import topics
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope, JsonObject, Kind
from errorflow.protocol.events import (
    AgentEvent,
    AgentFaultFired,
    AgentStart,
    DefenceActed,
)
from errorflow.protocol.result import ResultPayload, infra_reason
from errorflow.protocol.stop import CRASHED, StopReason
from errorflow.scenario.spec.behaviour import BEHAVIOURS, INSPECTOR_INSTRUCTIONS
from errorflow.scenario.spec.model import FromNeed, NeedSpec, Scenario
from errorflow.scenario.spec.policy import policy_for
from errorflow.world.ground_truth import need_truths
from errorflow.world.services import ServiceRegistry
from errorflow.world.tool_catalog import ToolCatalog
from errorflow.world.tool_client import ToolClient, hidden_identifier

log = logging.getLogger(__name__)
_K = TypeVar("_K")
_V = TypeVar("_V")

#: Discussion rounds held for a previous round that has not started (far above the
#: trials in flight, at most 1,024).
HELD_ROUNDS_KEEP = 4096
#: Trials whose last finished round a member remembers (the most recently finished
#: kept): a trial whose last round never comes (inputs lost on the bus) is forgotten
#: after this many others, instead of staying for the rest of the run.
ROUNDS_DONE_KEEP = 4096

#: Receives each trial's local tool trace (unredacted: it never leaves the process).
OnTrace = Callable[[str, int, list[TraceEntry]], None]


def _keep_newest(table: dict[_K, _V], keep: int) -> None:
    """Forget the oldest entries (a dict keeps insertion order) beyond `keep`."""
    while len(table) > keep:
        table.pop(next(iter(table)))


class Agent:
    def __init__(
        self,
        name: str,
        scenario: Scenario,
        run_id: str,
        conn: Connection,
        *,
        run_key: bytes,
        api_key: str | None = None,
        on_trace: OnTrace | None = None,
        services: ServiceRegistry | None = None,
    ) -> None:
        self.name = name
        # Shared by the run's agents in this process; a scenario without services needs
        # none (and agents in other processes refuse one: errorflow.runtime.runner).
        self.services = services if services is not None else ServiceRegistry(scenario)
        self.scenario = scenario
        self.spec = scenario.agents[name]
        self.policy = policy_for(scenario, name)
        self.mode = scenario.propagation
        members = set(scenario.agents) | {topics.RUNNER}
        bus_faults = scenario.bus.plan(scenario.seed, scenario.time_scale)
        self.endpoint = Endpoint(conn, run_id, name, members, key=run_key, faults=bus_faults)
        self.run_id = run_id
        self.backends = BackendFactory(
            self.spec.model, scenario.seed, name, api_key, scenario=scenario
        )
        self.catalog = ToolCatalog.of(scenario)
        does = self.spec.does
        tools = [
            ToolDef(
                t,
                self.catalog.descriptions[t],
                self.catalog.schemas[t],
                delivers=scenario.tools[t].kind == "report_sink",
            )
            for t in (self.spec.tools if does.calls_tools else [])
        ]
        system = self.spec.instructions or does.instructions
        stance = Stance(challenge=self.spec.challenge)
        self.persona = Persona(name, self.spec.role, system, tools, does, stance)
        # Reviewers that may send work back to this agent; their revision requests
        # are answered from the original inputs, kept until the trial's last round.
        returners = [n for n, a in scenario.agents.items() if a.returns_to == name]
        last_round = max((scenario.agents[r].max_revisions for r in returners), default=0)
        self.talk = Discussion.of(scenario, name)
        self.inputs = InputCollector(
            scenario.upstream_of(name) or [topics.RUNNER],
            returners,
            last_round,
            peers=list(self.talk.peers),
        )
        self._memory: dict[int, Memory] = {}  # discussion members, by trial
        self._fault_pool: list[JsonValue] | None = None
        self._need_shapes: dict[str, str | None] | None = None
        self.presence = Presence(self.endpoint, name, run_id, scenario)
        self._tasks: set[asyncio.Task[None]] = set()
        # A discussion member's round n reads its own round n - 1 (memory), whatever
        # order the bus brought their inputs in: rounds under way by (trial, round), the
        # last round each trial finished, and rounds ready before their previous round
        # started, by the round they wait for.
        self._rounds: dict[tuple[int, int], asyncio.Event] = {}
        self._rounds_done: dict[int, int] = {}
        self._held: dict[tuple[int, int], Ready] = {}
        # `scope: run`: one breaker (limiter, bulkhead) per tool for the whole run, which
        # is reproducible because such runs take their trials one at a time, in order.
        self._run_breakers = BreakerBank(self.policy.breaker)
        self._run_limits = CallLimits.of(self.policy)
        self.on_trace = on_trace
        self.done_trials = 0

    @property
    def mismatch(self) -> str | None:
        """Why this agent refused to join the run (a joining agent must run the runner's
        experiment, checked on the roll call)."""
        return self.presence.mismatch

    async def run(self) -> None:
        conn = self.endpoint.conn
        await conn.subscribe(topics.inbox(self.run_id, self.name))
        await conn.subscribe(topics.control(self.run_id, topics.RUNNER))
        await self.endpoint.start()
        try:
            async for env in self.endpoint.receive():
                try:
                    if env.kind is Kind.CONTROL:
                        if await self.presence.on_control(env.payload):
                            break
                    elif env.kind in (Kind.TASK, Kind.RESULT) and env.recipient == self.name:
                        self._accept(env)
                except Exception as exc:  # one message never stops the agent
                    self.endpoint.handler_failed(env, exc)
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.endpoint.close()
            await self.backends.aclose()

    def _accept(self, env: Envelope) -> None:
        match self.inputs.accept(env):
            case Rejected(reason=reason):
                self.endpoint.rejects[reason] += 1
            case Ready() as ready:
                self._start(ready)

    def _start(self, ready: Ready) -> None:
        trial, round_ = ready.trial, ready.round
        before: asyncio.Event | None = None
        if self.talk.member:
            previous = (trial, round_ - 1)
            unstarted = previous not in self._rounds
            if round_ > 0 and unstarted and self._rounds_done.get(trial, -1) < round_ - 1:
                # It starts once its previous round does; one whose previous round never
                # comes (inputs lost on the bus) cannot end its trial anyway (its peers
                # wait for our answer), so only a bounded window of them is kept.
                self._held[previous] = ready
                _keep_newest(self._held, HELD_ROUNDS_KEEP)
                return
            before = self._rounds.get(previous)
            self._rounds[(trial, round_)] = asyncio.Event()
        task = asyncio.create_task(self._guarded(trial, round_, ready.inputs, before))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        held = self._held.pop((trial, round_), None)
        if held is not None:
            self._start(held)

    async def _guarded(
        self,
        trial: int,
        round_: int,
        inputs: list[Envelope],
        before: asyncio.Event | None = None,
    ) -> None:
        try:
            if before is not None:  # our previous round of this trial: its answer first
                await before.wait()
            await self.process(trial, inputs, round_)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a crash becomes a structured error, not a dead agent
            # An injected crash is the experiment's (an `agent_crashed` event says so).
            level = logging.INFO if isinstance(exc, InjectedCrash) else logging.ERROR
            log.log(
                level,
                "%s: trial %d crashed: %s",
                self.name,
                trial,
                redact(f"{type(exc).__name__}: {exc}"),
            )
            log.debug("%s", redact("".join(traceback.format_exception(exc))))
            try:
                await self._publish_crash(trial, round_, inputs, exc)
            except Exception as lost:  # the bus itself is gone: the runner's liveness
                log.warning("%s: trial %d: crash not reported: %s", self.name, trial, lost)
        finally:
            self.inputs.finished(trial, round_)
            done = self._rounds.pop((trial, round_), None)
            if done is not None:
                done.set()
                # re-inserted: the dict's order is that of the rounds' ends, oldest first
                self._rounds_done[trial] = max(round_, self._rounds_done.pop(trial, -1))
                _keep_newest(self._rounds_done, ROUNDS_DONE_KEEP)
            if round_ >= self.talk.last_round:
                self._memory.pop(trial, None)
                self._rounds_done.pop(trial, None)
            self.done_trials += 1

    # -- one trial ------------------------------------------------------------------
    async def process(self, trial: int, inputs: list[Envelope], round_: int = 0) -> None:
        trace_id = inputs[0].trace_id
        carried = infra_reason(inputs)
        if carried is not None:  # nothing left to measure: pass it on, call no model
            await self._pass_infra_fault(trial, trace_id, inputs, carried, round_)
            return
        if self.talk.member and round_ > 0:
            await self._discuss(trial, inputs, round_)
            return
        # A revision round is a new attempt: its own draws (round 0 keeps the plain name).
        owner = self.name if round_ == 0 else f"{self.name}@r{round_}"
        start = start_time(self.scenario, trial, inputs)
        clock = SimClock(self.scenario.time_scale, start)
        came = arrivals(inputs, self.spec.wait_s)
        if came.waited_s:
            await clock.sleep(came.waited_s)
        budget = Budget(self.policy.budget)
        guard = LoopGuard(self.policy.guards)
        emit, pending, tally = self._emitter(trial, trace_id, clock)

        gate = self._tool_gate(trial, owner, clock, budget, guard, emit)
        model = self._model_gate(trial, owner, clock, budget, emit)
        emit(AgentStart(agent=self.name, inputs=[env.sender for env in inputs]))
        task = self._task_turn(trial)
        upstream = [self._upstream_turn(env) for env in came.arrived if env.sender != topics.RUNNER]
        upstream += [self._missing_turn(f) for f in came.missing]
        extra, inspected = Costs(), list[TraceEntry]()
        if self.spec.inspector is not None:
            upstream, extra, inspected = await self._inspected(
                trial, owner, task, upstream, clock, emit
            )
        loop = TrialLoop(
            self.persona, model, gate, budget, guard, self.policy.stop_on_unrecoverable, emit
        )
        try:
            out = await loop.run(task, upstream)
        except asyncio.CancelledError:
            for task_ in pending:  # nobody will wait for these events any more
                task_.cancel()
            raise
        await _settle(pending)
        if self.on_trace is not None:  # the inspector's calls came first
            self.on_trace(self.name, trial, [*inspected, *gate.trace])
        final, reported, stopped = self._conclude(out)
        reported = [*reported, *came.missing]
        if self.spec.challenge > 0:
            self._challenged(final, upstream, emit)
        costs = extra + spent(budget, model, gate.retries, clock.now - start)
        ended = round(clock.now, 6) if self.scenario.run_scoped else None
        if self.talk.member:
            own = {
                c.key: c.value
                for c in final.claims
                if any(t in out.succeeded_tools for t in _tools_of(self.scenario, c.key))
            }
            self._memory[trial] = Memory(task, list(inputs), final, own)
        await self._publish_result(
            trial,
            trace_id,
            inputs,
            final,
            reported,
            stopped,
            costs,
            round_,
            tally=tally,
            ended_at=ended,
            sent_at=round(clock.now, 6),
            emit=emit,
            also_fired=model_faults_fired(tally.model_faults),
        )
        await _settle(pending)

    async def _discuss(self, trial: int, inputs: list[Envelope], round_: int) -> None:
        """A discussion round: read the peers' latest answers, revise this agent's own
        (one model call, no tools), and pass it on (errorflow.agents.discussion)."""
        memory = self._memory.get(trial)
        trace_id = inputs[0].trace_id
        owner = f"{self.name}@d{round_}"
        start = start_time(self.scenario, trial, inputs)
        clock = SimClock(self.scenario.time_scale, start)
        came = arrivals(sorted(inputs, key=lambda e: e.sender), self.spec.wait_s)
        if came.waited_s:
            await clock.sleep(came.waited_s)
        budget = Budget(self.policy.budget)
        emit, pending, tally = self._emitter(trial, trace_id, clock)

        model = self._model_gate(trial, owner, clock, budget, emit)
        task = memory.task if memory is not None else self._task_turn(trial)
        previous = memory.answer if memory is not None else FinalAnswer(abstained=True)
        own = memory.own_evidence if memory is not None else {}
        mine = UpstreamTurn(self.name, "ok", 1.0, [], previous)
        peers = [self._upstream_turn(env) for env in came.arrived]
        peers += [self._missing_turn(f) for f in came.missing]
        stance = Stance(challenge=self.spec.challenge, deliberate=True, own_evidence=own)
        # Only a challenger calls tools in a discussion round (to re-check disputes).
        tools = self.persona.tools if self.spec.challenge > 0 else []
        persona = Persona(
            self.name, self.spec.role, self.persona.system, tools, BEHAVIOURS["synthesise"], stance
        )
        guard = LoopGuard(self.policy.guards)
        gate = self._tool_gate(trial, owner, clock, budget, guard, emit) if tools else None
        emit(AgentStart(agent=self.name, inputs=[env.sender for env in inputs]))
        extra, inspected = Costs(), list[TraceEntry]()
        if self.spec.inspector is not None:
            peers, extra, inspected = await self._inspected(trial, owner, task, peers, clock, emit)
        loop = TrialLoop(persona, model, gate or _NoTools(), budget, guard, False, emit)
        out = await loop.run(task, [mine, *peers])
        await _settle(pending)
        if self.on_trace is not None:
            self.on_trace(self.name, trial, [*inspected, *(gate.trace if gate else [])])
        final = out.final or previous
        failures = [*out.failures, *came.missing]
        if self.spec.challenge > 0:
            self._challenged(final, peers, emit)
        stopped = out.stopped
        retries = gate.retries if gate is not None else 0
        costs = extra + spent(budget, model, retries, clock.now - start)
        if memory is not None:
            memory.answer = final
        heard = Heard.of(memory, came.arrived)
        derived = [
            *([memory.last_id] if memory and memory.last_id else []),
            *(e.id for e in inputs),
        ]
        await self._publish_result(
            trial,
            trace_id,
            came.arrived,
            final,
            failures,
            stopped,
            costs,
            round_,
            tally=tally,
            emit=emit,
            derived=derived,
            sent_at=round(clock.now, 6),
            ended_at=round(clock.now, 6) if self.scenario.run_scoped else None,
            reports=[heard],
            also_fired=model_faults_fired(tally.model_faults),
        )
        await _settle(pending)

    async def _inspected(
        self,
        trial: int,
        owner: str,
        task: TaskTurn,
        upstream: list[UpstreamTurn],
        clock: SimClock,
        emit: Callable[[AgentEvent], None],
    ) -> tuple[list[UpstreamTurn], Costs, list[TraceEntry]]:
        """The inspector on this agent's inputs (errorflow.scenario.spec.defence_model): each
        message checked with the inspector's tools, corrected or blocked, before the
        agent reads it. Its tool and model calls are the agent's costs too."""
        spec = self.spec.inspector
        assert spec is not None
        brief = Inspection(spec.check, spec.on_wrong, spec.genealogy)
        tools = [
            ToolDef(t, self.catalog.descriptions[t], self.catalog.schemas[t]) for t in spec.tools
        ]
        persona = Persona(
            self.name,
            "inspector",
            INSPECTOR_INSTRUCTIONS,
            tools,
            BEHAVIOURS["check"],
            Stance(inspect=brief),
        )
        checked: list[UpstreamTurn] = []
        cost = Costs()
        trace: list[TraceEntry] = []
        for turn in upstream:
            who = f"{owner}~inspector~{turn.sender}"
            budget = Budget(self.policy.budget)
            guard = LoopGuard(self.policy.guards)
            gate = self._tool_gate(trial, who, clock, budget, guard, emit)
            model = self._model_gate(trial, who, clock, budget, emit)
            loop = TrialLoop(persona, model, gate, budget, guard, False, emit)
            out = await loop.run(task, [turn])
            answer = out.final if out.final is not None else turn.answer
            checked.append(replace(turn, answer=answer))
            corrected, blocked = changes(turn.answer, answer)
            if corrected or blocked:
                emit(
                    DefenceActed(
                        agent=self.name,
                        defence="inspector",
                        about=turn.sender,
                        corrected=corrected,
                        blocked=blocked,
                        calls=len(gate.trace),
                    )
                )
            trace += gate.trace
            cost = cost + spent(budget, model, gate.retries)
        return checked, cost, trace

    def _emitter(
        self, trial: int, trace_id: str, clock: SimClock
    ) -> tuple[Callable[[AgentEvent], None], list[asyncio.Task[None]], PolicyTally]:
        """How the gates hand this trial's events over: stamped with the run time,
        counted for the policy tally, published (the tasks to settle before the result)."""
        pending: list[asyncio.Task[None]] = []
        tally = PolicyTally()

        def emit(event: AgentEvent) -> None:
            if getattr(event, "at", 0.0) is None:  # stamped with the trial's run time
                event = event.model_copy(update={"at": round(clock.now, 6)})
            tally.add(event)
            pending.append(asyncio.create_task(self.endpoint.publish_event(trial, trace_id, event)))

        return emit, pending, tally

    def _model_gate(
        self,
        trial: int,
        owner: str,
        clock: SimClock,
        budget: Budget,
        emit: Callable[[AgentEvent], None],
    ) -> ModelGate:
        return ModelGate(
            self.backends.for_trial(trial, owner),
            self.policy,
            clock,
            stream(self.scenario.seed, trial, owner, "model-retry"),
            budget,
            emit,
            agent=self.name,
        )

    def _tool_gate(
        self,
        trial: int,
        owner: str,
        clock: SimClock,
        budget: Budget,
        guard: LoopGuard,
        emit: Callable[[AgentEvent], None],
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
            client=ToolClient(self.scenario, trial, owner, self.catalog, self.services),
            clock=clock,
            rng=stream(self.scenario.seed, trial, owner, "retry"),
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

    def _conclude(self, out: LoopOutcome) -> tuple[FinalAnswer, list[Failure], StopReason | None]:
        """The final answer (a fallback when the loop was stopped), the failures it must
        report and why the loop stopped. A model call the infrastructure failed makes
        the answer an infra fault's: the trial measured nothing."""
        needs = out.task.needs
        own = self.spec.does.own_needs(self.spec.tools, needs)
        infra = infra_failure(out.failures)
        if infra is not None:
            final = infra_answer(infra_text(self.name, infra), own)
        else:
            final = out.final or fallback_answer(self.mode, own, out.stopped)
            if self.spec.does.carries:
                upstream = [t for t in out.turns if isinstance(t, UpstreamTurn)]
                final = carry_forward(final, upstream)
        reported = unrecovered(out.failures, out.succeeded_tools, open_tools(needs, own, final))
        return final, reported, (INFRA_STOP if infra is not None else out.stopped)

    async def _pass_infra_fault(
        self, trial: int, trace_id: str, inputs: list[Envelope], reason: str, round_: int
    ) -> None:
        """An input reports an infrastructure fault: this agent's result says so too, so
        the trial ends at once (and no real model is called for a trial not scored)."""
        own = self.spec.does.own_needs(self.spec.tools, self._task_turn(trial).needs)
        failure = Failure(ErrorCode.INFRA_FAULT, "upstream", reason)
        await self._publish_result(
            trial,
            trace_id,
            inputs,
            infra_answer(reason, own),
            [failure],
            INFRA_STOP,
            Costs(),
            round_,
        )

    def _task_turn(self, trial: int) -> TaskTurn:
        task = self.scenario.task
        needs = [self._need_view(n, hidden_identifier(self.scenario, trial, n)) for n in task.needs]
        return TaskTurn(task.prompt, needs)

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
            self._need_shapes = {k: shape_of(v) for k, v in need_truths(self.scenario).items()}
        return self._need_shapes

    def _challenged(
        self,
        final: FinalAnswer,
        upstream: list[UpstreamTurn],
        emit: Callable[[AgentEvent], None],
    ) -> None:
        """A challenger's answer against what it received: a `defence` event for each
        sender whose claims it overruled."""
        for sender, keys in overruled(final, upstream).items():
            emit(DefenceActed(agent=self.name, defence="challenger", about=sender, corrected=keys))

    def _missing_turn(self, failure: Failure) -> UpstreamTurn:
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

    def _upstream_turn(self, env: Envelope) -> UpstreamTurn:
        return UpstreamTurn(
            sender=env.sender,
            status=env.status.value,
            confidence=env.confidence,
            errors=[e.model_dump(mode="json") for e in env.errors],
            answer=ResultPayload.from_wire(env.payload).answer,
        )

    async def _publish_result(
        self,
        trial: int,
        trace_id: str,
        inputs: list[Envelope],
        final: FinalAnswer,
        failures: list[Failure],
        stopped: StopReason | None,
        costs: Costs | None,
        round_: int = 0,
        *,
        tally: PolicyTally | None = None,
        ended_at: float | None = None,
        sent_at: float | None = None,
        emit: Callable[[AgentEvent], None] | None = None,
        derived: list[str] | None = None,
        reports: Sequence[InputReport] | None = None,
        also_fired: Sequence[Fired] = (),
    ) -> None:
        """`reports`: what the inputs said about failures, when not `inputs` themselves
        (a discussion round: errors heard in earlier rounds too, once each)."""
        verdict = propagate(
            self.mode,
            agent=self.name,
            final=final,
            failures=failures,
            stopped=stopped,
            inputs=inputs if reports is None else reports,
        )
        faults = self._faults(trial, round_)
        fired: list[Fired] = []
        if faults is not None:
            final, fired = faults.believe(final)
        peers = self.talk.peers_after(round_)
        where = route(self.spec, final, round_) if peers is None else None
        kind = where.kind if where is not None else Kind.RESULT
        targets = where.targets if where is not None else peers or []
        payload = ResultPayload(
            role=self.spec.role,
            round=where.round if where is not None else round_ + 1,
            answer=final,
            stopped=stopped,
            costs=costs,
            failures=[f.code for f in failures],
            policy=tally.to_wire() if tally is not None else {},
            tool_faults=dict(tally.tool_faults) if tally is not None else {},
            ended_at=ended_at,
        )
        last_id: str | None = None
        for i, target in enumerate(targets):
            if i == 1:  # the costs were spent once, whatever the number of recipients
                payload = payload.without_costs()
            wire = payload.to_wire()
            copy_fired = list(fired)
            if faults is not None:
                copy = faults.copy_for(target, final)
                copy_fired += copy.fired
                wire = apply_copy(wire, copy)
            if emit is not None:
                for f in copy_fired:
                    emit(AgentFaultFired(agent=self.name, recipient=target, **f.event()))
            if copy_fired or also_fired:  # with what fired while the answer was made
                mark_fired(wire, [*also_fired, *copy_fired])
            sent = await self.endpoint.send(
                kind=kind,
                recipient=target,
                trial=trial,
                trace_id=trace_id,
                payload=wire,
                status=verdict.status,
                confidence=verdict.confidence,
                errors=verdict.errors,
                derived_from=derived if derived is not None else [env.id for env in inputs],
                at=sent_at,
            )
            last_id = last_id or sent.id
        memory = self._memory.get(trial)
        if memory is not None:
            memory.last_id = last_id
            memory.reported, memory.confidence = verdict.errors, verdict.confidence

    def _faults(self, trial: int, round_: int) -> AgentFaults | None:
        """This round's fault draws (None for an agent without faults: no stream made)."""
        if not self.spec.faults:
            return None
        if self._fault_pool is None:
            self._fault_pool = list(need_truths(self.scenario).values())
        rng = stream(self.scenario.seed, trial, self.name, round_, "agent-faults")
        return AgentFaults(self.spec.faults, rng, self._fault_pool)

    async def _publish_crash(
        self, trial: int, round_: int, inputs: list[Envelope], exc: Exception
    ) -> None:
        trace_id = inputs[0].trace_id if inputs else f"{self.run_id}-{trial}"
        failure = Failure(
            ErrorCode.INTERNAL_ERROR, self.name, redact(f"{type(exc).__name__}: {exc}")[:300]
        )
        final = FinalAnswer(
            text="agent crashed", unresolved=[n.id for n in self.scenario.task.needs]
        )
        injected = [Fired("crash")] if isinstance(exc, InjectedCrash) else []
        await self._publish_result(
            trial, trace_id, inputs, final, [failure], CRASHED, None, round_, also_fired=injected
        )


async def _settle(pending: list[asyncio.Task[None]]) -> None:
    """Wait for event publishes; a lost event is telemetry lost, not a failed trial."""
    if not pending:
        return
    tasks = list(pending)
    pending.clear()
    for result in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(result, Exception):
            log.warning("event not published: %s", redact(str(result)))


class _NoTools:
    """The tool side of a discussion round, which offers the model no tools."""

    async def call(self, call: ToolCall) -> GateOutcome:
        raise RuntimeError(f"a discussion round calls no tools (asked for {call.name!r})")


def spent(budget: Budget, model: ModelGate, tool_retries: int, seconds: float = 0.0) -> Costs:
    """What one piece of work cost: its budget's backend calls, its model gate's calls
    and tokens, the retries of both, the simulated seconds it took."""
    return Costs(
        backend_calls=float(budget.backend_calls),
        model_calls=float(model.calls),
        input_tokens=float(model.input_tokens),
        output_tokens=float(model.output_tokens),
        retries=float(tool_retries + model.retries),
        sim_seconds=round(seconds, 6),
        cache_read_tokens=float(model.cache_read_tokens),
        cache_write_tokens=float(model.cache_write_tokens),
    )


def _tools_of(scenario: Scenario, key: str) -> list[str]:
    """The tools that serve a claim's need (`need` or `need.item`): its tool and its
    second sources."""
    need = next((n for n in scenario.task.needs if n.id == key.split(".", 1)[0]), None)
    return need.tools if need is not None else []
