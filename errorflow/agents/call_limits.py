"""Client-side limits of one agent's calls: the rate limiter and the bulkhead.

Asked before every attempt a tool call makes (after the breaker let the call through):
the limiter may make the attempt wait for a permit (simulated time) or refuse it when
none comes within its timeout; the bulkhead refuses it while the tool has too many
calls in flight (or makes it wait up to `max_wait_s` for one to end). A refused
attempt never reaches the tool: it is a `rate_limit` failure the retry policy may
retry after the hint, and a `call_refused` event.

Calls are in flight over simulated time: a call that ended (in run time) before this
one starts has released its permit, which is what lets a bulkhead with `scope: run`
see calls of earlier trials that overlap this one. The decisions themselves are the
pure policies' (errorflow.policies.rate_limiter, errorflow.policies.bulkhead).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from errorflow.agents.attempts import spend
from errorflow.core.simclock import SimClock
from errorflow.core.taxonomy import ErrorCode
from errorflow.policies.budget import Budget
from errorflow.policies.bulkhead import BulkheadBank
from errorflow.policies.classify import Failure
from errorflow.policies.config import PolicyConfig
from errorflow.policies.rate_limiter import RateLimiterBank
from errorflow.protocol.events import CallRefused, Emit


@dataclass
class CallLimits:
    policy: PolicyConfig
    limiters: RateLimiterBank
    bulkheads: BulkheadBank
    #: End times (run time) of the calls holding a bulkhead permit, per tool.
    _ends: dict[str, list[float]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Whether either limit is on (off, the default, costs an attempt nothing)."""
        return self.policy.limiter.enabled or self.policy.bulkhead.enabled

    @classmethod
    def of(cls, policy: PolicyConfig) -> CallLimits:
        return cls(policy, RateLimiterBank(policy.limiter), BulkheadBank(policy.bulkhead))

    async def enter(
        self, tool: str, *, clock: SimClock, budget: Budget, agent: str, emit: Emit
    ) -> Failure | None:
        """None: the attempt may go out now (after any wait); else why it may not."""
        if self.policy.limiter.enabled:
            decision = self.limiters.acquire(tool, clock.now)
            await spend(clock, budget, decision.wait_s)
            if not decision.allowed:
                emit(CallRefused(agent=agent, tool=tool, by="limiter",
                                 waited_s=decision.wait_s, at=clock.now))  # fmt: skip
                hint = self.limiters.get(tool).next_permit_in(clock.now)
                return Failure(
                    ErrorCode.RATE_LIMIT,
                    tool,
                    f"client rate limiter: no permit for {tool} within "
                    f"{self.policy.limiter.timeout_s:g}s",
                    retry_after_s=hint,
                )
        if self.policy.bulkhead.enabled:
            return await self._bulkhead(tool, clock=clock, budget=budget, agent=agent, emit=emit)
        return None

    async def _bulkhead(
        self, tool: str, *, clock: SimClock, budget: Budget, agent: str, emit: Emit
    ) -> Failure | None:
        ends = self._ends.setdefault(tool, [])
        self._release_until(tool, clock.now)
        decision = self.bulkheads.try_acquire(tool, clock.now)
        if decision.allowed:
            return None
        wait = min(ends) - clock.now if ends else 0.0
        if decision.reason == "queued" and ends and wait <= self.policy.bulkhead.max_wait_s:
            bulkhead = self.bulkheads.get(tool)
            assert decision.ticket is not None
            await spend(clock, budget, wait)  # the earliest call in flight ends
            self._release_until(tool, clock.now)
            if bulkhead.poll(decision.ticket, clock.now).allowed:
                return None
        if decision.ticket is not None:
            self.bulkheads.get(tool).cancel(decision.ticket)
        emit(CallRefused(agent=agent, tool=tool, by="bulkhead", waited_s=max(0.0, wait),
                         at=clock.now))  # fmt: skip
        return Failure(
            ErrorCode.RATE_LIMIT,
            tool,
            f"bulkhead full: {self.policy.bulkhead.max_concurrent_calls} call(s) of {tool} "
            "in flight",
            retry_after_s=round(max(0.0, wait), 6) if ends else None,
        )

    def leave(self, tool: str, ended_at: float) -> None:
        """The attempt that `enter` let through is over at run time `ended_at`."""
        if self.policy.bulkhead.enabled:
            heapq.heappush(self._ends.setdefault(tool, []), ended_at)

    def _release_until(self, tool: str, now: float) -> None:
        ends = self._ends.setdefault(tool, [])
        while ends and ends[0] <= now:
            heapq.heappop(ends)
            self.bulkheads.release(tool, now)
