"""Circuit breakers: stop calling a backend that keeps failing, probe it later.

Theory of operation
-------------------
Each breaker is a three-state machine driven by the caller's clock (`now`,
simulated seconds); it never reads time itself::

    CLOSED ──the window's verdict──▶ OPEN
    OPEN ──allow(now) with now >= opened_at + cooldown_s──▶ HALF_OPEN
    HALF_OPEN ──the probes' verdict is "failing"──▶ OPEN (a fresh cooldown from then)
    HALF_OPEN ──the probes' verdict is "healthy"──▶ CLOSED
    HALF_OPEN ──max_half_open_s without a verdict──▶ OPEN

* CLOSED allows every call and feeds each outcome to its window (below).
* OPEN refuses every call and says how long until probing (`retry_in_s`). The
  move to HALF_OPEN happens lazily inside `allow`, the only place that is told
  the time when a call is about to be made, and `allow` returns that transition
  in `BreakerDecision.transitions` so it can be published like the others.
* HALF_OPEN lets exactly `half_open_probes` calls through (counted by `allow`),
  refuses the rest, and decides on their outcomes. Like resilience4j, an outcome
  recorded while half-open counts as a probe's, whoever was admitted.

The window (`BreakerConfig.window`) decides when CLOSED opens, and how the probes
are judged:

* ``consecutive`` (the default, and the presets'):
  `failure_threshold` failed calls in a row open (reason ``failure_threshold``);
  a success resets the count. Any failed probe reopens (``probe_failed``); all
  `half_open_probes` succeeding close (``probes_succeeded``). Durations are ignored.
* ``count`` / ``time`` (resilience4j's sliding windows, `sliding_window.py`):
  after each outcome, with at least `minimum_calls` calls in the window, a failure
  rate at or above `failure_rate` opens (``failure_rate``), else a slow-call rate
  (duration strictly above `slow_call_s`) at or above `slow_call_rate` opens
  (``slow_call_rate``). Half-open judges the probes the same way, in a count window
  of `half_open_probes` calls, once min(`minimum_calls`, `half_open_probes`) of
  them are in: a rate at or above its threshold reopens (``failure_rate`` /
  ``slow_call_rate``), otherwise it closes (``probes_succeeded``).

Every state starts from a clean slate: opening discards the window, closing starts
an empty one, half-open starts a fresh allowance of probes.

`max_half_open_s` (resilience4j's maxWaitDurationInHalfOpenState) reopens a
breaker stuck half-open, e.g. when too few calls come to finish probing. It is
noticed lazily, by the next `allow` or `record`, and the transition (reason
``half_open_timeout``) is dated when the limit ran out, not when it was noticed, so
the fresh cooldown counts from then and may already be over.

`BreakerConfig.state` pins the breaker (resilience4j's special states):
``forced_open`` refuses every call (``BreakerDecision.reason`` "forced_open",
`retry_in_s` None: no probe is coming) and ``disabled`` allows every call; neither
records anything nor ever moves. ``enabled: false`` behaves like ``disabled`` but
reports the state ``closed``, as it always did.

Results recorded while OPEN (a call admitted before the circuit opened that
finished afterwards) are stale and ignored: they neither extend the cooldown nor
close the circuit.

Counting contract: the caller records ONE outcome per *logical* call, after its
retries are done, with the call's duration (`record(now, ok, duration_s)`; the
older `record_success` / `record_failure` are the same with a duration of 0). A
call that `allow` admitted but that never went out (refused by a rate limiter or a
bulkhead further in) records nothing and calls `release_permission` instead, like
resilience4j's releasePermission, so a half-open probe slot is not lost. Three
failed attempts of one call are one failure; counting each attempt would trip the
breaker on a single unlucky call (seed 003: breaker check → retry loop → report the
outcome back to the breaker).

`BreakerBank` holds one breaker per key, created on first use. The key is the
tool name plus an argument pattern when `per_argument` is set (seed 003: only the
`search_docs(category="legacy")` path may be broken); the caller chooses what the
pattern is. How long a bank lives (`scope`: a trial or the whole run) is the
caller's business; the breakers behave the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from errorflow.policies.config import BreakerConfig
from errorflow.policies.sliding_window import SlidingWindow, WindowCounts, exceeded


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"
    #: Pinned by `BreakerConfig.state`; a breaker never moves into or out of these.
    FORCED_OPEN = "forced_open"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class Transition:
    frm: BreakerState
    to: BreakerState
    at: float
    #: "failure_threshold" | "failure_rate" | "slow_call_rate" | "cooldown_elapsed" |
    #: "probe_failed" | "probes_succeeded" | "half_open_timeout"
    reason: str


@dataclass(frozen=True, slots=True)
class BreakerDecision:
    allowed: bool
    #: The state after this decision (after any transition it caused).
    state: BreakerState
    #: Seconds until the breaker will probe again; None when allowed or unknown
    #: (half-open with all probes in flight: it depends on their outcomes; forced open).
    retry_in_s: float | None
    transitions: tuple[Transition, ...] = ()
    #: A refusal's cause, "open" | "half_open_full" | "forced_open"; "probe" for a
    #: call admitted half-open; None for an ordinary call. Left out of equality: it
    #: follows from the other fields.
    reason: str | None = field(default=None, compare=False)


class CircuitBreaker:
    def __init__(self, cfg: BreakerConfig) -> None:
        self._cfg = cfg
        self._state = BreakerState.CLOSED
        self._failures = 0  # consecutive failures while closed
        self._opened_at = 0.0
        self._half_opened_at = 0.0
        self._probes_issued = 0
        self._probes_succeeded = 0
        self._window: SlidingWindow | None = None
        self._probes: SlidingWindow | None = None
        self._minimum_calls = cfg.minimum_calls
        if cfg.window != "consecutive":
            self._window = SlidingWindow(cfg.window, cfg.window_size)
            self._probes = SlidingWindow("count", cfg.half_open_probes)
            if cfg.window == "count":  # a full window can always be judged
                self._minimum_calls = min(cfg.minimum_calls, int(cfg.window_size))

    @property
    def config(self) -> BreakerConfig:
        return self._cfg

    @property
    def state(self) -> BreakerState:
        """The state as of the last call; OPEN does not turn HALF_OPEN until `allow`."""
        return self._pinned() or self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    @property
    def opened_at(self) -> float | None:
        return self._opened_at if self._state is BreakerState.OPEN else None

    def allow(self, now: float) -> BreakerDecision:
        """Whether a call may go out at `now`; a granted half-open call is a probe."""
        pinned = self._pinned()
        if pinned is BreakerState.FORCED_OPEN:
            return BreakerDecision(False, pinned, None, reason="forced_open")
        if pinned is not None:
            return BreakerDecision(True, pinned, None)
        transitions = self._expire_half_open(now)
        if self._state is BreakerState.OPEN:
            reopen_at = self._opened_at + self._cfg.cooldown_s
            if now < reopen_at:
                return BreakerDecision(
                    False, self._state, reopen_at - now, tuple(transitions), reason="open"
                )
            transitions.append(self._move(BreakerState.HALF_OPEN, now, "cooldown_elapsed"))
        if self._state is BreakerState.HALF_OPEN:
            if self._probes_issued >= self._cfg.half_open_probes:
                return BreakerDecision(
                    False, self._state, None, tuple(transitions), reason="half_open_full"
                )
            self._probes_issued += 1
            return BreakerDecision(True, self._state, None, tuple(transitions), reason="probe")
        return BreakerDecision(True, self._state, None, tuple(transitions))

    def release_permission(self) -> None:
        """Give back a call `allow` granted that never went out (a rate limiter or
        bulkhead refused it): half-open, its probe slot is free again, so the probe is
        not lost; otherwise nothing happens. Record no outcome for such a call."""
        if self._state is BreakerState.HALF_OPEN and self._probes_issued > 0:
            self._probes_issued -= 1

    def record(self, now: float, ok: bool, duration_s: float = 0.0) -> list[Transition]:
        """Feed in the outcome of one logical call that took `duration_s` seconds."""
        if self._pinned() is not None:
            return []
        transitions = self._expire_half_open(now)
        slow = self._cfg.slow_call_s is not None and duration_s > self._cfg.slow_call_s
        if self._state is BreakerState.CLOSED:
            transitions += self._closed_outcome(now, ok, slow)
        elif self._state is BreakerState.HALF_OPEN:
            transitions += self._probe_outcome(now, ok, slow)
        return transitions  # OPEN: a stale result, ignored

    def record_success(self, now: float, duration_s: float = 0.0) -> list[Transition]:
        return self.record(now, True, duration_s)

    def record_failure(self, now: float, duration_s: float = 0.0) -> list[Transition]:
        return self.record(now, False, duration_s)

    def _pinned(self) -> BreakerState | None:
        if not self._cfg.enabled:
            return BreakerState.CLOSED
        if self._cfg.state == "forced_open":
            return BreakerState.FORCED_OPEN
        if self._cfg.state == "disabled":
            return BreakerState.DISABLED
        return None

    def _expire_half_open(self, now: float) -> list[Transition]:
        limit = self._cfg.max_half_open_s
        if self._state is not BreakerState.HALF_OPEN or limit is None:
            return []
        expired_at = self._half_opened_at + limit
        if now < expired_at:
            return []
        return [self._move(BreakerState.OPEN, expired_at, "half_open_timeout")]

    def _closed_outcome(self, now: float, ok: bool, slow: bool) -> list[Transition]:
        if self._window is None:
            self._failures = 0 if ok else self._failures + 1
            if self._failures >= self._cfg.failure_threshold:
                return [self._move(BreakerState.OPEN, now, "failure_threshold")]
            return []
        counts = self._window.record(now, failed=not ok, slow=slow)
        reason = self._verdict(counts, self._minimum_calls)
        return [self._move(BreakerState.OPEN, now, reason)] if reason else []

    def _probe_outcome(self, now: float, ok: bool, slow: bool) -> list[Transition]:
        if self._probes is None:
            if not ok:
                return [self._move(BreakerState.OPEN, now, "probe_failed")]
            self._probes_succeeded += 1
            if self._probes_succeeded >= self._cfg.half_open_probes:
                return [self._move(BreakerState.CLOSED, now, "probes_succeeded")]
            return []
        counts = self._probes.record(now, failed=not ok, slow=slow)
        if counts.calls < min(self._cfg.minimum_calls, self._cfg.half_open_probes):
            return []
        reason = self._verdict(counts, 1)
        if reason:
            return [self._move(BreakerState.OPEN, now, reason)]
        return [self._move(BreakerState.CLOSED, now, "probes_succeeded")]

    def _verdict(self, counts: WindowCounts, minimum_calls: int) -> str | None:
        cfg = self._cfg
        return exceeded(
            counts,
            minimum_calls=minimum_calls,
            failure_rate=cfg.failure_rate,
            slow_call_rate=cfg.slow_call_rate if cfg.slow_call_s is not None else None,
        )

    def _move(self, to: BreakerState, now: float, reason: str) -> Transition:
        transition = Transition(self._state, to, now, reason)
        self._state = to
        # Every state starts from a clean slate; only OPEN and HALF_OPEN remember when.
        self._failures = 0
        self._probes_issued = 0
        self._probes_succeeded = 0
        if self._window is not None and self._probes is not None:
            self._window.clear()
            self._probes.clear()
        if to is BreakerState.OPEN:
            self._opened_at = now
        elif to is BreakerState.HALF_OPEN:
            self._half_opened_at = now
        return transition


BreakerKey = tuple[str, str | None]


class BreakerBank:
    """Breakers keyed by (tool, argument pattern), created on demand."""

    def __init__(self, cfg: BreakerConfig) -> None:
        self._cfg = cfg
        self._breakers: dict[BreakerKey, CircuitBreaker] = {}

    @property
    def config(self) -> BreakerConfig:
        return self._cfg

    def key(self, tool: str, arg_pattern: str | None = None) -> BreakerKey:
        # Without per_argument every pattern shares the tool's breaker.
        return (tool, arg_pattern if self._cfg.per_argument else None)

    def get(self, tool: str, arg_pattern: str | None = None) -> CircuitBreaker:
        key = self.key(tool, arg_pattern)
        breaker = self._breakers.get(key)
        if breaker is None:
            breaker = self._breakers[key] = CircuitBreaker(self._cfg)
        return breaker

    def allow(self, tool: str, now: float, arg_pattern: str | None = None) -> BreakerDecision:
        return self.get(tool, arg_pattern).allow(now)

    def release_permission(self, tool: str, arg_pattern: str | None = None) -> None:
        self.get(tool, arg_pattern).release_permission()

    def record(
        self,
        tool: str,
        now: float,
        ok: bool,
        duration_s: float = 0.0,
        arg_pattern: str | None = None,
    ) -> list[Transition]:
        return self.get(tool, arg_pattern).record(now, ok, duration_s)

    def record_success(
        self, tool: str, now: float, arg_pattern: str | None = None
    ) -> list[Transition]:
        return self.get(tool, arg_pattern).record_success(now)

    def record_failure(
        self, tool: str, now: float, arg_pattern: str | None = None
    ) -> list[Transition]:
        return self.get(tool, arg_pattern).record_failure(now)

    def states(self) -> dict[BreakerKey, BreakerState]:
        return {key: breaker.state for key, breaker in self._breakers.items()}
