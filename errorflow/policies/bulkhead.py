"""Bulkheads: at most N calls of one tool in flight at once, the rest wait or are shed.

Theory of operation
-------------------
A `Bulkhead` is resilience4j's semaphore bulkhead without threads: a count of
permits in flight and a FIFO queue of callers waiting for one, driven by the
caller's clock (`now`, simulated seconds). It never sleeps; a wait is something the
caller spends on its own clock.

* `try_acquire(now)` takes a free permit (``allowed``, `wait_s` 0). When all
  `max_concurrent_calls` are taken it rejects at once (``reason`` "bulkhead_full")
  if `max_wait_s` is 0, otherwise it queues the caller (``reason`` "queued", a
  `ticket`, and in `wait_s` the longest it may wait: `max_wait_s`).
* `release(now)` ends a call. If someone is waiting, the permit passes straight to
  the oldest waiter whose deadline (queued at + `max_wait_s`) has not come yet, and
  `release` returns that ticket so the caller can wake it; otherwise the permit is
  returned to the pool. A permit never sits free while someone waits, so a newcomer
  can never overtake the queue.
* `poll(ticket, now)` tells a waiter where it stands: granted (``allowed``, `wait_s`
  how long it waited: from queueing to the release that granted it), still queued
  (`wait_s` the time left) or, once `now` reaches its deadline, rejected
  ("bulkhead_full", `wait_s` the full `max_wait_s` it spent). A settled ticket is
  forgotten once polled. `cancel(ticket)` withdraws a waiter that gives up early.

A caller that may wait therefore runs::

    d = bulkhead.try_acquire(now)
    if d.reason == "queued":      # wait until release() returns d.ticket, at most d.wait_s
        d = bulkhead.poll(d.ticket, now_after_waiting)
    if d.allowed:
        ...call...; bulkhead.release(now_after_call)

With ``enabled: false`` every call is allowed and nothing is counted. The bulkhead
does not check that `release` matches an `allowed` decision beyond refusing to go
below zero permits (ValueError): pairing them is the caller's job.

`BulkheadBank` holds one bulkhead per (tool, argument pattern), like `BreakerBank`;
one bank per agent gives "concurrent calls per tool per agent".
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from errorflow.policies.config import BulkheadConfig


@dataclass(frozen=True, slots=True)
class BulkheadDecision:
    #: A permit is held: make the call, then `release` it.
    allowed: bool
    #: Simulated seconds of waiting this answer stands for (see the module docstring).
    wait_s: float
    #: Permits in flight after this decision.
    in_flight: int
    #: None (allowed), "queued" or "bulkhead_full".
    reason: str | None = None
    #: The waiter's ticket while it is queued (and on the answer that settles it).
    ticket: int | None = None


@dataclass(frozen=True, slots=True)
class _Waiter:
    ticket: int
    queued_at: float
    deadline: float


class Bulkhead:
    def __init__(self, cfg: BulkheadConfig) -> None:
        self._cfg = cfg
        self._in_flight = 0
        self._queue: deque[_Waiter] = deque()
        self._granted: dict[int, float] = {}  # ticket -> seconds it waited
        self._expired: set[int] = set()
        self._next_ticket = 0

    @property
    def config(self) -> BulkheadConfig:
        return self._cfg

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def try_acquire(self, now: float) -> BulkheadDecision:
        """A permit now, a place in the queue, or a rejection."""
        if not self._cfg.enabled:
            return BulkheadDecision(True, 0.0, 0)
        self._expire(now)
        if self._in_flight < self._cfg.max_concurrent_calls:
            self._in_flight += 1
            return BulkheadDecision(True, 0.0, self._in_flight)
        if self._cfg.max_wait_s <= 0.0:
            return BulkheadDecision(False, 0.0, self._in_flight, "bulkhead_full")
        ticket = self._next_ticket
        self._next_ticket += 1
        self._queue.append(_Waiter(ticket, now, now + self._cfg.max_wait_s))
        return BulkheadDecision(False, self._cfg.max_wait_s, self._in_flight, "queued", ticket)

    def release(self, now: float) -> int | None:
        """End one call; the ticket of the waiter that inherits its permit, if any."""
        if not self._cfg.enabled:
            return None
        if self._in_flight <= 0:
            raise ValueError("release() without a permit in flight")
        self._expire(now)
        if self._queue:
            waiter = self._queue.popleft()
            self._granted[waiter.ticket] = self._within_wait(now - waiter.queued_at)
            return waiter.ticket
        self._in_flight -= 1
        return None

    def _within_wait(self, seconds: float) -> float:
        """A time waited or left, in [0, `max_wait_s`]: a difference of floats can pass
        the bound by a rounding (queued at 31.974112581947335 with 1 s to wait, polled
        then: its deadline less now is 1.0000000000000036)."""
        return min(max(0.0, seconds), self._cfg.max_wait_s)

    def poll(self, ticket: int, now: float) -> BulkheadDecision:
        """Where waiter `ticket` stands at `now` (KeyError for an unknown ticket)."""
        if ticket in self._granted:
            return BulkheadDecision(True, self._granted.pop(ticket), self._in_flight, None, ticket)
        self._expire(now)
        if ticket in self._expired:
            self._expired.discard(ticket)
            return BulkheadDecision(
                False, self._cfg.max_wait_s, self._in_flight, "bulkhead_full", ticket
            )
        for waiter in self._queue:
            if waiter.ticket == ticket:
                return BulkheadDecision(
                    False, self._within_wait(waiter.deadline - now), self._in_flight, "queued",
                    ticket,
                )  # fmt: skip
        raise KeyError(f"unknown bulkhead ticket {ticket}")

    def cancel(self, ticket: int) -> bool:
        """Withdraw a waiter: True if it was still queued (or had expired), False if it
        had already been granted a permit, which it now holds and must release."""
        if ticket in self._granted:
            del self._granted[ticket]
            return False
        if ticket in self._expired:
            self._expired.discard(ticket)
            return True
        for waiter in self._queue:
            if waiter.ticket == ticket:
                self._queue.remove(waiter)
                return True
        raise KeyError(f"unknown bulkhead ticket {ticket}")

    def _expire(self, now: float) -> None:
        # Deadlines are checked against every waiter, not just the oldest: callers on
        # different clocks may queue out of time order.
        for waiter in [w for w in self._queue if now >= w.deadline]:
            self._queue.remove(waiter)
            self._expired.add(waiter.ticket)


BulkheadKey = tuple[str, str | None]


class BulkheadBank:
    """Bulkheads keyed by (tool, argument pattern), created on demand."""

    def __init__(self, cfg: BulkheadConfig) -> None:
        self._cfg = cfg
        self._bulkheads: dict[BulkheadKey, Bulkhead] = {}

    @property
    def config(self) -> BulkheadConfig:
        return self._cfg

    def key(self, tool: str, arg_pattern: str | None = None) -> BulkheadKey:
        return (tool, arg_pattern if self._cfg.per_argument else None)

    def get(self, tool: str, arg_pattern: str | None = None) -> Bulkhead:
        key = self.key(tool, arg_pattern)
        bulkhead = self._bulkheads.get(key)
        if bulkhead is None:
            bulkhead = self._bulkheads[key] = Bulkhead(self._cfg)
        return bulkhead

    def try_acquire(
        self, tool: str, now: float, arg_pattern: str | None = None
    ) -> BulkheadDecision:
        return self.get(tool, arg_pattern).try_acquire(now)

    def release(self, tool: str, now: float, arg_pattern: str | None = None) -> int | None:
        return self.get(tool, arg_pattern).release(now)
