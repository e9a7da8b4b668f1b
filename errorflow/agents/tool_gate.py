"""The tool gate: the policy layer at run time, between an agent's model and its tools.

For one tool call: loop guards → circuit breaker → pre-flight validation → attempts
(with retry decisions and simulated backoff, `errorflow.agents.attempts`) → one breaker
record → the model-facing observation. The decisions come from the pure modules in
`errorflow.policies`; this module only carries them out: it advances the simulated
clock, charges the budget and emits an event for every retry, breaker change and guard
stop. The raw exception and arguments go to the local trace only (`trace`), never to
the bus or the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from errorflow.agents.attempts import (
    Answered,
    AttemptLoop,
    CallOutcome,
    Failed,
    ObservedBreaker,
    RetryTerms,
    spend,
)
from errorflow.agents.call_limits import CallLimits
from errorflow.core.redact import redact, redact_obj
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import SOFT, ErrorCode
from errorflow.core.tool_errors import CallTimeout, ToolException
from errorflow.faults.tool import empty_of
from errorflow.models.backend import ToolCall
from errorflow.policies.breaker import BreakerBank
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure, classify_body, classify_exception
from errorflow.policies.config import PolicyConfig
from errorflow.policies.loop_guard import LoopGuard, canonical_args
from errorflow.policies.observation import observe_failure, observe_success
from errorflow.policies.retry import Jitter, RetryDecision
from errorflow.protocol.events import (
    Emit,
    GuardBlock,
    RetriesExhausted,
    RetryScheduled,
    ToolCallEvent,
)
from errorflow.world.tool_client import CALL_FIRED, ToolClient

#: Arguments as they reached the tool: a mapping, or the text of an unparseable call.
ToolArgs = Mapping[str, object] | str


@dataclass
class GateOutcome:
    observation: dict[str, Any]
    failure: Failure | None  # after policies; None on a clean success
    value: Any = None
    swallowed: bool = False  # implicit propagation hid this failure from the model


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One failed attempt, unredacted (it stays in this process): the raw exception (or
    the 2xx body that was a failure), the arguments as they reached the tool (attempt 0:
    pre-flight), the class it got and the simulated time at which it was seen."""

    tool: str
    call_id: str
    args: ToolArgs
    attempt: int
    exception: str | None
    raw: str | None
    code: str | None
    body: object
    waited_s: float | None
    at: float


@dataclass(frozen=True, slots=True)
class _Answer:
    """What a tool answered: the value, and the soft failure it may carry."""

    value: object
    soft: Failure | None


