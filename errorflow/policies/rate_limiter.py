"""Client-side rate limiting: at most N calls per period, a short wait or a rejection.

Theory of operation
-------------------
A `RateLimiter` is resilience4j's AtomicRateLimiter on the caller's clock (`now`,
simulated seconds). Time is cut into cycles of `refresh_period_s` from 0; each
cycle starts with `limit_for_period` permits and unused permits do not carry over
(the count is capped at the limit when a new cycle starts).

`acquire(now, permits)` answers ``(allowed, wait_s)``:

* permits left in the current cycle: ``(True, 0.0)``;
* otherwise the wait until enough permits are in (the rest of this cycle, plus as
  many whole cycles as the permits reserved ahead need). If that wait is at most
  `timeout_s`, the permits are *reserved* now and the answer is ``(True, wait)``:
  the caller sleeps `wait` on its clock and then calls, without asking again. So a
  burst queues up in order, each caller further into the future, and the reserved
  count can go below zero;
* if the wait exceeds `timeout_s`, nothing is reserved and the answer is
  ``(False, timeout_s)``: like resilience4j's blocking acquire, the caller spends
  the whole timeout before it learns that it failed (0 when the timeout is 0).
  `next_permit_in(now)` tells how long it would have had to wait (a retry hint).

Float care: a cycle is ``floor(now / period + 1e-9)``, so an instant a rounding
error short of a boundary (``0.3 / 0.1 = 2.9999999999999996``) counts as the new
cycle, and a caller that comes back exactly `wait_s` later finds its cycle begun.
A `now` earlier than one already seen (callers on different clocks) is treated as
still inside the latest cycle seen: permits never come back by going back in time.

With ``enabled: false`` every call is allowed at once. `RateLimiterBank` holds one
limiter per (tool, argument pattern), like `BreakerBank`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from errorflow.policies.config import LimiterConfig

_EPS = 1e-9


class LimiterDecision(NamedTuple):
    allowed: bool
    #: Allowed: seconds to wait before the call (its permit is reserved). Refused:
    #: the seconds the caller spent waiting before it gave up (`timeout_s`).
    wait_s: float


class RateLimiter:
    def __init__(self, cfg: LimiterConfig) -> None:
        self._cfg = cfg
        self._cycle = 0
        self._permits = cfg.limit_for_period  # may go negative: reserved ahead

    @property
    def config(self) -> LimiterConfig:
        return self._cfg

    def acquire(self, now: float, permits: int = 1) -> LimiterDecision:
        """Take (or reserve) `permits` at `now`, or refuse after the timeout."""
        if not self._cfg.enabled:
            return LimiterDecision(True, 0.0)
        _check_permits(permits)
        self._cycle, self._permits = self._refreshed(now)
        wait = self._wait(now, permits)
        if wait > self._cfg.timeout_s:
            return LimiterDecision(False, self._cfg.timeout_s)
        self._permits -= permits
        return LimiterDecision(True, wait)

    def available(self, now: float) -> int:
        """Permits left at `now` (negative: that many are reserved in later cycles)."""
        return self._refreshed(now)[1]

    def next_permit_in(self, now: float, permits: int = 1) -> float:
        """Seconds from `now` until `permits` could be had, reserving nothing."""
        if not self._cfg.enabled:
            return 0.0
        _check_permits(permits)
        cycle, available = self._refreshed(now)
        return _wait(self._cfg, now, cycle, available, permits)

    def _refreshed(self, now: float) -> tuple[int, int]:
        cycle = max(self._cycle, math.floor(now / self._cfg.refresh_period_s + _EPS))
        if cycle == self._cycle:
            return cycle, self._permits
        limit = self._cfg.limit_for_period
        return cycle, min(limit, self._permits + (cycle - self._cycle) * limit)

    def _wait(self, now: float, permits: int) -> float:
        return _wait(self._cfg, now, self._cycle, self._permits, permits)


def _wait(cfg: LimiterConfig, now: float, cycle: int, available: int, permits: int) -> float:
    if available >= permits:
        return 0.0
    period, limit = cfg.refresh_period_s, cfg.limit_for_period
    to_next_cycle = max(0.0, (cycle + 1) * period - now)
    short_at_next_cycle = permits - (available + limit)
    full_cycles = max(0, -(-short_at_next_cycle // limit))  # ceiling division
    return full_cycles * period + to_next_cycle


def _check_permits(permits: int) -> None:
    if permits < 1:
        raise ValueError(f"permits must be >= 1, got {permits}")


LimiterKey = tuple[str, str | None]


class RateLimiterBank:
    """Rate limiters keyed by (tool, argument pattern), created on demand."""

    def __init__(self, cfg: LimiterConfig) -> None:
        self._cfg = cfg
        self._limiters: dict[LimiterKey, RateLimiter] = {}

    @property
    def config(self) -> LimiterConfig:
        return self._cfg

    def key(self, tool: str, arg_pattern: str | None = None) -> LimiterKey:
        return (tool, arg_pattern if self._cfg.per_argument else None)

    def get(self, tool: str, arg_pattern: str | None = None) -> RateLimiter:
        key = self.key(tool, arg_pattern)
        limiter = self._limiters.get(key)
        if limiter is None:
            limiter = self._limiters[key] = RateLimiter(self._cfg)
        return limiter

    def acquire(self, tool: str, now: float, arg_pattern: str | None = None) -> LimiterDecision:
        return self.get(tool, arg_pattern).acquire(now)
