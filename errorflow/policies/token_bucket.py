"""A token bucket: a service's capacity in requests per second, with bursts.

Theory of operation
-------------------
The bucket holds up to `capacity` tokens and gains `refill_per_s` tokens per
simulated second, continuously (a fractional token is fine). A request takes `n`
tokens: `take(now, n)` answers ``(ok, retry_after_s)``:

* enough tokens at `now`: they are taken, ``(True, 0.0)``;
* not enough: nothing is taken and ``retry_after_s`` is the time until the bucket
  will hold `n` tokens if nobody else takes any, ``(n - tokens) / refill_per_s``.
  That is the honest Retry-After of a 429: it follows from the bucket's state, and
  a client that waits exactly that long finds its tokens there (ties within 1e-9
  of a token count as enough, so float rounding cannot turn the promised instant
  into another refusal). Rounding it up to whole seconds for an HTTP header is the
  caller's choice.

A refused request takes nothing: whether a rejected request still costs the server
work is the service model's business, not the bucket's.

The caller's clock drives everything; the bucket never reads time. It starts full
at time `start` (or with `tokens`). A `now` earlier than the last one seen (callers
on different clocks) refills nothing and leaves the last time as it was, so tokens
never appear by going back in time.
"""

from __future__ import annotations

from typing import NamedTuple

_EPS = 1e-9


class Take(NamedTuple):
    ok: bool
    #: Seconds until `n` tokens will be there (0.0 when ok).
    retry_after_s: float


class TokenBucket:
    def __init__(
        self,
        capacity: float,
        refill_per_s: float,
        *,
        tokens: float | None = None,
        start: float = 0.0,
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0, got {capacity}")
        if refill_per_s <= 0:
            raise ValueError(f"refill_per_s must be > 0, got {refill_per_s}")
        self.capacity, self.refill_per_s = capacity, refill_per_s
        self._tokens = capacity if tokens is None else min(capacity, max(0.0, tokens))
        self._last = start

    def take(self, now: float, n: float = 1.0) -> Take:
        """Take `n` tokens at `now`, or say how long until they will be there."""
        if not 0 < n <= self.capacity:
            raise ValueError(f"n must be in (0, capacity={self.capacity}], got {n}")
        self._refill(now)
        if self._tokens >= n - _EPS:
            self._tokens = max(0.0, self._tokens - n)
            return Take(True, 0.0)
        return Take(False, (n - self._tokens) / self.refill_per_s)

    def level(self, now: float) -> float:
        """Tokens in the bucket at `now`, taking none."""
        if now <= self._last:
            return self._tokens
        return min(self.capacity, self._tokens + (now - self._last) * self.refill_per_s)

    def utilisation(self, now: float) -> float:
        """How drained the bucket is at `now`: 0.0 full, 1.0 empty."""
        return 1.0 - self.level(now) / self.capacity

    def _refill(self, now: float) -> None:
        if now > self._last:
            self._tokens = self.level(now)
            self._last = now
