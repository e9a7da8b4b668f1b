"""The model gate (no agent, no bus): failing model calls are retried like tool calls,
Retry-After is honoured, the model's breaker opens and refuses, tokens are counted and
every decision is an event stamped with the agent."""

from __future__ import annotations

import random
from typing import Any

import pytest

from errorflow.agents.model_gate import ModelGate
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import (
    ModelCallError,
    ModelRequest,
    ModelResponse,
    ToolCall,
    Usage,
)
from errorflow.policies.budget import Budget
from errorflow.policies.strategies import build_policy
from errorflow.protocol.events import (
    AgentEvent,
    BreakerChange,
    ModelCall,
    ModelError,
)

REQUEST = ModelRequest("a", "researcher", "system", [], [])


def overloaded(status: int = 529, retry_after_s: float | None = None) -> ModelCallError:
    code = ErrorCode.RATE_LIMIT if status == 429 else ErrorCode.TRANSIENT
    return ModelCallError(code, f"HTTP {status}", status=status, retry_after_s=retry_after_s)


def answer(input_tokens: int = 100, output_tokens: int = 20, calls: int = 1) -> ModelResponse:
    return ModelResponse(
        calls=[ToolCall(f"c{i}", "t", {}) for i in range(calls)],
        usage=Usage(input_tokens, output_tokens),
        stop_reason="tool_use",
    )


class ScriptedBackend:
    """Answers (or raises) from a script, one entry per call; repeats the last entry."""

    def __init__(self, *script: ModelResponse | ModelCallError) -> None:
        self.script = list(script)
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, ModelCallError):
            raise step
        return step


class Harness:
    def __init__(
        self, backend: ScriptedBackend, overrides: dict[str, Any] | None = None, seed: int = 1
    ) -> None:
        self.backend = backend
        self.policy = build_policy("resilient", overrides)
        self.clock = SimClock(0.0)
        self.budget = Budget(self.policy.budget)
        self.events: list[AgentEvent] = []
        self.gate = ModelGate(
            backend,
            self.policy,
            self.clock,
            random.Random(seed),
            self.budget,
            self.events.append,
            agent="writer",
        )

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def errors(self) -> list[ModelError]:
        return [e for e in self.events if isinstance(e, ModelError)]

    def breaker(self) -> list[tuple[str, str, str]]:
        return [(e.frm, e.to, e.reason) for e in self.events if isinstance(e, BreakerChange)]


async def test_a_clean_call_counts_tokens_and_emits_model_call() -> None:
    h = Harness(ScriptedBackend(answer(120, 30, calls=2)))
    response = await h.gate.complete(REQUEST)
    assert response.usage == Usage(120, 30) and h.backend.requests == [REQUEST]
    assert (h.gate.calls, h.gate.retries) == (1, 0)
    assert (h.gate.input_tokens, h.gate.output_tokens) == (120, 30)
    assert (h.budget.model_calls, h.budget.tokens) == (1, 150)
    [event] = h.events
    assert event == ModelCall(
        agent="writer",
        input_tokens=120,
        output_tokens=30,
        calls=2,
        final=False,
        stop_reason="tool_use",
    )
    assert event.to_payload() == {
        "type": "model_call",
        "agent": "writer",
        "input_tokens": 120,
        "output_tokens": 30,
        "calls": 2,
        "final": False,
        "stop_reason": "tool_use",
    }
    await h.gate.complete(REQUEST)
    assert (h.gate.input_tokens, h.gate.output_tokens, h.budget.tokens) == (240, 60, 300)


async def test_overloaded_529_is_retried_with_backoff_then_answers() -> None:
    h = Harness(ScriptedBackend(overloaded(529), overloaded(529), answer()))
    response = await h.gate.complete(REQUEST)
    assert response.usage == Usage(100, 20)
    assert (h.gate.calls, h.gate.retries) == (3, 2)
    assert h.types() == ["model_error", "model_error", "model_call"]
    delays = [e.delay_s for e in h.errors()]
    assert [e.attempt for e in h.errors()] == [1, 2]
    assert all(e.retry and e.code is ErrorCode.TRANSIENT and e.status == 529 for e in h.errors())
    # Full jitter under the exponential ceiling (base 0.5 s): 0.5, then 1.0.
    assert 0.0 <= delays[0] <= 0.5 and 0.0 <= delays[1] <= 1.0
    assert h.clock.now == pytest.approx(sum(delays))
    assert h.budget.sim_seconds == pytest.approx(h.clock.now)
    # Only the answered call is charged as a model call with tokens.
    assert (h.budget.model_calls, h.budget.tokens) == (1, 120)


async def test_rate_limit_429_waits_retry_after_exactly() -> None:
    h = Harness(ScriptedBackend(overloaded(429, retry_after_s=7.0), answer()))
    await h.gate.complete(REQUEST)
    [error] = h.errors()
    assert error.to_payload() == {
        "type": "model_error",
        "agent": "writer",
        "code": "rate_limit",
        "status": 429,
        "attempt": 1,
        "retry": True,
        "delay_s": 7.0,
    }
    assert h.clock.now == 7.0


