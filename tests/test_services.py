"""Services behind tools (errorflow.world.services): capacity, Retry-After from the
ledger, load shedding, degradation, outages, flapping, and what a call may see."""

from __future__ import annotations

import random

from errorflow.scenario.spec.service_model import (
    DegradeSpec,
    FlappingSpec,
    OutageWindow,
    ServiceSpec,
)
from errorflow.world.services import ServiceState

RNG = random.Random(0)


def state(**spec: object) -> ServiceState:
    return ServiceState("api", ServiceSpec.model_validate(spec), seed=1)


def test_over_its_rate_a_service_answers_429_with_the_wait_its_window_implies() -> None:
    s = state(rate=2, window_s=1.0)
    assert s.admit(0, "a", 10.0, 0.1, RNG).verdict == "ok"
    assert s.admit(0, "a", 10.25, 0.1, RNG).verdict == "ok"
    refused = s.admit(0, "a", 10.5, 0.1, RNG)
    assert (refused.verdict, refused.status, refused.retry_after_s) == ("rate_limited", 429, 0.5)
    # Once the oldest call leaves the window there is room again.
    assert s.admit(0, "a", 11.01, 0.1, RNG).verdict == "ok"
    # Refused calls are in the ledger but take no capacity.
    assert [c.verdict for c in s.calls] == ["ok", "ok", "rate_limited", "ok"]


def test_concurrency_sheds_calls_while_the_service_is_busy() -> None:
    s = state(concurrency=1, latency_s=2.0)
    assert s.admit(0, "a", 0.0, 0.1, RNG).latency_s == 2.0
    assert s.admit(0, "a", 1.0, 0.1, RNG).verdict == "overloaded"
    assert s.admit(0, "a", 2.0, 0.1, RNG).verdict == "ok"  # the first call is over


def test_degradation_rises_with_load() -> None:
    spec = {"rate": 10, "degrade": {"fail_p": 1.0, "exponent": 1, "latency_factor": 1}}
    idle = state(**spec).admit(0, "a", 0.0, 1.0, RNG)
    assert idle.verdict == "ok" and idle.latency_s == 1.0 and idle.utilisation == 0.0

    def half_loaded(seed: int) -> str:
        s = state(**spec)
        for i in range(5):  # 5 of 10 calls in the window: utilisation 0.5
            s._record(0, "a", i * 0.1, i * 0.1 + 1, accepted=True)
        answer = s.admit(0, "a", 0.6, 1.0, random.Random(seed))
        assert answer.utilisation == 0.5 and answer.latency_s == 1.5
        return answer.verdict

    failed = sum(half_loaded(seed) == "degraded" for seed in range(400)) / 400
    assert 0.42 < failed < 0.58  # fail_p * utilisation ** 1 = 0.5


def test_outage_windows_and_connect_timeouts() -> None:
    s = state(outages=[{"start_s": 5, "end_s": 8}, {"start_s": 20, "end_s": 21,
                                                   "status": "connect_timeout"}])  # fmt: skip
    assert s.admit(0, "a", 4.9, 0.1, RNG).verdict == "ok"
    down = s.admit(0, "a", 5.0, 0.1, RNG)
    assert (down.verdict, down.status) == ("down", 503)
    assert s.admit(0, "a", 8.0, 0.1, RNG).verdict == "ok"
    assert s.admit(0, "a", 20.5, 0.1, RNG).status == "connect_timeout"
    assert s.outage_windows(100.0) == [(5.0, 8.0), (20.0, 21.0)]


def test_flapping_is_seeded_and_the_same_whatever_the_order_of_questions() -> None:
    spec = {"flapping": {"mean_up_s": 10, "mean_down_s": 2}}
    a, b = state(**spec), state(**spec)
    times = [t * 0.7 for t in range(400)]
    forward = [a._outage(t) for t in times]
    backward = [b._outage(t) for t in reversed(times)][::-1]
    assert forward == backward and 503 in forward and None in forward
    down = sum(x is not None for x in forward) / len(forward)
    assert 0.05 < down < 0.35  # mean down share 2 / 12


def test_a_call_sees_earlier_trials_and_its_own_agent_only() -> None:
    s = state(rate=1, window_s=10.0)
    s.admit(3, "writer", 1.0, 0.1, RNG)  # a later trial: not visible to trial 2
    s.admit(2, "other", 1.0, 0.1, RNG)  # another agent of the same trial: not visible
    assert s.admit(2, "me", 1.5, 0.1, RNG).verdict == "ok"
    assert s.admit(2, "me", 1.6, 0.1, RNG).verdict == "rate_limited"  # its own call is
    assert s.admit(5, "x", 2.0, 0.1, RNG).verdict == "rate_limited"  # earlier trials are


def test_the_spec_refuses_what_cannot_be() -> None:
    import pytest
    from pydantic import ValidationError

    for bad in (
        lambda: OutageWindow(start_s=5, end_s=5),
        lambda: FlappingSpec(mean_up_s=0, mean_down_s=1),
        lambda: DegradeSpec(fail_p=2),
        lambda: ServiceSpec(rate=0),
    ):
        with pytest.raises(ValidationError):
            bad()
