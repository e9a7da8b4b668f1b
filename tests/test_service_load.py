"""Load on services (errorflow.scoring.service_load) and what the bundled load
scenarios show: a run-scoped breaker protects a service that is down, and backoff
and client-side limits beat blind retries on a congested one."""

from __future__ import annotations

from errorflow import api
from errorflow.scenario.overrides import apply
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.service_load import ServiceJson, service_load
from errorflow.world.services import ServiceRegistry


def cell(name: str, label: str) -> api.Scenario:
    scenario = api.load(name)
    assert scenario.sweep is not None
    return apply(scenario, scenario.sweep.axes[0].values[label])


def search_api(scenario: api.Scenario) -> ServiceJson:
    result = api.run(scenario)
    return result.raw.services["search_api"]


def test_load_figures_from_a_ledger() -> None:
    scenario = api.load("outage")
    registry = ServiceRegistry(scenario)
    state = registry.services["search_api"]
    import random

    rng = random.Random(0)
    state.admit(0, "r", 59.0, 0.2, rng)  # answered
    state.admit(1, "r", 61.0, 0.2, rng)  # down
    state.admit(2, "r", 119.0, 0.2, rng)  # down
    state.admit(3, "r", 125.0, 0.2, rng)  # answered again, 5 s after the outage
    scores = [TrialScore(t, o, 0) for t, o in enumerate(
        [Outcome.SUCCESS, Outcome.CONTAINED, Outcome.CONTAINED, Outcome.SUCCESS])]  # fmt: skip
    [load] = service_load(registry, scores, [59.0, 61.0, 119.0, 125.0]).values()
    assert load["calls"] == 4 and load["answered"] == 2 and load["refused"] == {"down": 2}
    [outage] = load["outages"]
    assert outage["calls_during"] == 2 and outage["recovered_after_s"] == 5.0
    assert (outage["success_during"], outage["success_after"]) == (0.0, 1.0)


def test_a_run_scoped_breaker_keeps_calls_off_a_service_that_is_down() -> None:
    without = search_api(cell("outage", "resilient"))["outages"][0]
    with_breaker = search_api(cell("outage", "breaker-run"))["outages"][0]
    assert with_breaker["calls_during"] <= 0.2 * without["calls_during"]  # at least −80 %
    cooldown = api.load("outage").agents["researcher"].policy.config.breaker.cooldown_s
    recovered = with_breaker["recovered_after_s"]
    assert recovered is not None and recovered <= cooldown + 1.0  # cooldown + one probe
    assert with_breaker["success_after"] is not None and with_breaker["success_after"] > 0.5


def test_blind_retries_lose_to_backoff_and_limits_on_a_congested_service() -> None:
    success = {
        label: api.run(cell("retry-storm", label)).outcomes["success"]
        for label in ("blind-retry", "resilient", "resilient+limits")
    }
    assert success["blind-retry"] < success["resilient"] <= success["resilient+limits"]
