"""One trial's loop: model → tool calls through the tool gate → model ... → an answer.

Each step opens the budget's step, asks the model (through the model gate) and runs
the calls it asks for (through the tool gate, which applies retries, breakers and
guards). The loop ends with the model's final answer or a stop: the budget exhausted,
a model call that failed for good, an unrecoverable tool failure when the policy stops
on one, a tool server gone (the infrastructure's failure: nothing more to measure), or
a loop guard (step cap, no progress). Every stop is a `loop_stop` event.
What the result then says about the failures is `propagation`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from errorflow.agents.tool_gate import GateOutcome
from errorflow.core.redact import redact
from errorflow.core.taxonomy import UNRECOVERABLE, ErrorCode
from errorflow.models.backend import (
    AssistantTurn,
    ModelCallError,
    ModelRequest,
    ModelResponse,
    ObservationTurn,
    Stance,
    TaskTurn,
    ToolCall,
    ToolDef,
    Turn,
    UpstreamTurn,
)
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure
from errorflow.policies.loop_guard import LoopGuard
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.events import Emit, LoopStop
from errorflow.protocol.stop import StopReason
from errorflow.scenario.spec.behaviour import Behaviour


class ModelCaller(Protocol):
    async def complete(self, request: ModelRequest) -> ModelResponse: ...


class ToolCaller(Protocol):
    async def call(self, call: ToolCall) -> GateOutcome: ...


@dataclass(frozen=True)
class Persona:
    """Who the model is asked to be, and what it may call."""

    agent: str
    role: str
    system: str
    tools: list[ToolDef]
    behaviour: Behaviour
    stance: Stance = field(default_factory=Stance)


@dataclass
class LoopOutcome:
    task: TaskTurn
    turns: list[Turn]
    final: FinalAnswer | None = None  # None: the loop was stopped
    stopped: StopReason | None = None
    failures: list[Failure] = field(default_factory=list)  # every one, in order
    succeeded_tools: set[str] = field(default_factory=set)  # tools with a clean call

    @property
    def running(self) -> bool:
        return self.final is None and self.stopped is None


@dataclass
class TrialLoop:
    persona: Persona
    model: ModelCaller
    gate: ToolCaller
    budget: Budget
    guard: LoopGuard
    stop_on_unrecoverable: bool
    emit: Emit
    #: Clean tool calls so far in the trial (the guard's progress counts them all).
    successes: int = 0

    async def run(self, task: TaskTurn, upstream: list[UpstreamTurn]) -> LoopOutcome:
        out = LoopOutcome(task, [task, *upstream])
        while out.running:
            response = await self._ask_model(out)
            if response is not None:
                await self._run_calls(out, response)
        if out.stopped is not None:  # every way a loop can be stopped is an event
            self.emit(
                LoopStop(
                    agent=self.persona.agent,
                    code=out.stopped.code_value,
                    stopped=out.stopped.wire,
                    steps=self.budget.steps,
                )
            )
        return out

    async def _ask_model(self, out: LoopOutcome) -> ModelResponse | None:
        """Start a step and get the model's response; None when the step ended the loop."""
        self.budget.start_step()
        reason = self.budget.exhausted()
        if reason is not None:
            out.stopped = StopReason(ErrorCode.BUDGET_EXHAUSTED)
            out.failures.append(Failure(ErrorCode.BUDGET_EXHAUSTED, "budget", reason))
            return None
        p = self.persona
        request = ModelRequest(
            p.agent, p.role, p.system, list(out.turns), p.tools, p.behaviour.name, p.stance
        )
        try:
            response = await self.model.complete(request)
        except ModelCallError as exc:
            out.stopped = StopReason(ErrorCode.MODEL_ERROR)
            out.failures.append(
                Failure(exc.code, "model", redact(str(exc)), http_status=exc.status)
            )
            return None
        if response.final is not None:
            out.final = response.final
            return None
        if not response.calls:
            out.final = FinalAnswer(text="(no answer)", flags=["empty model response"])
            return None
        return response

    async def _run_calls(self, out: LoopOutcome, response: ModelResponse) -> None:
        """The step's tool calls, in order, then the guard's verdict on the step."""
        out.turns.append(AssistantTurn(list(response.calls)))
        step_failures = 0
        for call in response.calls:
            outcome = await self.gate.call(call)
            out.turns.append(ObservationTurn(call.id, call.name, outcome.observation))
            if outcome.failure is None:
                self.successes += 1
                out.succeeded_tools.add(call.name)
                continue
            step_failures += 1
            out.failures.append(outcome.failure)
            if outcome.failure.code is ErrorCode.INFRA_FAULT:
                out.stopped = StopReason(ErrorCode.INFRA_FAULT)
                break
            if outcome.failure.code in UNRECOVERABLE and self.stop_on_unrecoverable:
                # The step's remaining calls still run (they were asked for together).
                out.stopped = StopReason(outcome.failure.code, unrecoverable=True)
        if out.stopped is None:
            verdict = self.guard.end_step(float(self.successes - step_failures))
            if verdict is not None:
                out.stopped = StopReason(verdict.code)
