"""Sliding windows of call outcomes: what a rate-based circuit breaker judges.

Theory of operation
-------------------
A window keeps the recent outcomes of one breaker's calls, each as (the time it
was recorded, failed?, slow?), and answers how many calls, failures and slow calls
it holds. Two kinds, as in resilience4j:

* ``count``: the last `size` calls. Recording one more evicts the oldest.
* ``time``: the calls recorded in the last `size` seconds. A call recorded at `t`
  is in the window at `now` while ``now - t < size``; it drops out at exactly
  ``t + size``. resilience4j aggregates into one-second buckets (and Polly into ten
  slices of the sampling duration); this keeps every call, so a boundary is exact
  instead of rounded to a bucket, at the cost of memory proportional to the calls
  in the window.

`exceeded` applies the thresholds: nothing is judged below `minimum_calls` calls
(resilience4j caps that at the window's size for a count window, so a full window
can always be judged); otherwise a failure rate *at or above* `failure_rate` (the
rate is computed as ``failures / calls``, never as a product, so 3 of 10 against
0.3 is exactly at the threshold) gives ``"failure_rate"``, else a slow-call rate at
or above `slow_call_rate` gives ``"slow_call_rate"``, else None. A slow call counts
towards the slow-call rate whether it failed or not.

Calls are expected in time order (one breaker, one clock). Expiry is relative to the
`now` each query gives and runs from the oldest recorded call, so calls recorded out
of order (concurrent trials on their own clocks) leave in the order they came.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

WindowKind = Literal["count", "time"]


@dataclass(frozen=True, slots=True)
class WindowCounts:
    calls: int
    failures: int
    slow: int

    @property
    def failure_rate(self) -> float:
        return self.failures / self.calls if self.calls else 0.0

    @property
    def slow_call_rate(self) -> float:
        return self.slow / self.calls if self.calls else 0.0


class SlidingWindow:
    def __init__(self, kind: WindowKind, size: float) -> None:
        if size <= 0:
            raise ValueError(f"window size must be > 0, got {size}")
        if kind == "count" and size != int(size):
            raise ValueError(f"a count window holds a whole number of calls, got {size}")
        self.kind, self.size = kind, size
        self._calls: deque[tuple[float, bool, bool]] = deque(
            maxlen=int(size) if kind == "count" else None
        )
        self._failures = 0
        self._slow = 0

    def record(self, now: float, *, failed: bool, slow: bool) -> WindowCounts:
        """Add one outcome and return the counts as of `now`."""
        if self.kind == "count" and len(self._calls) == self._calls.maxlen:
            self._forget(self._calls[0])  # the deque drops it on append
        self._calls.append((now, failed, slow))
        self._failures += failed
        self._slow += slow
        return self.counts(now)

    def counts(self, now: float) -> WindowCounts:
        """The calls, failures and slow calls in the window at `now`."""
        if self.kind == "time":
            while self._calls and now - self._calls[0][0] >= self.size:
                self._forget(self._calls.popleft())
        return WindowCounts(len(self._calls), self._failures, self._slow)

    def clear(self) -> None:
        self._calls.clear()
        self._failures = self._slow = 0

    def _forget(self, call: tuple[float, bool, bool]) -> None:
        _, failed, slow = call
        self._failures -= failed
        self._slow -= slow


def exceeded(
    counts: WindowCounts,
    *,
    minimum_calls: int,
    failure_rate: float,
    slow_call_rate: float | None,
) -> str | None:
    """Which threshold `counts` reaches ("failure_rate", "slow_call_rate") or None.

    `slow_call_rate` None: slow calls are not judged (no duration threshold is set).
    """
    if counts.calls == 0 or counts.calls < minimum_calls:
        return None
    if counts.failure_rate >= failure_rate:
        return "failure_rate"
    if slow_call_rate is not None and counts.slow_call_rate >= slow_call_rate:
        return "slow_call_rate"
    return None
