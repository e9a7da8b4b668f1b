"""Run time: when each trial arrives, from the scenario's arrival process (seeded).

Pure and cached per process: every agent derives the same arrival times from the same
seed, so a trial's clock starts at the same run time wherever the agent runs.
"""

from __future__ import annotations

import functools
import itertools

from errorflow.core.seeding import stream
from errorflow.scenario.spec.model import Scenario


@functools.lru_cache(maxsize=64)
def _times(seed: int, trials: int, process: str, rate: float | None) -> tuple[float, ...]:
    if process == "all_at_once" or rate is None:
        return (0.0,) * trials
    if process == "uniform":
        return tuple(round(i / rate, 9) for i in range(trials))
    rng = stream(seed, "arrivals")
    gaps = (rng.expovariate(rate) for _ in range(trials))
    return tuple(round(t, 9) for t in itertools.accumulate(gaps, initial=0.0))[:trials]


def arrival_times(scenario: Scenario) -> tuple[float, ...]:
    a = scenario.arrivals
    return _times(scenario.seed, scenario.trials, a.process, a.rate_per_s)


def arrival(scenario: Scenario, trial: int) -> float:
    """The run time (simulated seconds) at which `trial` arrives."""
    times = arrival_times(scenario)
    return times[trial] if 0 <= trial < len(times) else 0.0
