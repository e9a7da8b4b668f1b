"""Run time: arrival processes (errorflow.scenario.spec.run_time) and when an agent starts
(errorflow.agents.run_clock)."""

from __future__ import annotations

import itertools
import statistics
from types import SimpleNamespace

from errorflow.agents.run_clock import start_time
from errorflow.scenario.agent_plan import AgentPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scenario.spec.run_time import arrival, arrival_times

BASE = {
    "name": "rt",
    "world": {"metrics": {"m": 1}},
    "tools": {"q": {"kind": "metric_store"}},
    "agents": {"a": {"role": "researcher", "tools": ["q"]}},
    "task": {"prompt": "p", "needs": [{"id": "m", "tool": "q", "wording": "m", "value": "m"}]},
}


def scenario(**extra: object) -> Scenario:
    return Scenario.model_validate({**BASE, **extra})


def test_all_at_once_is_the_default_and_keeps_the_old_clock() -> None:
    s = scenario(trials=5)
    assert arrival_times(s) == (0.0,) * 5 and not s.run_scoped
    msg = SimpleNamespace(payload={"t": 99.0})
    assert (
        start_time(AgentPlan.of(s, "a"), 3, [msg]) == 0.0
    )  # per-agent clocks start at 0, as always


def test_uniform_and_poisson_arrivals() -> None:
    uniform = scenario(trials=4, arrivals={"process": "uniform", "rate_per_s": 2})
    assert arrival_times(uniform) == (0.0, 0.5, 1.0, 1.5)
    poisson = scenario(trials=2000, seed=5, arrivals={"process": "poisson", "rate_per_s": 4})
    times = arrival_times(poisson)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert times[0] == 0.0 and all(g >= 0 for g in gaps)
    assert abs(statistics.mean(gaps) - 0.25) < 0.02  # 1 / rate
    # Trial i's arrival does not depend on how many trials the run has.
    shorter = scenario(trials=10, seed=5, arrivals={"process": "poisson", "rate_per_s": 4})
    assert arrival_times(shorter) == times[:10]
    assert arrival(poisson, 7) == times[7] and arrival(poisson, 10_000) == 0.0


def test_an_agent_starts_when_its_last_input_was_sent() -> None:
    s = scenario(trials=3, arrivals={"process": "uniform", "rate_per_s": 1})
    assert s.run_scoped
    assert (
        start_time(AgentPlan.of(s, "a"), 2, [SimpleNamespace(payload={})]) == 2.0
    )  # the task: arrival
    late = [SimpleNamespace(payload={"t": 5.5}), SimpleNamespace(payload={"t": 3.0})]
    assert start_time(AgentPlan.of(s, "a"), 2, late) == 5.5
    assert (
        start_time(AgentPlan.of(s, "a"), 2, [SimpleNamespace(payload={"t": True})]) == 2.0
    )  # not a time
