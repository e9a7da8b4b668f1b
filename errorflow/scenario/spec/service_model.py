"""Services behind tools, and trials arriving over run time.

A tool may name the service that answers it (`service: search_api`); several tools,
and so several agents, may share one. A service has a capacity (calls per window of
simulated seconds, concurrent calls), may degrade under load (failure probability and
latency rising with utilisation) and may be down: in windows of run time, or by a
seeded flapping process. Over capacity it answers HTTP 429 with a Retry-After that
follows from its real state (when the oldest call in the window leaves it).

Services keep their state for the whole run, so load from one trial meets the next:
trials then arrive over run time (`arrivals:`; all at once by default) and run one at
a time in arrival order, which keeps every trial reproducible from the seed (each
sees the load of the trials before it). Scenarios without services are unchanged.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from errorflow.core.shapes import MAX_RUN_S, Probability, Strict

#: Highest utilisation a service that does not shed load reaches (its latency and
#: failure curves stop growing there).
MAX_UTILISATION = 10.0


class OutageWindow(Strict):
    """The service is down from `start_s` to `end_s` of run time."""

    start_s: float = Field(ge=0, le=MAX_RUN_S)
    end_s: float = Field(gt=0, le=MAX_RUN_S)
    #: What a call gets while it is down: an HTTP status, or no answer (connect timeout).
    status: int | Literal["connect_timeout"] = 503

    @model_validator(mode="after")
    def _ordered(self) -> OutageWindow:
        if self.end_s <= self.start_s:
            raise ValueError("end_s must be after start_s")
        return self


class FlappingSpec(Strict):
    """Up and down in turn, each period drawn from an exponential distribution (seeded)."""

    mean_up_s: float = Field(gt=0, le=MAX_RUN_S)
    mean_down_s: float = Field(gt=0, le=MAX_RUN_S)
    status: int | Literal["connect_timeout"] = 503


class DegradeSpec(Strict):
    """Under load: at utilisation u (the share of its capacity in use; above 1 for a
    service that queues instead of shedding) a call fails with probability
    `fail_p * min(u, 1) ** exponent` and takes `latency_s * (1 + latency_factor * u)`."""

    fail_p: Probability = 0.0
    latency_factor: float = Field(default=0.0, ge=0, le=1000)
    exponent: float = Field(default=2.0, gt=0, le=10)
    status: int = Field(default=503, ge=100, le=599)


class ServiceSpec(Strict):
    rate: int | None = Field(default=None, ge=1, le=1_000_000, description="calls per window")
    window_s: float = Field(default=1.0, gt=0, le=3600)
    concurrency: int | None = Field(default=None, ge=1, le=100_000)
    #: Over its concurrency: refuse the call (503, load shedding) or take it anyway and
    #: slow down (its utilisation goes above 1, up to MAX_UTILISATION: a queue).
    shed: bool = True
    #: Seconds one call takes when the service is idle (default: the tool's latency_s).
    latency_s: float | None = Field(default=None, ge=0, le=3600)
    degrade: DegradeSpec | None = None
    outages: list[OutageWindow] = Field(default_factory=list, max_length=100)
    flapping: FlappingSpec | None = None


class ArrivalSpec(Strict):
    """When trials start, in run time: all at once (0 s), one every 1/rate seconds, or a
    Poisson process of `rate_per_s` (seeded)."""

    process: Literal["all_at_once", "uniform", "poisson"] = "all_at_once"
    rate_per_s: float | None = Field(default=None, gt=0, le=1_000_000)

    @model_validator(mode="after")
    def _rate(self) -> ArrivalSpec:
        if self.process != "all_at_once" and self.rate_per_s is None:
            raise ValueError(f"a {self.process} arrival process needs rate_per_s")
        return self
