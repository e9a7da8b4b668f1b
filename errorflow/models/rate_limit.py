"""One rate limiter per model server and model, shared by every trial of a run.

A real server's rate limit is infrastructure, not part of the experiment: a run that
meets one must slow down, not score it. So every request to a real model first takes a
slot here. The limiter holds three limits, each optional: requests in flight at once,
requests a minute and tokens a minute (token buckets, refilled continuously, full at
the start). What the server says feeds it:

- a 429 sets a pause for everyone until its `retry-after` (or, without one, a backoff
  that doubles with each 429 in a row: 1, 2, 4 ... 32 s);
- the `anthropic-ratelimit-*-remaining` / `-reset` headers of any reply pause everyone
  until the reset when a budget the server counts is spent (requests, tokens, input or
  output tokens), and the requests header teaches a requests-a-minute limit the run was
  not given.

Waiting happens on a clock passed in (tests use a fake one), so nothing here sleeps
for real in a test. Pure asyncio: no loop is bound at construction, so a limiter made
outside a loop, or outliving one, still works.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

#: The longest pause one reply's headers or one 429 may impose (a server that says
#: "reset in an hour" is waited for a minute at a time, and asked again).
MAX_PAUSE_S = 60.0
#: The backoff of a 429 without `retry-after`: 1 s, doubled for each 429 in a row.
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 32.0

#: The budgets the server reports, by their header names' middle part.
_HEADER_BUDGETS = ("requests", "tokens", "input-tokens", "output-tokens")


@dataclass(frozen=True)
class RateLimits:
    """What a run may send to one model server (None: no limit of that kind)."""

    concurrency: int | None = None
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    def __post_init__(self) -> None:
        for name in ("concurrency", "requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")


@dataclass
class LimiterStats:
    requests: int = 0  # slots handed out (requests sent)
    rate_limited: int = 0  # 429s reported
    paced_s: float = 0.0  # time requests waited for the rate (not for a free slot)
    peak_in_flight: int = 0
    server_slots: int | None = None  # requests at once, as the server said (none given)


class _Bucket:
    """`per_minute` units a minute, refilled continuously; full at the start."""

    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = per_minute
        self.level = per_minute
        self.rate = per_minute / 60.0
        self.at = now

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait(self, now: float, amount: float) -> float:
        """Seconds until `amount` is there (a request larger than a minute's capacity
        waits for a full bucket, not forever)."""
        self._refill(now)
        need = min(amount, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def take(self, now: float, amount: float) -> None:
        """Below zero is a debt later requests wait for; at most a minute's worth (a
        request larger than the limit must not stop everything for longer)."""
        self._refill(now)
        self.level = max(self.level - amount, -self.capacity)


def reset_delay(value: str, wall_now: float) -> float | None:
    """Seconds until an RFC 3339 reset time (`2026-11-07T12:00:30Z`), or None."""
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp() - wall_now


class RateLimiter:
    def __init__(
        self,
        limits: RateLimits | None = None,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        wall: Clock = time.time,
    ) -> None:
        self.limits = limits or RateLimits()
        self.clock, self.sleep, self.wall = clock, sleep, wall
        now = clock()
        rpm, tpm = self.limits.requests_per_minute, self.limits.tokens_per_minute
        self._requests = _Bucket(rpm, now) if rpm else None
        self._tokens = _Bucket(tpm, now) if tpm else None
        self._not_before = now
        self._in_a_row = 0  # 429s since the last reply that was not one
        self.in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.stats = LimiterStats()

    # -- slots ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def slot(self, tokens: int) -> AsyncIterator[None]:
        """Hold one request's slot: a free place in flight, then the rate's go-ahead."""
        await self._enter()
        try:
            await self._pace(tokens)
            yield
        finally:
            self._leave()

    async def _enter(self) -> None:
        cap = self.limits.concurrency or self.stats.server_slots
        while cap is not None and self.in_flight >= cap:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, then cancelled: hand the free place on
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
        self.in_flight += 1
        self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.in_flight)

    def _leave(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _pace(self, tokens: int) -> None:
        while True:
            now = self.clock()
            wait = self._not_before - now
            if self._requests is not None:
                wait = max(wait, self._requests.wait(now, 1))
            if self._tokens is not None:
                wait = max(wait, self._tokens.wait(now, tokens))
            if wait <= 0:
                break
            self.stats.paced_s += wait
            await self.sleep(wait)
        if self._requests is not None:
            self._requests.take(now, 1)
        if self._tokens is not None:
            self._tokens.take(now, tokens)
        self.stats.requests += 1

    # -- what the server said ------------------------------------------------------

    def settle(self, estimated: int, used: int) -> None:
        """A reply came: charge the tokens it really used instead of the estimate."""
        self._in_a_row = 0
        if self._tokens is not None:
            self._tokens.take(self.clock(), used - estimated)

    def refund(self, estimated: int) -> None:
        """A request the server refused (429): it used nothing."""
        if self._tokens is not None:
            self._tokens.take(self.clock(), -estimated)

    def learn_slots(self, slots: int) -> None:
        """The server answers `slots` requests at once (llama.cpp's says so): without a
        concurrency given, no more are sent at once, so none waits in its queue while
        its timeout runs."""
        if self.limits.concurrency is None and slots > 0:
            self.stats.server_slots = slots

    def unsent(self, estimated: int) -> None:
        """A request that took its slot but was not sent (errorflow/models/busy_server.py
        held it past its timeout): it used nothing, and is not counted."""
        self.refund(estimated)
        if self._requests is not None:
            self._requests.take(self.clock(), -1)
        self.stats.requests -= 1

    def rate_limited(self, retry_after_s: float | None) -> float:
        """A 429: everyone pauses until its retry-after (or the backoff). Returns the
        pause. A retry-after of 0 (or a date past) is taken once; from a server that
        refuses again, the backoff: "now", refused again, is not to be asked at once."""
        self.stats.rate_limited += 1
        said = retry_after_s
        if said is not None and math.isfinite(said) and (said > 0 or not self._in_a_row):
            pause = said
        else:
            pause = min(BACKOFF_MAX_S, BACKOFF_START_S * 2.0**self._in_a_row)
        self._in_a_row += 1
        pause = min(max(pause, 0.0), MAX_PAUSE_S)
        self._pause_for(pause)
        return pause

    def observe(self, headers: Mapping[str, str]) -> None:
        """A reply's `anthropic-ratelimit-*` headers: pause until a spent budget's reset,
        learn a requests-a-minute limit, and follow the server's count of requests left."""
        wall = self.wall()
        for budget in _HEADER_BUDGETS:
            remaining = _number(headers.get(f"anthropic-ratelimit-{budget}-remaining"))
            reset = headers.get(f"anthropic-ratelimit-{budget}-reset")
            if remaining is not None and remaining <= 0 and reset is not None:
                delay = reset_delay(reset, wall)
                if delay is not None:
                    self._pause_for(min(max(delay, 0.0), MAX_PAUSE_S))
        self._learn_requests(headers)

    def _learn_requests(self, headers: Mapping[str, str]) -> None:
        limit = _number(headers.get("anthropic-ratelimit-requests-limit"))
        remaining = _number(headers.get("anthropic-ratelimit-requests-remaining"))
        now = self.clock()
        if self._requests is None and limit is not None and limit > 0:
            self._requests = _Bucket(limit, now)
        if self._requests is not None and remaining is not None:
            self._requests._refill(now)
            self._requests.level = min(self._requests.level, remaining)

    def _pause_for(self, seconds: float) -> None:
        self._not_before = max(self._not_before, self.clock() + seconds)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
