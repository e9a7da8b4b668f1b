"""Model-call resilience: a failing model call (429, 529, 5xx, timeout) goes through the
same pure retry and breaker machinery as a tool call."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from errorflow.agents.model import ModelBackend, ModelCallError, ModelRequest, ModelResponse
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import ErrorCode
from errorflow.policies.breaker import BreakerBank, Transition
from errorflow.policies.budget import Budget
from errorflow.policies.config import PolicyConfig
from errorflow.policies.retry import decide_retry

Emit = Callable[[str, dict[str, Any]], None]


class ModelGate:
    def __init__(
        self,
        backend: ModelBackend,
        policy: PolicyConfig,
        clock: SimClock,
        rng: random.Random,
        budget: Budget,
        emit: Emit,
    ) -> None:
        self.backend, self.policy, self.clock, self.rng = backend, policy, clock, rng
        self.budget, self.emit = budget, emit
        self.breakers = BreakerBank(policy.model_breaker)
        self.calls = 0
        self.retries = 0
        self.input_tokens = 0
        self.output_tokens = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        attempt = 0
        while True:
            attempt += 1
            decision = self.breakers.allow("model", self.clock.now)
            self._transitions(decision.transitions)
            if not decision.allowed:
                raise ModelCallError(ErrorCode.CIRCUIT_OPEN, "model circuit open")
            self.calls += 1
            try:
                response = await self.backend.complete(request)
            except ModelCallError as exc:
                retry = decide_retry(
                    self.policy.model_retry,
                    code=exc.code,
                    attempt=attempt,
                    retry_after_s=exc.retry_after_s,
                    rng=self.rng,
                    idempotent=True,
                    has_idempotency_key=False,
                    budget_left_s=self.budget.time_left_s(),
                )
                self.emit(
                    "model_error",
                    {
                        "code": exc.code.value,
                        "status": exc.status,
                        "attempt": attempt,
                        "retry": retry.retry,
                        "delay_s": retry.delay_s,
                    },
                )
                if not retry.retry:
                    self._transitions(self.breakers.record_failure("model", self.clock.now))
                    raise
                self.retries += 1
                self.budget.charge_time(retry.delay_s)
                await self.clock.sleep(retry.delay_s)
                continue
            self._transitions(self.breakers.record_success("model", self.clock.now))
            usage = response.usage
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.budget.charge_model(usage.input_tokens + usage.output_tokens)
            self.emit(
                "model_call",
                {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "calls": len(response.calls),
                    "final": response.final is not None,
                    "stop_reason": response.stop_reason,
                },
            )
            return response

    def _transitions(self, transitions: Iterable[Transition]) -> None:
        for t in transitions:
            self.emit(
                "breaker",
                {
                    "tool": "model",
                    "from": t.frm.value,
                    "to": t.to.value,
                    "at": t.at,
                    "reason": t.reason,
                },
            )