class ToolGate:
    def __init__(
        self,
        *,
        agent: str,
        trial: int,
        policy: PolicyConfig,
        client: ToolClient,
        clock: SimClock,
        rng: Jitter,
        budget: Budget,
        breakers: BreakerBank,
        guard: LoopGuard,
        implicit: bool,
        emit: Emit,
        limits: CallLimits | None = None,
    ) -> None:
        self.agent, self.trial, self.policy, self.client = agent, trial, policy, client
        self.limits = limits if limits is not None else CallLimits.of(policy)
        self.clock, self.budget = clock, budget
        self.breakers, self.guard, self.implicit, self.emit = breakers, guard, implicit, emit
        self.trace: list[TraceEntry] = []
        self._loop = AttemptLoop(clock=clock, rng=rng, budget=budget)

    @property
    def retries(self) -> int:
        return self._loop.retries

    async def call(self, call: ToolCall) -> GateOutcome:
        token = CALL_FIRED.set([])  # the faults that fire on this call's attempts
        try:
            return await self._call(call)
        finally:
            CALL_FIRED.reset(token)

    async def _call(self, call: ToolCall) -> GateOutcome:
        args_map = call.arguments if isinstance(call.arguments, dict) else {"_raw": call.arguments}
        blocked = self._guard(call, args_map)
        if blocked is not None:
            return blocked
        pattern = canonical_args(args_map) if self.policy.breaker.per_argument else None
        breaker = ObservedBreaker(
            self.breakers, call.name, pattern, clock=self.clock, agent=self.agent, emit=self.emit
        )
        refused = self._breaker_refusal(call, breaker)
        if refused is not None:
            return refused
        mangled = (
            self.client.mangle(call.name, dict(args_map))
            if isinstance(call.arguments, dict)
            else call.arguments
        )
        try:
            args = self.client.validate(call.name, mangled)
        except ToolException as exc:
            breaker.release()  # refused before the service: no evidence, probe slot freed
            failure = classify_exception(call.name, exc)
            self.record_trace(call, mangled, exc, 0, failure=failure)
            return self._finish(call, failure, attempts=0)
        outcome = await self._attempts(call, mangled, args, breaker)
        if isinstance(outcome.result, Failed):
            return self._finish(call, outcome.result.failure, attempts=outcome.attempts)
        answer = outcome.result.value
        return self._success(call, answer.value, answer.soft, outcome.attempts)

    # -- the steps of a call ---------------------------------------------------------
    def _guard(self, call: ToolCall, args_map: Mapping[str, object]) -> GateOutcome | None:
        verdict = self.guard.check_call(call.name, args_map)
        if verdict is None:
            return None
        self.emit(
            GuardBlock(agent=self.agent, tool=call.name, code=verdict.code, message=verdict.message)
        )
        failure = Failure(verdict.code, call.name, verdict.message)
        # A blocked call did not run: it is not fed back to the guard (otherwise a
        # blocked repeat would count as a failure of the tool).
        return self._finish(call, failure, attempts=0, record_guard=False)

    def _breaker_refusal(self, call: ToolCall, breaker: ObservedBreaker) -> GateOutcome | None:
        decision = breaker.allow()
        if decision.allowed:
            return None
        failure = Failure(
            ErrorCode.CIRCUIT_OPEN,
            call.name,
            f"circuit open for {call.name}",
            retry_after_s=decision.retry_in_s,
        )
        # The call never ran: it is no evidence about the tool for the loop guard.
        return self._finish(call, failure, attempts=0, record_guard=False)

    async def _attempts(
        self, call: ToolCall, mangled: ToolArgs, args: Any, breaker: ObservedBreaker
    ) -> CallOutcome[_Answer]:
        spec = self.client.tools[call.name]
        key = None
        if not spec.idempotent and self.policy.retry.idempotency_keys:
            key = f"{self.trial}:{self.agent}:{call.id}"  # fixed before the first attempt
        terms = RetryTerms(self.policy.retry, spec.idempotent, key is not None)
        steps = _ToolAttempts(self, call, mangled, args, key)
        return await self._loop.run(steps, terms=terms, breaker=breaker)

    def _success(
        self, call: ToolCall, value: object, soft: Failure | None, attempts: int
    ) -> GateOutcome:
        args_map = call.arguments if isinstance(call.arguments, dict) else {}
        self.guard.record_call(call.name, args_map, ok=True)
        if self.implicit:
            obs = observe_success(call.name, value)
        else:
            obs = observe_success(
                call.name,
                value,
                soft,
                style=self.policy.error_style,
                tell_class=self.policy.tell_class,
            )
        self.emit(
            ToolCallEvent(
                agent=self.agent,
                tool=call.name,
                call_id=call.id,
                args=redact_obj(args_map),
                ok=True,
                code=soft.code if soft else None,
                attempts=attempts,
                faults=_fired(),
                silent=[place for place in _fired() if place in self.client.silent_places],
            )
        )
        # Implicitly, an empty or partial result is just a result to the model; the
        # failure stays in the trace (swallowed) so the scorer still knows.
        return GateOutcome(obs, soft, value, swallowed=self.implicit and soft is not None)

    def _finish(
        self, call: ToolCall, failure: Failure, *, attempts: int, record_guard: bool = True
    ) -> GateOutcome:
        args_map = call.arguments if isinstance(call.arguments, dict) else {}
        if record_guard:
            self.guard.record_call(call.name, args_map, ok=False)
        self.emit(
            ToolCallEvent(
                agent=self.agent,
                tool=call.name,
                call_id=call.id,
                args=redact_obj(args_map),
                ok=False,
                code=failure.code,
                attempts=attempts,
                http_status=failure.http_status,
                error=redact(failure.raw)[:300],
                faults=_fired(),
            )
        )
        if self.implicit:
            # The anti-pattern under test: the wrapper swallows the error and hands the
            # model an empty result, as `except Exception: return []` does.
            kind = self.client.tools[call.name].kind if call.name in self.client.tools else ""
            return GateOutcome(observe_success(call.name, empty_of(kind)), failure, swallowed=True)
        obs = observe_failure(failure, self.policy.error_style, tell_class=self.policy.tell_class)
        return GateOutcome(obs, failure)

    def record_trace(
        self,
        call: ToolCall,
        args: ToolArgs,
        exc: BaseException | None,
        attempt: int,
        *,
        failure: Failure,
        waited_s: float | None = None,
        body: object = None,
    ) -> None:
        raw = getattr(exc, "raw", str(exc)) if exc is not None else None
        self.trace.append(
            TraceEntry(
                tool=call.name,
                call_id=call.id,
                args=args,
                attempt=attempt,
                exception=repr(exc) if exc is not None else None,
                raw=failure.raw if raw is None else raw,
                code=failure.code.value,
                body=body,
                waited_s=waited_s,
                at=self.clock.now,
            )
        )


