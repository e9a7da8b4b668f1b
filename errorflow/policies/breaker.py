"""Circuit breakers: stop calling a backend that keeps failing, probe it later.

Theory of operation
-------------------
Each breaker is a three-state machine driven by the caller's clock (`now`,
simulated seconds); it never reads time itself::

    CLOSED ──failure_threshold consecutive failures──▶ OPEN
    OPEN ──allow(now) with now >= opened_at + cooldown_s──▶ HALF_OPEN
    HALF_OPEN ──any probe fails──▶ OPEN (a fresh cooldown from that moment)
    HALF_OPEN ──half_open_probes probes all succeed──▶ CLOSED

* CLOSED allows every call; a success resets the failure count.
* OPEN refuses every call and says how long until probing (`retry_in_s`). The
  move to HALF_OPEN happens lazily inside `allow`, the only place that is told
  the time when a call is about to be made, and `allow` returns that transition
  in `BreakerDecision.transitions` so it can be published like the others.
* HALF_OPEN lets exactly `half_open_probes` calls through (counted by `allow`),
  refuses the rest, and decides on their outcomes.

Results recorded while OPEN (a call admitted before the circuit opened that
finished afterwards) are stale and ignored: they neither extend the cooldown nor
close the circuit.

Counting contract: the caller records ONE outcome per *logical* call, after its
retries are done. Three failed attempts of one call are one failure; counting
each attempt would trip the breaker on a single unlucky call (seed 003: breaker
check → retry loop → report the outcome back to the breaker).

`BreakerBank` holds one breaker per key, created on first use. The key is the
tool name plus an argument pattern when `per_argument` is set (seed 003: only the
`search_docs(category="legacy")` path may be broken); the caller chooses what the
pattern is. With ``enabled=False`` every call is allowed and nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from errorflow.policies.config import BreakerConfig


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class Transition:
    frm: BreakerState
    to: BreakerState
    at: float
    #: "failure_threshold" | "cooldown_elapsed" | "probe_failed" | "probes_succeeded"
    reason: str


@dataclass(frozen=True, slots=True)
class BreakerDecision:
    allowed: bool
    #: The state after this decision (after any transition it caused).
    state: BreakerState
    #: Seconds until the breaker will probe again; None when allowed or unknown
    #: (half-open with all probes in flight: it depends on their outcomes).
    retry_in_s: float | None
    transitions: tuple[Transition, ...] = ()


class CircuitBreaker:
    def __init__(self, cfg: BreakerConfig) -> None:
        self._cfg = cfg
        self._state = BreakerState.CLOSED
        self._failures = 0  # consecutive failures while closed
        self._opened_at = 0.0
        self._probes_issued = 0
        self._probes_succeeded = 0

    @property
    def state(self) -> BreakerState:
        """The state as of the last call; OPEN does not turn HALF_OPEN until `allow`."""
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    @property
    def opened_at(self) -> float | None:
        return self._opened_at if self._state is BreakerState.OPEN else None

    def allow(self, now: float) -> BreakerDecision:
        """Whether a call may go out at `now`; a granted half-open call is a probe."""
        if not self._cfg.enabled:
            return BreakerDecision(True, BreakerState.CLOSED, None)
        transitions: tuple[Transition, ...] = ()
        if self._state is BreakerState.OPEN:
            reopen_at = self._opened_at + self._cfg.cooldown_s
            if now < reopen_at:
                return BreakerDecision(False, self._state, reopen_at - now)
            transitions = (self._move(BreakerState.HALF_OPEN, now, "cooldown_elapsed"),)
        if self._state is BreakerState.HALF_OPEN:
            if self._probes_issued >= self._cfg.half_open_probes:
                return BreakerDecision(False, self._state, None, transitions)
            self._probes_issued += 1
        return BreakerDecision(True, self._state, None, transitions)

    def record_success(self, now: float) -> list[Transition]:
        if not self._cfg.enabled:
            return []
        if self._state is BreakerState.CLOSED:
            self._failures = 0
        elif self._state is BreakerState.HALF_OPEN:
            self._probes_succeeded += 1
            if self._probes_succeeded >= self._cfg.half_open_probes:
                return [self._move(BreakerState.CLOSED, now, "probes_succeeded")]
        return []

    def record_failure(self, now: float) -> list[Transition]:
        if not self._cfg.enabled:
            return []
        if self._state is BreakerState.CLOSED:
            self._failures += 1
            if self._failures >= self._cfg.failure_threshold:
                return [self._move(BreakerState.OPEN, now, "failure_threshold")]
        elif self._state is BreakerState.HALF_OPEN:
            return [self._move(BreakerState.OPEN, now, "probe_failed")]
        return []

    def _move(self, to: BreakerState, now: float, reason: str) -> Transition:
        transition = Transition(self._state, to, now, reason)
        self._state = to
        # Every state starts from a clean slate; only OPEN remembers when.
        self._failures = 0
        self._probes_issued = 0
        self._probes_succeeded = 0
        if to is BreakerState.OPEN:
            self._opened_at = now
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
