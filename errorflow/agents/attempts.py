"""The attempts of one logical call, shared by the tool gate and the model gate.

Theory of operation
-------------------
A logical call (one tool call after pre-flight, one model completion) is tried until an
attempt answers or the retry policy says stop. `AttemptLoop.run` owns the order, the
same for both gates::

    refusal? ─▶ attempt ─▶ answered: breaker success, done
                   │
                   ▼ failed
            retry decision ─▶ report ─▶ no retry: breaker failure, done
                                  │
                                  ▼ retry
                     backoff (budget + simulated clock) ─▶ refusal? ...

What differs between the gates is plugged in through `AttemptSteps`:

- `refusal` runs before every attempt and may end the call without running it (and
  without a breaker record: nothing was learned about the backend). The tool gate
  refuses on a spent budget (its breaker is asked once, before pre-flight); the model
  gate asks its breaker before every attempt.
- `attempt` runs one attempt and classifies what came back. A soft failure of a tool
  (empty, partial) is an answer: it counts as a success for the breaker.
- `report` publishes the events of a failed attempt once the retry decision is known:
  the tool gate sends `retry` (and `retries_exhausted` when retries ran out), the model
  gate one `model_error` per failed attempt.

The breaker is told ONE outcome per logical call, after its retries (the breaker's
counting contract). `ObservedBreaker` publishes every transition as a `breaker` event.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from errorflow.core.redact import redact
from errorflow.core.simclock import SimClock
from errorflow.policies.breaker import BreakerBank, BreakerDecision, Transition
from errorflow.policies.budget import Budget
from errorflow.policies.classify import Failure
from errorflow.policies.config import RetryConfig
from errorflow.policies.retry import Jitter, RetryDecision, decide_retry
from errorflow.protocol.events import BreakerChange, Emit

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Answered(Generic[T]):
    """An attempt that answered (for a tool, possibly with a soft failure)."""

    value: T


@dataclass(frozen=True, slots=True)
class Failed:
    """An attempt that failed, or a call refused before its attempt."""

    failure: Failure
    #: The exception to raise to the caller, for a gate that raises (the model gate).
    cause: Exception | None = None


@dataclass(frozen=True, slots=True)
class CallOutcome(Generic[T]):
    """How a logical call ended; a `Failed` result carries the attempt count."""

    result: Answered[T] | Failed
    attempts: int


@dataclass(frozen=True, slots=True)
class RetryTerms:
    """What the retry policy needs to know about the call besides its failure."""

    config: RetryConfig
    idempotent: bool = True
    has_idempotency_key: bool = False


class AttemptSteps(Protocol[T]):
    """What one gate does differently; see the module docstring."""

    def refusal(self, attempts_made: int) -> Failed | None: ...

    async def attempt(self, number: int) -> Answered[T] | Failed: ...

    def report(self, failure: Failure, number: int, decision: RetryDecision) -> None: ...


async def spend(clock: SimClock, budget: Budget, seconds: float) -> None:
    """Wait `seconds` of simulated time, charged to the budget."""
    budget.charge_time(seconds)
    await clock.sleep(seconds)


class ObservedBreaker:
    """The breaker of one (tool, argument pattern), its transitions published as events."""

    def __init__(
        self,
        bank: BreakerBank,
        tool: str,
        pattern: str | None,
        *,
        clock: SimClock,
        agent: str,
        emit: Emit,
    ) -> None:
        self.bank, self.tool, self.pattern = bank, tool, pattern
        self.clock, self.agent, self.emit = clock, agent, emit

    def allow(self) -> BreakerDecision:
        decision = self.bank.allow(self.tool, self.clock.now, self.pattern)
        self._publish(decision.transitions)
        return decision

    def record_success(self) -> None:
        self._publish(self.bank.record_success(self.tool, self.clock.now, self.pattern))

    def record_failure(self) -> None:
        self._publish(self.bank.record_failure(self.tool, self.clock.now, self.pattern))

    def release(self) -> None:
        """The admitted call never went out (refused before it reached the service): a
        half-open probe slot is free again, so the breaker cannot wait on it for ever."""
        self.bank.release_permission(self.tool, self.pattern)

    def _publish(self, transitions: tuple[Transition, ...] | list[Transition]) -> None:
        # The pattern is built from the call's arguments: redacted before it is published.
        pattern = redact(self.pattern) if self.pattern is not None else None
        for t in transitions:
            self.emit(
                BreakerChange(
                    agent=self.agent,
                    tool=self.tool,
                    pattern=pattern,
                    frm=t.frm.value,
                    to=t.to.value,
                    at=t.at,
                    reason=t.reason,
                )
            )


class AttemptLoop:
    """The retry machinery of one gate, with its tally of retries over all its calls."""

    def __init__(self, *, clock: SimClock, rng: Jitter, budget: Budget) -> None:
        self.clock, self.rng, self.budget = clock, rng, budget
        self.retries = 0

    async def run(
        self, steps: AttemptSteps[T], *, terms: RetryTerms, breaker: ObservedBreaker
    ) -> CallOutcome[T]:
        attempts = 0
        while True:
            refused = steps.refusal(attempts)
            if refused is not None:
                return CallOutcome(_counted(refused, attempts), attempts)
            attempts += 1
            result = await steps.attempt(attempts)
            if isinstance(result, Answered):
                breaker.record_success()
                return CallOutcome(result, attempts)
            decision = decide_retry(
                terms.config,
                code=result.failure.code,
                attempt=attempts,
                retry_after_s=result.failure.retry_after_s,
                rng=self.rng,
                idempotent=terms.idempotent,
                has_idempotency_key=terms.has_idempotency_key,
                budget_left_s=self.budget.time_left_s(),
            )
            steps.report(result.failure, attempts, decision)
            if not decision.retry:
                breaker.record_failure()
                return CallOutcome(_counted(result, attempts), attempts)
            self.retries += 1
            await spend(self.clock, self.budget, decision.delay_s)


def _counted(failed: Failed, attempts: int) -> Failed:
    failure = dataclasses.replace(failed.failure, attempts=attempts)
    return Failed(failure, failed.cause)
