"""One trial's work for one agent: its clock, its gates, its loop, its conclusion and
its result.

The same pipeline does every round: wait for the inputs (a late or lost one counts as
a timed-out wait), make the trial's budget, guard and gates, show the model the task
and what arrived (through the inspector, when the agent has one), run the loop, decide
what the answer says, and publish it. What differs between a task round and a
discussion round (errorflow.agents.discussion) is a `Round`: whose draws it makes, the
model's persona and first turns, how the answer is concluded and what it remembers.
An input that reports an infrastructure fault skips it all: the result says so too.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import Protocol

from pydantic import JsonValue

from errorflow.agents.carry import carry_forward
from errorflow.agents.defence_effects import changes, overruled
from errorflow.agents.discussion import Heard, Memory
from errorflow.agents.kit import AgentKit
from errorflow.agents.late_inputs import Arrivals, arrivals
from errorflow.agents.loop import LoopOutcome, Persona, TrialLoop
from errorflow.agents.model_gate import ModelGate
from errorflow.agents.own.own_time_limit import OwnTimeLimit
from errorflow.agents.own.python_loop import OwnLoop
from errorflow.agents.policy_tally import PolicyTally
from errorflow.agents.propagation import (
    INFRA_STOP,
    InputReport,
    fallback_answer,
    infra_answer,
    infra_failure,
    infra_text,
    open_tools,
    unrecovered,
)
from errorflow.agents.publication import TrialResult, publish
from errorflow.agents.run_clock import start_time
from errorflow.agents.tool_gate import GateOutcome, TraceEntry
from errorflow.bus.endpoint import Endpoint
from errorflow.core.costs import Costs
from errorflow.core.outside_time import working_on
from errorflow.core.redact import redact
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import ErrorCode
from errorflow.faults.agent import model_faults_fired
from errorflow.models.backend import (
    Inspection,
    Stance,
    TaskTurn,
    ToolCall,
    ToolDef,
    UpstreamTurn,
)
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure
from errorflow.policies.loop_guard import LoopGuard
from errorflow.protocol import topics
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import Envelope
from errorflow.protocol.events import (
    AgentEvent,
    AgentStart,
    DefenceActed,
    Emit,
)
from errorflow.protocol.result import infra_reason
from errorflow.protocol.stop import StopReason
from errorflow.scenario.spec.behaviour import BEHAVIOURS, INSPECTOR_INSTRUCTIONS

log = logging.getLogger(__name__)

#: A round's answer: the final answer, the failures it reports and why its loop stopped.
Concluded = tuple[FinalAnswer, list[Failure], StopReason | None]


class Round(Protocol):
    """What a kind of round does its own way; the pipeline is `TrialWork`'s."""

    #: Whose draws it makes (a revision or discussion round has its own).
    owner: str
    #: The model's persona for the round.
    persona: Persona
    #: Whether a tool gate is made (a discussion round offers tools to challengers only).
    gated: bool
    stop_on_unrecoverable: bool
    #: The inputs, in the order they are read.
    inputs: list[Envelope]
    #: A python agent's own code does the round (a manager's dispatch is errorflow's).
    runs_own_code: bool

    def task(self) -> TaskTurn: ...

    def heard(self, arrived: list[Envelope]) -> list[Envelope]:
        """The inputs the model reads (each through the inspector, if any)."""
        ...

    def own_turns(self) -> list[UpstreamTurn]:
        """Turns the model reads before them, never inspected."""
        ...

    def conclude(self, out: LoopOutcome) -> Concluded: ...

    def remember(self, out: LoopOutcome, final: FinalAnswer) -> None:
        """What a discussion member keeps of the round (before the result goes out)."""
        ...

    def reports(self, came: Arrivals) -> list[InputReport]:
        """What the inputs said about failures, for propagation."""
        ...

    def derived(self) -> list[str]:
        """The ids of the messages the result is derived from."""
        ...