class _ToolAttempts:
    """The tool gate's steps for `AttemptLoop` (see errorflow.agents.attempts)."""

    def __init__(
        self, gate: ToolGate, call: ToolCall, mangled: ToolArgs, args: Any, key: str | None
    ) -> None:
        self.gate, self.call, self.mangled, self.args, self.key = gate, call, mangled, args, key
        self.spec = gate.client.tools[call.name]

    def refusal(self, attempts_made: int) -> Failed | None:
        reason = self.gate.budget.exhausted()  # per step or per task, before every attempt
        if reason is None:
            return None
        return Failed(
            Failure(ErrorCode.BUDGET_EXHAUSTED, self.call.name, f"budget exhausted: {reason}")
        )

    async def attempt(self, number: int) -> Answered[_Answer] | Failed:
        gate, tool = self.gate, self.call.name
        refused = (
            await gate.limits.enter(
                tool, clock=gate.clock, budget=gate.budget, agent=gate.agent, emit=gate.emit
            )
            if gate.limits.active
            else None
        )
        if refused is not None:  # it never went out: no backend call
            gate.record_trace(self.call, self.mangled, None, number, failure=refused)
            return Failed(refused)
        gate.budget.charge_backend()
        try:
            result = await gate.client.ainvoke(
                tool,
                self.args,
                timeout_s=gate.policy.retry.per_call_timeout_s,
                idempotency_key=self.key,
                now=gate.clock.now,
            )
        except Exception as exc:  # any tool bug is a classified failure, never a crash
            waited = exc.waited_s if isinstance(exc, CallTimeout) else self.spec.latency_s
            await spend(gate.clock, gate.budget, waited)
            gate.limits.leave(tool, gate.clock.now)
            failure = classify_exception(tool, exc)
            gate.record_trace(
                self.call, self.mangled, exc, number, failure=failure, waited_s=waited
            )
            return Failed(failure)
        await spend(gate.clock, gate.budget, result.duration_s)
        gate.limits.leave(tool, gate.clock.now)
        soft = classify_body(
            tool,
            business_error=result.business_error,
            empty=result.empty,
            item_errors=result.item_errors,
        )
        if soft is not None:
            gate.record_trace(
                self.call, self.mangled, None, number, failure=soft, body=result.value
            )
        if soft is None or soft.code in SOFT:
            return Answered(_Answer(result.value, soft))
        return Failed(soft)

    def report(self, failure: Failure, number: int, decision: RetryDecision) -> None:
        agent, tool = self.gate.agent, self.call.name
        if decision.retry:
            delay_s = round(decision.delay_s, 6)
            self.gate.emit(
                RetryScheduled(
                    agent=agent, tool=tool, attempt=number, code=failure.code, delay_s=delay_s
                )
            )
        elif number > 1 and decision.reason in ("attempts_exhausted", "budget_exhausted"):
            # Retried, and the retries ran out (attempts or budget) on a failure the
            # policy would still have retried.
            self.gate.emit(
                RetriesExhausted(
                    agent=agent,
                    tool=tool,
                    attempts=number,
                    code=failure.code,
                    reason=decision.reason,
                )
            )


def _fired() -> list[str]:
    """The places of the faults that fired on the current call's attempts."""
    return list(CALL_FIRED.get() or ())
