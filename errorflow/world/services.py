"""Services at run time: shared state behind tools, answering from their real load.

One `ServiceRegistry` per run per process holds every service's ledger of calls. A
call asks `admit`: is the service up (outage windows, a seeded flapping process), under
its rate (calls per window of run time) and under its concurrency; if so, how loaded
it is (which decides the degraded failure probability and latency). Over the rate it
answers 429 with a Retry-After computed from the ledger: when the oldest call in the
window leaves it.

Reproducible: a call sees the calls of earlier trials (which are over, trials of a run
with services run one at a time) and the earlier calls of its own agent in its own
trial, never those of another agent running at the same moment, whose order would
depend on the transport.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass, field
from typing import Literal

from errorflow.core.seeding import stream
from errorflow.core.shapes import MAX_RUN_S
from errorflow.scenario.spec.model import Scenario
from errorflow.scenario.spec.service_model import MAX_UTILISATION, ServiceSpec

Verdict = Literal["ok", "rate_limited", "overloaded", "down", "degraded"]


@dataclass(frozen=True, slots=True)
class Admission:
    verdict: Verdict
    latency_s: float
    retry_after_s: float | None = None
    status: int | Literal["connect_timeout"] | None = None
    utilisation: float = 0.0


@dataclass(frozen=True, slots=True)
class CallRecord:
    trial: int
    agent: str
    start: float
    end: float
    accepted: bool
    verdict: Verdict = "ok"


@dataclass
class ServiceState:
    name: str
    spec: ServiceSpec
    seed: int
    #: Every call, for the run's load figures.
    calls: list[CallRecord] = field(default_factory=list)
    #: The calls that can still matter to a new one (see `_prune`).
    _live: list[CallRecord] = field(default_factory=list)
    _floor: float = 0.0
    _down: list[tuple[float, float]] = field(default_factory=list)
    _flap_until: float = 0.0
    _rng: random.Random | None = None

    def visible(self, trial: int, agent: str) -> list[CallRecord]:
        return [c for c in self._live if c.trial < trial or (c.trial == trial and c.agent == agent)]

    def _prune(self, floor: float) -> None:
        """No call is made before `floor` any more (the arrival of the trial running:
        trials with services run one at a time, in arrival order), so a call that ended
        a window before it can neither be in a rate window nor in flight again."""
        if floor > self._floor:
            self._floor = floor
            self._live = [c for c in self._live if c.end > floor - self.spec.window_s]

    def admit(
        self,
        trial: int,
        agent: str,
        now: float,
        base_latency: float,
        rng: random.Random,
        *,
        floor: float = 0.0,
    ) -> Admission:
        """The service's answer to a call at run time `now` (recorded in its ledger);
        `floor`: no call of this trial or a later one starts before it."""
        self._prune(floor)
        spec = self.spec
        latency = spec.latency_s if spec.latency_s is not None else base_latency
        status = self._outage(now)
        if status is not None:
            self._record(trial, agent, now, now, accepted=False, verdict="down")
            return Admission("down", 0.0, status=status)
        seen = self.visible(trial, agent)
        in_window = [c for c in seen if c.accepted and now - spec.window_s < c.start <= now]
        if spec.rate is not None and len(in_window) >= spec.rate:
            oldest = min(c.start for c in in_window)
            retry = round(max(0.0, oldest + spec.window_s - now), 6)
            self._record(trial, agent, now, now, accepted=False, verdict="rate_limited")
            return Admission("rate_limited", 0.0, retry_after_s=retry, status=429)
        busy = [c for c in seen if c.accepted and c.start <= now < c.end]
        if spec.concurrency is not None and spec.shed and len(busy) >= spec.concurrency:
            self._record(trial, agent, now, now, accepted=False, verdict="overloaded")
            return Admission("overloaded", 0.0, status=503, utilisation=1.0)
        util = self._utilisation(len(in_window), len(busy))
        degrade = spec.degrade
        if degrade is not None:
            latency *= 1 + degrade.latency_factor * util
            if rng.random() < degrade.fail_p * min(util, 1.0) ** degrade.exponent:
                self._record(trial, agent, now, now + latency, accepted=True, verdict="degraded")
                return Admission("degraded", latency, status=degrade.status, utilisation=util)
        self._record(trial, agent, now, now + latency, accepted=True)
        return Admission("ok", latency, utilisation=util)

    def _utilisation(self, in_window: int, busy: int) -> float:
        shares = []
        if self.spec.rate is not None:
            shares.append(in_window / self.spec.rate)
        if self.spec.concurrency is not None:
            shares.append(busy / self.spec.concurrency)
        cap = 1.0 if self.spec.shed else MAX_UTILISATION
        return round(min(cap, max(shares, default=0.0)), 9)

    def _record(
        self,
        trial: int,
        agent: str,
        start: float,
        end: float,
        *,
        accepted: bool,
        verdict: Verdict = "ok",
    ) -> None:
        record = CallRecord(trial, agent, start, end, accepted, verdict)
        self.calls.append(record)
        self._live.append(record)

    def _outage(self, now: float) -> int | Literal["connect_timeout"] | None:
        for window in self.spec.outages:
            if window.start_s <= now < window.end_s:
                return window.status
        flap = self.spec.flapping
        if flap is None:
            return None
        self._extend_flapping(now)
        starts = [start for start, _ in self._down]
        i = bisect.bisect_right(starts, now) - 1
        if i >= 0 and self._down[i][0] <= now < self._down[i][1]:
            return flap.status
        return None

    def _extend_flapping(self, now: float) -> None:
        """The seeded up/down periods up to `now` (drawn once, in order, for the run)."""
        flap = self.spec.flapping
        assert flap is not None
        if self._rng is None:
            self._rng = stream(self.seed, "service", self.name, "flapping")
        t = self._flap_until
        while t <= now and t < MAX_RUN_S:
            up = self._rng.expovariate(1 / flap.mean_up_s)
            down = self._rng.expovariate(1 / flap.mean_down_s)
            self._down.append((t + up, t + up + down))
            t += up + down
        self._flap_until = t

    def outage_windows(self, until: float) -> list[tuple[float, float]]:
        """Every window the service was down, up to run time `until` (for reports)."""
        windows = [(w.start_s, w.end_s) for w in self.spec.outages]
        if self.spec.flapping is not None:
            self._extend_flapping(until)
            windows += [w for w in self._down if w[0] < until]
        return sorted(windows)


class ServiceRegistry:
    """Every service of a run, in this process."""

    def __init__(self, scenario: Scenario) -> None:
        self.services = {
            name: ServiceState(name, spec, scenario.seed)
            for name, spec in scenario.services.items()
        }

    def get(self, name: str | None) -> ServiceState | None:
        return None if name is None else self.services.get(name)
