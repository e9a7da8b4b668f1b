"""The shared attempt loop with fake steps: the order of refusal, attempt, retry decision,
report, backoff and the one breaker record per logical call; no real sleeping."""

from __future__ import annotations

import random
import time

import pytest

from errorflow.agents.attempts import (
    Answered,
    AttemptLoop,
    CallOutcome,
    Failed,
    ObservedBreaker,
    RetryTerms,
    spend,
)
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import ErrorCode
from errorflow.policies.breaker import BreakerBank, BreakerState
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure
from errorflow.policies.config import BreakerConfig, BudgetConfig, RetryConfig
from errorflow.policies.retry import RetryDecision
from errorflow.protocol.events import AgentEvent, BreakerChange

TRANSIENT = Failure(ErrorCode.TRANSIENT, "t", "HTTP 503", 503)
FORBIDDEN = Failure(ErrorCode.PERMISSION_DENIED, "t", "HTTP 403", 403)


class FakeSteps:
    """Plays a script of attempt results and logs every step the loop asks for."""

    def __init__(
        self,
        *results: str | Failure,
        refuse_after: int | None = None,
        cause: Exception | None = None,
    ) -> None:
        self.results = list(results)
        self.refuse_after = refuse_after
        self.cause = cause
        self.log: list[str] = []
        self.decisions: list[RetryDecision] = []

    def refusal(self, attempts_made: int) -> Failed | None:
        self.log.append(f"refusal?{attempts_made}")
        if self.refuse_after is not None and attempts_made >= self.refuse_after:
            return Failed(Failure(ErrorCode.BUDGET_EXHAUSTED, "t", "budget exhausted"))
        return None

    async def attempt(self, number: int) -> Answered[str] | Failed:
        self.log.append(f"attempt{number}")
        result = self.results.pop(0)
        if isinstance(result, Failure):
            return Failed(result, self.cause)
        return Answered(result)

    def report(self, failure: Failure, number: int, decision: RetryDecision) -> None:
        self.log.append(f"report{number}:{failure.code.value}:{decision.reason}")
        self.decisions.append(decision)


class Rig:
    def __init__(
        self,
        retry: RetryConfig | None = None,
        *,
        breaker: BreakerConfig | None = None,
        budget: BudgetConfig | None = None,
        seed: int = 7,
    ) -> None:
        self.clock = SimClock(0.0)
        self.budget = Budget(budget or BudgetConfig())
        self.rng = random.Random(seed)
        self.events: list[AgentEvent] = []
        self.bank = BreakerBank(breaker or BreakerConfig(failure_threshold=1))
        self.breaker = ObservedBreaker(
            self.bank, "t", None, clock=self.clock, agent="a", emit=self.events.append
        )
        self.loop = AttemptLoop(clock=self.clock, rng=self.rng, budget=self.budget)
        self.terms = RetryTerms(retry or RetryConfig(max_attempts=3))

    async def run(self, steps: FakeSteps, terms: RetryTerms | None = None) -> CallOutcome[str]:
        return await self.loop.run(steps, terms=terms or self.terms, breaker=self.breaker)

    def state(self) -> BreakerState:
        return self.bank.get("t").state


async def test_an_answer_at_once_records_one_success() -> None:
    rig = Rig()
    steps = FakeSteps("v")
    outcome = await rig.run(steps)
    assert outcome == CallOutcome(Answered("v"), 1)
    assert steps.log == ["refusal?0", "attempt1"]
    assert rig.loop.retries == 0 and rig.clock.now == 0.0 and rig.events == []


async def test_failures_are_retried_after_a_backoff_in_order() -> None:
    rig = Rig()
    steps = FakeSteps(TRANSIENT, TRANSIENT, "v")
    started = time.monotonic()
    outcome = await rig.run(steps)
    assert time.monotonic() - started < 0.5  # simulated time only
    assert outcome == CallOutcome(Answered("v"), 3)
    assert steps.log == [
        "refusal?0",
        "attempt1",
        "report1:transient:retryable",
        "refusal?1",
        "attempt2",
        "report2:transient:retryable",
        "refusal?2",
        "attempt3",
    ]
    delays = [d.delay_s for d in steps.decisions]
    assert rig.loop.retries == 2
    assert rig.clock.now == pytest.approx(sum(delays)) == rig.budget.sim_seconds
    # The delays are the policy's: full jitter drawn from the loop's rng, in order.
    expected = random.Random(7)
    assert delays == [expected.uniform(0.0, 0.5), expected.uniform(0.0, 1.0)]


async def test_exhausted_retries_record_one_breaker_failure_and_count_attempts() -> None:
    rig = Rig(breaker=BreakerConfig(failure_threshold=2))
    steps = FakeSteps(TRANSIENT, TRANSIENT, TRANSIENT)
    outcome = await rig.run(steps)
    assert isinstance(outcome.result, Failed) and outcome.attempts == 3
    assert outcome.result.failure.attempts == 3 and TRANSIENT.attempts == 1  # a new Failure
    assert outcome.result.failure.code is ErrorCode.TRANSIENT
    assert steps.log[-1] == "report3:transient:attempts_exhausted"
    assert rig.loop.retries == 2
    # Three failed attempts are one failed call: threshold 2 is not reached yet.
    assert rig.state() is BreakerState.CLOSED and rig.events == []
    await rig.run(FakeSteps(FORBIDDEN))
    assert rig.state() is BreakerState.OPEN


