"""The tool gate: the policy layer at run time, between an agent's model and its tools.

For one tool call: loop guards → circuit breaker → pre-flight validation → attempts
(with retry decisions and simulated backoff) → one breaker record → the model-facing
observation. The decisions come from the pure modules in `errorflow.policies`; this
module only carries them out: it advances the simulated clock, charges the budget and
emits an event for every retry, breaker change and guard stop. The raw exception and
arguments go to the local trace only (`trace`), never to the bus or the model.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from errorflow.agents.model import ToolCall
from errorflow.agents.world import ToolClient, empty_of
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import SOFT, ErrorCode
from errorflow.core.tool_errors import CallTimeout, ToolException
from errorflow.policies.breaker import BreakerBank, Transition
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure, classify_body, classify_exception
from errorflow.policies.config import PolicyConfig
from errorflow.policies.loop_guard import LoopGuard, canonical_args
from errorflow.policies.observation import observe_failure, observe_success
from errorflow.policies.redact import redact, redact_obj
from errorflow.policies.retry import decide_retry

Emit = Callable[[str, dict[str, Any]], None]


@dataclass
class GateOutcome:
    observation: dict[str, Any]
    failure: Failure | None  # after policies; None on a clean success
    value: Any = None
    swallowed: bool = False  # implicit propagation hid this failure from the model


class ToolGate:
    def __init__(
        self,
        *,
        agent: str,
        trial: int,
        policy: PolicyConfig,
        client: ToolClient,
        clock: SimClock,
        rng: random.Random,
        budget: Budget,
        breakers: BreakerBank,
        guard: LoopGuard,
        implicit: bool,
        emit: Emit,
    ) -> None:
        self.agent, self.trial, self.policy, self.client = agent, trial, policy, client
        self.clock, self.rng, self.budget = clock, rng, budget
        self.breakers, self.guard, self.implicit, self.emit = breakers, guard, implicit, emit
        self.trace: list[dict[str, Any]] = []  # unredacted: stays in this process
        self.retries = 0

    async def call(self, call: ToolCall) -> GateOutcome:
        tool = call.name
        args_map = call.arguments if isinstance(call.arguments, dict) else {"_raw": call.arguments}
        verdict = self.guard.check_call(tool, args_map)
        if verdict is not None:
            self.emit(
                "guard", {"tool": tool, "code": verdict.code.value, "message": verdict.message}
            )
            failure = Failure(verdict.code, tool, verdict.message)
            # A blocked call did not run: it is not fed back to the guard (otherwise a
            # blocked repeat would count as a failure of the tool).
            return self._finish(
                call, failure, None, attempts=0, record_breaker=False, record_guard=False
            )
        pattern = canonical_args(args_map) if self.policy.breaker.per_argument else None
        decision = self.breakers.allow(tool, self.clock.now, pattern)
        self._breaker_events(tool, pattern, decision.transitions)
        if not decision.allowed:
            failure = Failure(
                ErrorCode.CIRCUIT_OPEN,
                tool,
                f"circuit open for {tool}",
                retry_after_s=decision.retry_in_s,
            )
            # The call never ran: it is no evidence about the tool for the loop guard.
            return self._finish(
                call, failure, None, attempts=0, record_breaker=False, record_guard=False
            )
        mangled = (
            self.client.mangle(tool, dict(args_map))
            if isinstance(call.arguments, dict)
            else call.arguments
        )
        try:
            args = self.client.validate(tool, mangled)
        except ToolException as exc:
            failure = classify_exception(tool, exc)
            self._trace(call, mangled, exc, 0, failure=failure)
            return self._finish(call, failure, None, attempts=0, record_breaker=False)
        spec = self.client.tools[tool]
        key = None
        if not spec.idempotent and self.policy.retry.idempotency_keys:
            key = f"{self.trial}:{self.agent}:{call.id}"  # fixed before the first attempt
        attempt = 0
        while True:
            reason = self.budget.exhausted()  # per step or per task, before every attempt
            if reason is not None:
                failure = Failure(ErrorCode.BUDGET_EXHAUSTED, tool, f"budget exhausted: {reason}")
                failure.attempts = attempt
                return self._finish(call, failure, args_map, attempts=attempt, record_breaker=False)
            attempt += 1
            self.budget.charge_backend()
            try:
                result = self.client.invoke(
                    tool, args, timeout_s=self.policy.retry.per_call_timeout_s, idempotency_key=key
                )
            except Exception as exc:  # any tool bug is a classified failure, never a crash
                waited = exc.waited_s if isinstance(exc, CallTimeout) else spec.latency_s
                await self._wait(waited)
                failure = classify_exception(tool, exc)
                self._trace(call, mangled, exc, attempt, failure=failure, waited_s=waited)
            else:
                await self._wait(result.duration_s)
                soft = classify_body(
                    tool,
                    business_error=result.business_error,
                    empty=result.empty,
                    item_errors=result.item_errors,
                )
                if soft is not None:
                    self._trace(call, mangled, None, attempt, failure=soft, body=result.value)
                if soft is None or soft.code in SOFT:
                    closed = self.breakers.record_success(tool, self.clock.now, pattern)
                    self._breaker_events(tool, pattern, closed)
                    return self._success(call, result.value, soft, attempt, pattern)
                failure = soft
            failure.attempts = attempt
            decision_r = decide_retry(
                self.policy.retry,
                code=failure.code,
                attempt=attempt,
                retry_after_s=failure.retry_after_s,
                rng=self.rng,
                idempotent=spec.idempotent,
                has_idempotency_key=key is not None,
                budget_left_s=self.budget.time_left_s(),
            )
            if not decision_r.retry:
                # Retried, and the retries ran out (attempts or budget) on a failure the
                # policy would still have retried.
                if attempt > 1 and decision_r.reason in ("attempts_exhausted", "budget_exhausted"):
                    self.emit(
                        "retries_exhausted",
                        {
                            "tool": tool,
                            "attempts": attempt,
                            "code": failure.code.value,
                            "reason": decision_r.reason,
                        },
                    )
                break
            self.retries += 1
            self.emit(
                "retry",
                {
                    "tool": tool,
                    "attempt": attempt,
                    "code": failure.code.value,
                    "delay_s": round(decision_r.delay_s, 6),
                },
            )
            await self._wait(decision_r.delay_s)
        transitions = self.breakers.record_failure(tool, self.clock.now, pattern)
        self._breaker_events(tool, pattern, transitions)
        return self._finish(call, failure, args_map, attempts=attempt, record_breaker=True)

    # -- helpers ------------------------------------------------------------------
    async def _wait(self, seconds: float) -> None:
        self.budget.charge_time(seconds)
        await self.clock.sleep(seconds)

    def _success(
        self, call: ToolCall, value: Any, soft: Failure | None, attempts: int, pattern: str | None
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
            "tool_call",
            {
                "tool": call.name,
                "call_id": call.id,
                "args": redact_obj(args_map),
                "ok": True,
                "code": soft.code.value if soft else None,
                "attempts": attempts,
            },
        )
        # Implicitly, an empty or partial result is just a result to the model; the
        # failure stays in the trace (swallowed) so the scorer still knows.
        return GateOutcome(obs, soft, value, swallowed=self.implicit and soft is not None)

    def _finish(
        self,
        call: ToolCall,
        failure: Failure,
        args: dict[str, Any] | None,
        *,
        attempts: int,
        record_breaker: bool,
        record_guard: bool = True,
    ) -> GateOutcome:
        args_map = call.arguments if isinstance(call.arguments, dict) else {}
        if record_guard:
            self.guard.record_call(call.name, args_map, ok=False)
        self.emit(
            "tool_call",
            {
                "tool": call.name,
                "call_id": call.id,
                "args": redact_obj(args_map),
                "ok": False,
                "code": failure.code.value,
                "attempts": attempts,
                "http_status": failure.http_status,
                "error": redact(failure.raw)[:300],
            },
        )
        if self.implicit:
            # The anti-pattern under test: the wrapper swallows the error and hands the
            # model an empty result, as `except Exception: return []` does.
            kind = self.client.tools[call.name].kind if call.name in self.client.tools else ""
            return GateOutcome(observe_success(call.name, empty_of(kind)), failure, swallowed=True)
        obs = observe_failure(failure, self.policy.error_style, tell_class=self.policy.tell_class)
        return GateOutcome(obs, failure)

    def _breaker_events(
        self, tool: str, pattern: str | None, transitions: tuple[Transition, ...] | list[Transition]
    ) -> None:
        for t in transitions:
            self.emit(
                "breaker",
                {
                    "tool": tool,
                    "pattern": redact(pattern) if pattern is not None else None,
                    "from": t.frm.value,
                    "to": t.to.value,
                    "at": t.at,
                    "reason": t.reason,
                },
            )

    def _trace(
        self,
        call: ToolCall,
        args: Any,
        exc: BaseException | None,
        attempt: int,
        *,
        failure: Failure | None = None,
        waited_s: float | None = None,
        body: Any = None,
    ) -> None:
        """One failed attempt, unredacted: the raw exception (or the 2xx body that was a
        failure), the arguments as they reached the tool (attempt 0: pre-flight), the
        class it got and the simulated time at which it was seen."""
        raw = getattr(exc, "raw", str(exc)) if exc is not None else None
        if raw is None and failure is not None:
            raw = failure.raw
        self.trace.append(
            {
                "tool": call.name,
                "call_id": call.id,
                "args": args,
                "attempt": attempt,
                "exception": repr(exc) if exc is not None else None,
                "raw": raw,
                "code": failure.code.value if failure is not None else None,
                "body": body,
                "waited_s": waited_s,
                "at": self.clock.now,
            }
        )