async def test_retries_run_out_and_the_error_is_raised() -> None:
    err = overloaded(529)
    h = Harness(ScriptedBackend(err))
    with pytest.raises(ModelCallError) as info:
        await h.gate.complete(REQUEST)
    assert info.value is err  # the backend's own error reaches the agent
    assert h.gate.calls == 4 and h.gate.retries == 3  # model_retry: 4 attempts
    assert [e.retry for e in h.errors()] == [True, True, True, False]
    assert [e.attempt for e in h.errors()] == [1, 2, 3, 4]
    assert h.errors()[-1].delay_s == 0.0
    assert h.types() == ["model_error"] * 4  # the model breaker is off by default
    assert h.budget.model_calls == 0 and h.gate.input_tokens == 0


async def test_a_class_the_policy_does_not_retry_fails_at_once() -> None:
    bad = ModelCallError(ErrorCode.INVALID_ARGS, "HTTP 400", status=400)
    h = Harness(ScriptedBackend(bad))
    with pytest.raises(ModelCallError):
        await h.gate.complete(REQUEST)
    assert h.gate.calls == 1 and h.gate.retries == 0
    [error] = h.errors()
    assert (error.code, error.retry, error.delay_s) == (ErrorCode.INVALID_ARGS, False, 0.0)


async def test_the_budget_refuses_a_backoff_it_cannot_pay() -> None:
    h = Harness(
        ScriptedBackend(overloaded(429, retry_after_s=60.0), answer()),
        {"budget": {"max_sim_seconds_per_task": 30}},
    )
    with pytest.raises(ModelCallError):
        await h.gate.complete(REQUEST)
    [error] = h.errors()
    assert not error.retry and h.gate.retries == 0 and h.clock.now == 0.0


BREAKER = {
    "model_retry": {"max_attempts": 1},
    "model_breaker": {"enabled": True, "failure_threshold": 2, "cooldown_s": 60},
}


async def test_the_breaker_opens_refuses_and_closes_after_a_probe() -> None:
    h = Harness(ScriptedBackend(overloaded(), overloaded(), answer()), BREAKER)
    for _ in range(2):
        with pytest.raises(ModelCallError):
            await h.gate.complete(REQUEST)
    assert h.breaker() == [("closed", "open", "failure_threshold")]
    opened = next(e for e in h.events if isinstance(e, BreakerChange))
    assert opened.to_payload() == {
        "type": "breaker",
        "agent": "writer",
        "tool": "model",
        "pattern": None,
        "from": "closed",
        "to": "open",
        "at": 0.0,
        "reason": "failure_threshold",
    }
    # Open: refused without calling the backend, raised as circuit_open.
    with pytest.raises(ModelCallError) as info:
        await h.gate.complete(REQUEST)
    assert info.value.code is ErrorCode.CIRCUIT_OPEN and str(info.value) == "model circuit open"
    assert info.value.status is None and info.value.retry_after_s is None
    assert h.gate.calls == 2 and len(h.backend.requests) == 2
    # After the cooldown one probe goes through and closes the circuit.
    h.clock.now += 60
    await h.gate.complete(REQUEST)
    assert h.breaker() == [
        ("closed", "open", "failure_threshold"),
        ("open", "half_open", "cooldown_elapsed"),
        ("half_open", "closed", "probes_succeeded"),
    ]
    assert h.gate.calls == 3


async def test_the_breaker_is_asked_before_every_attempt() -> None:
    # A half-open breaker lets one probe through: the retry of a failed probe is
    # refused by the breaker itself, not by the retry policy.
    policy = {
        "model_retry": {"max_attempts": 3, "backoff": "none"},
        "model_breaker": {"enabled": True, "failure_threshold": 1, "cooldown_s": 10},
    }
    h = Harness(ScriptedBackend(overloaded()), policy)
    with pytest.raises(ModelCallError):
        await h.gate.complete(REQUEST)
    assert h.gate.calls == 3 and h.breaker() == [("closed", "open", "failure_threshold")]
    h.clock.now += 10
    with pytest.raises(ModelCallError) as info:
        await h.gate.complete(REQUEST)
    assert info.value.code is ErrorCode.CIRCUIT_OPEN
    assert h.gate.calls == 4  # the probe, then the retry was refused
    assert [(e.attempt, e.retry) for e in h.errors()][-1] == (1, True)
    assert h.breaker()[1:] == [("open", "half_open", "cooldown_elapsed")]


async def test_same_seed_same_events() -> None:
    async def run(seed: int) -> list[AgentEvent]:
        h = Harness(ScriptedBackend(*[overloaded()] * 3, answer()), seed=seed)
        await h.gate.complete(REQUEST)
        return h.events

    assert await run(3) == await run(3)
    assert await run(3) != await run(4)