async def test_a_class_not_retried_ends_at_once() -> None:
    rig = Rig()
    steps = FakeSteps(FORBIDDEN, "never")
    outcome = await rig.run(steps)
    assert isinstance(outcome.result, Failed) and outcome.attempts == 1
    assert steps.log == ["refusal?0", "attempt1", "report1:permission_denied:not_retryable"]
    assert rig.loop.retries == 0 and rig.clock.now == 0.0


async def test_a_refusal_ends_the_call_without_a_breaker_record() -> None:
    rig = Rig()
    steps = FakeSteps("never", refuse_after=0)
    outcome = await rig.run(steps)
    assert isinstance(outcome.result, Failed) and outcome.attempts == 0
    assert outcome.result.failure.code is ErrorCode.BUDGET_EXHAUSTED
    assert outcome.result.failure.attempts == 0
    assert steps.log == ["refusal?0"] and rig.events == []
    # Refused after a failed attempt: the attempts made are counted, nothing recorded.
    later = FakeSteps(TRANSIENT, "never", refuse_after=1)
    outcome = await rig.run(later)
    assert isinstance(outcome.result, Failed) and outcome.attempts == 1
    assert outcome.result.failure.code is ErrorCode.BUDGET_EXHAUSTED
    assert later.log == ["refusal?0", "attempt1", "report1:transient:retryable", "refusal?1"]
    assert rig.state() is BreakerState.CLOSED and rig.loop.retries == 1


async def test_the_cause_travels_with_the_failure() -> None:
    rig = Rig(RetryConfig(max_attempts=1))
    err = RuntimeError("boom")
    outcome = await rig.run(FakeSteps(TRANSIENT, cause=err))
    assert isinstance(outcome.result, Failed) and outcome.result.cause is err


async def test_non_idempotent_calls_need_a_key_to_be_retried() -> None:
    rig = Rig()
    unkeyed = FakeSteps(TRANSIENT, "v")
    await rig.run(unkeyed, RetryTerms(RetryConfig(), idempotent=False))
    assert unkeyed.decisions[0].reason == "non_idempotent"
    keyed = FakeSteps(TRANSIENT, "v")
    outcome = await rig.run(
        keyed, RetryTerms(RetryConfig(), idempotent=False, has_idempotency_key=True)
    )
    assert outcome.result == Answered("v")


async def test_retry_after_is_waited_exactly_and_draws_nothing() -> None:
    rig = Rig()
    limited = Failure(ErrorCode.RATE_LIMIT, "t", "429", 429, retry_after_s=12.0)
    state = rig.rng.getstate()
    await rig.run(FakeSteps(limited, "v"))
    assert rig.clock.now == 12.0 and rig.rng.getstate() == state


async def test_a_backoff_the_budget_cannot_pay_is_not_taken() -> None:
    rig = Rig(budget=BudgetConfig(max_sim_seconds_per_task=5))
    limited = Failure(ErrorCode.RATE_LIMIT, "t", "429", 429, retry_after_s=12.0)
    steps = FakeSteps(limited, "never")
    outcome = await rig.run(steps)
    assert isinstance(outcome.result, Failed)
    assert steps.decisions[0].reason == "budget_exhausted" and rig.clock.now == 0.0


async def test_breaker_transitions_are_events_with_a_redacted_pattern() -> None:
    clock = SimClock(0.0)
    events: list[AgentEvent] = []
    bank = BreakerBank(BreakerConfig(failure_threshold=1, cooldown_s=5, per_argument=True))
    pattern = '{"path": "/home/alice/secret.txt"}'
    breaker = ObservedBreaker(bank, "t", pattern, clock=clock, agent="a", emit=events.append)
    breaker.record_failure()
    assert not breaker.allow().allowed
    clock.now = 5.0
    assert breaker.allow().allowed
    breaker.record_success()
    assert all(isinstance(e, BreakerChange) for e in events)
    changes = [e for e in events if isinstance(e, BreakerChange)]
    assert [(e.frm, e.to, e.at) for e in changes] == [
        ("closed", "open", 0.0),
        ("open", "half_open", 5.0),
        ("half_open", "closed", 5.0),
    ]
    assert {e.pattern for e in changes} == {'{"path": "[PATH]"}'}
    assert all(e.agent == "a" and e.tool == "t" for e in changes)
    # The bank keys the breaker by the raw pattern: the redaction is for the event only.
    assert bank.get("t", pattern).state is BreakerState.CLOSED


async def test_spend_charges_the_budget_and_advances_the_clock() -> None:
    clock, budget = SimClock(0.0), Budget(BudgetConfig())
    await spend(clock, budget, 2.5)
    await spend(clock, budget, 0.0)
    assert clock.now == 2.5 and budget.sim_seconds == 2.5