class TrialWork:
    """One round of one trial: `run` it once."""

    def __init__(self, kit: AgentKit, trial: int, inputs: list[Envelope], round_: int) -> None:
        self.kit = kit
        self.trial = trial
        self.inputs = inputs
        self.round = round_
        self.trace_id = inputs[0].trace_id

    async def run(self) -> None:
        with working_on(self.trace_id):  # its calls outside are timed for the trial
            await self._run()

    async def _run(self) -> None:
        carried = infra_reason(self.inputs)
        if carried is not None:  # nothing left to measure: pass it on, call no model
            await self._pass_infra_fault(carried)
            return
        kit = self.kit
        plan: Round
        if kit.talk.member and self.round > 0:
            plan = DiscussionRound(kit, self.trial, self.round, self.inputs)
        elif kit.spec.delegates and self.round == 0:
            plan = DispatchRound(kit, self.trial, self.round, self.inputs)
        else:
            plan = TaskRound(kit, self.trial, self.round, self.inputs)
        await self._work(plan)

    async def _work(self, plan: Round) -> None:
        kit, trial = self.kit, self.trial
        start = start_time(kit.plan, trial, self.inputs)
        clock = SimClock(kit.plan.time_scale, start)
        came = arrivals(plan.inputs, kit.spec.wait_s)
        if came.waited_s:
            await clock.sleep(came.waited_s)
        budget = Budget(kit.policy.budget)
        guard = LoopGuard(kit.policy.guards)
        events = TrialEvents(kit.endpoint, trial, self.trace_id, clock)
        emit = events.emit
        gate = kit.tool_gate(trial, plan.owner, clock, budget, guard, emit) if plan.gated else None
        model = kit.model_gate(trial, plan.owner, clock, budget, emit)
        emit(AgentStart(agent=kit.name, inputs=[env.sender for env in self.inputs]))
        task = plan.task()
        heard = [kit.upstream_turn(env) for env in plan.heard(came.arrived)]
        heard += [kit.missing_turn(f) for f in came.missing]
        extra, inspected = Costs(), list[TraceEntry]()
        if kit.spec.inspector is not None:
            heard, extra, inspected = await self._inspected(plan.owner, task, heard, clock, emit)
        tools = gate or _NoTools()
        loop: TrialLoop | OwnLoop
        if kit.own is not None and plan.runs_own_code:  # the user's code, not the model's loop
            stop = plan.stop_on_unrecoverable
            limit = OwnTimeLimit(kit.spec.function_timeout_s)
            loop = OwnLoop(
                kit.own, trial, plan.persona, model, tools, budget, guard, stop, emit, limit
            )
        else:
            loop = TrialLoop(
                plan.persona, model, tools, budget, guard, plan.stop_on_unrecoverable, emit
            )
        try:
            out = await loop.run(task, [*plan.own_turns(), *heard])
        except asyncio.CancelledError:
            events.cancel()
            raise
        await events.settle()
        if kit.on_trace is not None:  # the inspector's calls came first
            kit.on_trace(kit.name, trial, [*inspected, *(gate.trace if gate else [])])
        final, failures, stopped = plan.conclude(out)
        if kit.spec.challenge > 0:
            self._challenged(final, heard, emit)
        retries = gate.retries if gate is not None else 0
        now = round(clock.now, 6)
        plan.remember(out, final)
        result = TrialResult(
            trial,
            self.round,
            self.trace_id,
            final,
            [*failures, *came.missing],
            stopped,
            reports=plan.reports(came),
            derived=plan.derived(),
            costs=extra + spent(budget, model, retries, clock.now - start),
            tally=events.tally,
            ended_at=now if kit.plan.run_scoped else None,
            sent_at=now,
            fired=model_faults_fired(events.tally.model_faults),
            stated=loop.stated if isinstance(loop, OwnLoop) else None,
        )
        await publish(kit, result, emit)
        await events.settle()

    async def _inspected(
        self,
        owner: str,
        task: TaskTurn,
        upstream: list[UpstreamTurn],
        clock: SimClock,
        emit: Emit,
    ) -> tuple[list[UpstreamTurn], Costs, list[TraceEntry]]:
        """The inspector on this agent's inputs (errorflow.scenario.spec.defence_model): each
        message checked with the inspector's tools, corrected or blocked, before the
        agent reads it. Its tool and model calls are the agent's costs too."""
        kit = self.kit
        spec = kit.spec.inspector
        assert spec is not None
        brief = Inspection(spec.check, spec.on_wrong, spec.genealogy)
        tools = [
            ToolDef(t, kit.catalog.descriptions[t], kit.catalog.schemas[t]) for t in spec.tools
        ]
        check = BEHAVIOURS["check"]
        persona = Persona(
            kit.name, "inspector", INSPECTOR_INSTRUCTIONS, tools, check, Stance(inspect=brief)
        )
        checked: list[UpstreamTurn] = []
        cost = Costs()
        trace: list[TraceEntry] = []
        for turn in upstream:
            who = f"{owner}~inspector~{turn.sender}"
            budget = Budget(kit.policy.budget)
            guard = LoopGuard(kit.policy.guards)
            gate = kit.tool_gate(self.trial, who, clock, budget, guard, emit)
            model = kit.model_gate(self.trial, who, clock, budget, emit)
            loop = TrialLoop(persona, model, gate, budget, guard, False, emit)
            out = await loop.run(task, [turn])
            answer = out.final if out.final is not None else turn.answer
            checked.append(replace(turn, answer=answer))
            corrected, blocked = changes(turn.answer, answer)
            if corrected or blocked:
                emit(
                    DefenceActed(
                        agent=kit.name,
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

    def _challenged(self, final: FinalAnswer, upstream: list[UpstreamTurn], emit: Emit) -> None:
        """A challenger's answer against what it received: a `defence` event for each
        sender whose claims it overruled."""
        for sender, keys in overruled(final, upstream).items():
            emit(
                DefenceActed(
                    agent=self.kit.name, defence="challenger", about=sender, corrected=keys
                )
            )

    async def _pass_infra_fault(self, reason: str) -> None:
        """An input reports an infrastructure fault: this agent's result says so too, so
        the trial ends at once (and no real model is called for a trial not scored)."""
        kit = self.kit
        own = kit.own_needs(kit.task_turn(self.trial).needs)
        failure = Failure(ErrorCode.INFRA_FAULT, "upstream", reason)
        result = TrialResult(
            self.trial,
            self.round,
            self.trace_id,
            infra_answer(reason, own),
            [failure],
            INFRA_STOP,
            reports=self.inputs,
            derived=[env.id for env in self.inputs],
            costs=Costs(),
        )
        await publish(kit, result)


class TaskRound:
    """Round 0 of a trial, or a revision round a reviewer sent back: the task, the
    inputs, the agent's own persona and tools."""

    gated = True
    runs_own_code = True

    def __init__(self, kit: AgentKit, trial: int, round_: int, inputs: list[Envelope]) -> None:
        self.kit, self.trial, self.inputs = kit, trial, inputs
        # A revision round (or a manager's round 1) is a new attempt: its own draws
        # (round 0 keeps the plain name).
        self.owner = kit.name if round_ == 0 else f"{kit.name}@r{round_}"
        self.persona = kit.persona
        self.stop_on_unrecoverable = kit.policy.stop_on_unrecoverable

    def task(self) -> TaskTurn:
        return self.kit.task_turn(self.trial)

    def heard(self, arrived: list[Envelope]) -> list[Envelope]:
        return [env for env in arrived if env.sender != topics.RUNNER]

    def own_turns(self) -> list[UpstreamTurn]:
        return []

    def conclude(self, out: LoopOutcome) -> Concluded:
        """The final answer (a fallback when the loop was stopped), the failures it must
        report and why the loop stopped. A model call the infrastructure failed makes
        the answer an infra fault's: the trial measured nothing."""
        kit = self.kit
        needs = out.task.needs
        own = kit.own_needs(needs)
        infra = infra_failure(out.failures)
        if infra is not None:
            final = infra_answer(infra_text(kit.name, infra), own)
        else:
            final = out.final or fallback_answer(kit.mode, own, out.stopped)
            if kit.spec.does.carries:
                upstream = [t for t in out.turns if isinstance(t, UpstreamTurn)]
                final = carry_forward(final, upstream)
        reported = unrecovered(out.failures, out.succeeded_tools, open_tools(needs, own, final))
        return final, reported, (INFRA_STOP if infra is not None else out.stopped)

    def remember(self, out: LoopOutcome, final: FinalAnswer) -> None:
        """A discussion member keeps its answer, and what its own tools said, for the
        rounds to come."""
        kit = self.kit
        if not kit.talk.member:
            return
        own = {
            c.key: c.value
            for c in final.claims
            if any(t in out.succeeded_tools for t in kit.plan.need_tools(c.key))
        }
        kit.memory[self.trial] = Memory(out.task, list(self.inputs), final, own)

    def reports(self, came: Arrivals) -> list[InputReport]:
        return list(self.inputs)

    def derived(self) -> list[str]:
        return [env.id for env in self.inputs]


class DispatchRound(TaskRound):
    """A manager's round 0: read the task and what arrived, and send each delegate its
    sub-task (the needs assigned to it, with every finding received so far, which a
    dependent need takes its argument from). One model call as a coordinator, no
    tools; the manager's own work is its round 1, on its delegates' results."""

    gated = False
    runs_own_code = False

    def __init__(self, kit: AgentKit, trial: int, round_: int, inputs: list[Envelope]) -> None:
        super().__init__(kit, trial, round_, inputs)
        route = BEHAVIOURS["route"]
        spec = kit.spec
        self.persona = Persona(kit.name, spec.role, route.instructions, [], route, Stance())
        self.stop_on_unrecoverable = False

    def conclude(self, out: LoopOutcome) -> Concluded:
        kit = self.kit
        infra = infra_failure(out.failures)
        if infra is not None:
            return infra_answer(infra_text(kit.name, infra), []), list(out.failures), INFRA_STOP
        upstream = [t for t in out.turns if isinstance(t, UpstreamTurn)]
        final = carry_forward(out.final or FinalAnswer(), upstream)
        split = "; ".join(
            f"{d}: {', '.join(needs) or 'nothing'}" for d, needs in kit.plan.dispatch.items()
        )
        final = replace(final, text=f"Sub-tasks: {split}.", abstained=False)
        return final, unrecovered(out.failures, out.succeeded_tools, ()), out.stopped

    def remember(self, out: LoopOutcome, final: FinalAnswer) -> None:
        return None


class DiscussionRound:
    """A discussion round (errorflow.agents.discussion): read the peers' latest answers,
    revise this agent's own (no tools, but a challenger's), and pass it on."""

    stop_on_unrecoverable = False
    runs_own_code = True

    def __init__(self, kit: AgentKit, trial: int, round_: int, inputs: list[Envelope]) -> None:
        self.kit, self.trial, self.original = kit, trial, inputs
        self.inputs = sorted(inputs, key=lambda e: e.sender)
        self.owner = f"{kit.name}@d{round_}"
        self.memory = kit.memory.get(trial)
        memory = self.memory
        self.previous = memory.answer if memory is not None else FinalAnswer(abstained=True)
        own: dict[str, JsonValue] = memory.own_evidence if memory is not None else {}
        spec = kit.spec
        stance = Stance(challenge=spec.challenge, deliberate=True, own_evidence=own)
        # Only a challenger calls tools in a discussion round (to re-check disputes).
        tools = kit.persona.tools if spec.challenge > 0 else []
        synthesise = BEHAVIOURS["synthesise"]
        self.persona = Persona(kit.name, spec.role, kit.persona.system, tools, synthesise, stance)
        self.gated = bool(tools)

    def task(self) -> TaskTurn:
        return self.memory.task if self.memory is not None else self.kit.task_turn(self.trial)

    def heard(self, arrived: list[Envelope]) -> list[Envelope]:
        return arrived

    def own_turns(self) -> list[UpstreamTurn]:
        return [UpstreamTurn(self.kit.name, "ok", 1.0, [], self.previous)]

    def conclude(self, out: LoopOutcome) -> Concluded:
        return out.final or self.previous, list(out.failures), out.stopped

    def remember(self, out: LoopOutcome, final: FinalAnswer) -> None:
        if self.memory is not None:
            self.memory.answer = final

    def reports(self, came: Arrivals) -> list[InputReport]:
        return [Heard.of(self.memory, came.arrived)]

    def derived(self) -> list[str]:
        memory = self.memory
        return [
            *([memory.last_id] if memory and memory.last_id else []),
            *(e.id for e in self.original),
        ]


async def _settle_tasks(pending: list[asyncio.Future[None]]) -> None:
    """Wait for event publishes; a lost event is telemetry lost, not a failed trial."""
    if not pending:
        return
    tasks = list(pending)
    pending.clear()
    for result in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(result, Exception):
            log.warning("event not published: %s", redact(str(result)))


@dataclass
class TrialEvents:
    """How the gates hand a trial's events over: stamped with the run time, counted for
    the policy tally, published (what to settle before the result: publishes written
    and waiting for their PUBACK, and tasks)."""

    endpoint: Endpoint
    trial: int
    trace_id: str
    clock: SimClock
    tally: PolicyTally = field(default_factory=PolicyTally)
    pending: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def queued(self) -> bool:
        """A task among the pending may not have published yet (a written one has).
        Every event after a task goes by a task, so the last one tells."""
        return bool(self.pending) and isinstance(self.pending[-1], asyncio.Task)

    def emit(self, event: AgentEvent) -> None:
        at = round(self.clock.now, 6)  # the trial's run time, for an event not stamped yet
        self.tally.add(event)
        if self.queued:  # one is still waiting for its turn: this one goes after it
            publishing = self.endpoint.publish_event(self.trial, self.trace_id, event, at)
            self.pending.append(asyncio.create_task(publishing))
            return
        try:
            later = self.endpoint.post_event(self.trial, self.trace_id, event, at)
        except Exception as exc:  # as `settle` takes a failed publish: telemetry lost
            log.warning("event not published: %s", redact(str(exc)))
            return
        if isinstance(later, asyncio.Future):  # written already
            self.pending.append(later)
        elif later is not None:
            self.pending.append(asyncio.create_task(later))

    async def settle(self) -> None:
        await _settle_tasks(self.pending)

    def cancel(self) -> None:
        """Nobody will wait for these events any more."""
        for task in self.pending:
            task.cancel()


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
