"""Circuit breaker state machine, driven by a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from errorflow.policies.breaker import (
    BreakerBank,
    BreakerDecision,
    BreakerState,
    CircuitBreaker,
    Transition,
)
from errorflow.policies.config import BreakerConfig

CLOSED, OPEN, HALF = BreakerState.CLOSED, BreakerState.OPEN, BreakerState.HALF_OPEN


def make(threshold: int = 3, cooldown: float = 10.0, probes: int = 1) -> CircuitBreaker:
    return CircuitBreaker(
        BreakerConfig(failure_threshold=threshold, cooldown_s=cooldown, half_open_probes=probes)
    )


def trip(b: CircuitBreaker, now: float, n: int) -> list[Transition]:
    out: list[Transition] = []
    for _ in range(n):
        assert b.allow(now).allowed
        out += b.record_failure(now)
    return out


def test_closed_allows_and_success_resets_the_count() -> None:
    b = make(threshold=3)
    assert b.allow(0.0) == BreakerDecision(True, CLOSED, None)
    assert b.record_failure(0.0) == []
    assert b.record_failure(1.0) == []
    assert b.consecutive_failures == 2
    assert b.record_success(2.0) == []
    assert b.consecutive_failures == 0
    assert trip(b, 3.0, 2) == []
    assert b.state is CLOSED


def test_closed_to_open_after_threshold_consecutive_failures() -> None:
    b = make(threshold=3)
    assert trip(b, 5.0, 3) == [Transition(CLOSED, OPEN, 5.0, "failure_threshold")]
    assert b.state is OPEN
    assert b.opened_at == 5.0


def test_open_refuses_with_time_until_probe() -> None:
    b = make(threshold=1, cooldown=10.0)
    trip(b, 100.0, 1)
    assert b.allow(100.0) == BreakerDecision(False, OPEN, 10.0)
    assert b.allow(107.5) == BreakerDecision(False, OPEN, 2.5)
    assert not b.allow(109.999).allowed
    assert b.state is OPEN


def test_open_to_half_open_on_allow_after_cooldown() -> None:
    b = make(threshold=1, cooldown=10.0)
    trip(b, 0.0, 1)
    d = b.allow(10.0)  # exactly at the boundary
    assert d == BreakerDecision(
        True, HALF, None, (Transition(OPEN, HALF, 10.0, "cooldown_elapsed"),)
    )
    assert b.state is HALF


def test_half_open_single_probe_success_closes() -> None:
    b = make(threshold=1, cooldown=10.0, probes=1)
    trip(b, 0.0, 1)
    assert b.allow(12.0).allowed
    assert b.allow(12.0) == BreakerDecision(False, HALF, None)  # probe in flight
    assert b.record_success(13.0) == [Transition(HALF, CLOSED, 13.0, "probes_succeeded")]
    assert b.state is CLOSED
    assert b.allow(13.0).allowed
    # Back to a clean count: one failure trips again with threshold 1.
    assert b.record_failure(14.0) == [Transition(CLOSED, OPEN, 14.0, "failure_threshold")]


def test_half_open_probe_failure_reopens_with_fresh_cooldown() -> None:
    b = make(threshold=2, cooldown=10.0)
    trip(b, 0.0, 2)
    assert b.allow(10.0).allowed
    assert b.record_failure(11.0) == [Transition(HALF, OPEN, 11.0, "probe_failed")]
    assert b.state is OPEN
    assert b.allow(20.0) == BreakerDecision(False, OPEN, 1.0)  # cooldown counts from 11
    assert b.allow(21.0).allowed


def test_multiple_probes_all_must_succeed() -> None:
    b = make(threshold=1, cooldown=5.0, probes=3)
    trip(b, 0.0, 1)
    decisions = [b.allow(5.0) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[0].transitions == (Transition(OPEN, HALF, 5.0, "cooldown_elapsed"),)
    assert all(d.transitions == () for d in decisions[1:])
    assert b.record_success(6.0) == []
    assert b.record_success(6.5) == []
    assert b.state is HALF
    assert b.record_success(7.0) == [Transition(HALF, CLOSED, 7.0, "probes_succeeded")]


def test_multiple_probes_one_failure_reopens() -> None:
    b = make(threshold=1, cooldown=5.0, probes=3)
    trip(b, 0.0, 1)
    for _ in range(3):
        assert b.allow(5.0).allowed
    assert b.record_success(6.0) == []
    assert b.record_failure(6.0) == [Transition(HALF, OPEN, 6.0, "probe_failed")]
    # The third probe's late result is stale and ignored.
    assert b.record_success(6.5) == []
    assert b.state is OPEN
    # A new half-open episode gets a fresh allowance of three probes.
    assert [b.allow(11.0).allowed for _ in range(4)] == [True, True, True, False]


def test_results_recorded_while_open_are_ignored() -> None:
    b = make(threshold=1, cooldown=10.0)
    trip(b, 0.0, 1)
    assert b.record_failure(9.0) == []  # must not extend the cooldown
    assert b.record_success(9.0) == []  # must not close
    assert b.state is OPEN
    assert b.allow(10.0).allowed


def test_disabled_breaker_always_allows_and_never_moves() -> None:
    b = CircuitBreaker(BreakerConfig(enabled=False, failure_threshold=1))
    for t in range(10):
        assert b.record_failure(float(t)) == []
        assert b.allow(float(t)) == BreakerDecision(True, CLOSED, None)
    assert b.state is CLOSED


def test_bank_keys_by_tool_only_without_per_argument() -> None:
    bank = BreakerBank(BreakerConfig(failure_threshold=1, per_argument=False))
    assert bank.key("search", "legacy") == ("search", None)
    bank.record_failure("search", 0.0, "legacy")
    assert not bank.allow("search", 1.0, "current").allowed
    assert bank.allow("fetch", 1.0).allowed
    assert bank.states() == {("search", None): OPEN, ("fetch", None): CLOSED}


def test_bank_keys_by_argument_pattern_with_per_argument() -> None:
    bank = BreakerBank(BreakerConfig(failure_threshold=2, per_argument=True))
    assert bank.record_failure("search", 0.0, "legacy") == []
    assert bank.record_failure("search", 0.0, "legacy") == [
        Transition(CLOSED, OPEN, 0.0, "failure_threshold")
    ]
    assert not bank.allow("search", 1.0, "legacy").allowed
    assert bank.allow("search", 1.0, "current").allowed
    assert bank.get("search", "legacy") is bank.get("search", "legacy")
    assert bank.record_success("search", 2.0, "current") == []


# --- properties ----------------------------------------------------------------

ops = st.lists(
    st.tuples(st.sampled_from(["allow", "ok", "fail"]), st.floats(0.0, 8.0)),
    max_size=80,
)
configs = st.builds(
    BreakerConfig,
    failure_threshold=st.integers(1, 4),
    cooldown_s=st.floats(0.0, 20.0),
    half_open_probes=st.integers(1, 4),
)


@settings(max_examples=300)
@given(cfg=configs, script=ops)
def test_never_allows_while_open_before_cooldown(
    cfg: BreakerConfig, script: list[tuple[str, float]]
) -> None:
    b = CircuitBreaker(cfg)
    now = 0.0
    opened_at: float | None = None
    for op, dt in script:
        now += dt
        if op == "allow":
            d = b.allow(now)
            if opened_at is not None and now < opened_at + cfg.cooldown_s:
                assert not d.allowed
                assert d.state is OPEN
                assert d.retry_in_s is not None
                assert 0.0 < d.retry_in_s <= cfg.cooldown_s + 1e-9  # float rounding
            transitions = list(d.transitions)
        else:
            transitions = b.record_success(now) if op == "ok" else b.record_failure(now)
        for t in transitions:
            assert t.at == now
            if t.to is OPEN:
                opened_at = now
            elif t.frm is OPEN:
                opened_at = None
        assert (b.state is OPEN) == (opened_at is not None)


@settings(max_examples=300)
@given(cfg=configs, script=ops)
def test_never_more_than_probes_allowed_in_one_half_open_episode(
    cfg: BreakerConfig, script: list[tuple[str, float]]
) -> None:
    b = CircuitBreaker(cfg)
    now = 0.0
    allowed_in_episode = 0
    for op, dt in script:
        now += dt
        if op == "allow":
            d = b.allow(now)
            if any(t.to is HALF for t in d.transitions):
                allowed_in_episode = 0
            if d.allowed and b.state is HALF:
                allowed_in_episode += 1
                assert allowed_in_episode <= cfg.half_open_probes
        else:
            b.record_success(now) if op == "ok" else b.record_failure(now)


@settings(max_examples=300)
@given(cfg=configs, script=ops)
def test_transitions_chain_and_only_follow_the_diagram(
    cfg: BreakerConfig, script: list[tuple[str, float]]
) -> None:
    legal = {(CLOSED, OPEN), (OPEN, HALF), (HALF, OPEN), (HALF, CLOSED)}
    b = CircuitBreaker(cfg)
    state = CLOSED
    now = 0.0
    for op, dt in script:
        now += dt
        if op == "allow":
            transitions = list(b.allow(now).transitions)
        else:
            transitions = b.record_success(now) if op == "ok" else b.record_failure(now)
        for t in transitions:
            assert t.frm is state
            assert (t.frm, t.to) in legal
            state = t.to
        assert b.state is state


# --- issue 14: sliding windows, slow calls, pinned states, half-open limits --------


def rated(**kw: object) -> CircuitBreaker:
    """A rate-window breaker; the defaults are small enough to reason about by hand."""
    data: dict[str, object] = {
        "window": "count",
        "window_size": 4,
        "minimum_calls": 4,
        "failure_rate": 0.5,
        "cooldown_s": 10.0,
        **kw,
    }
    return CircuitBreaker(BreakerConfig.model_validate(data))


def feed(b: CircuitBreaker, now: float, outcomes: str, duration: float = 0.0) -> list[Transition]:
    """Record outcomes at `now`: "F" a failure, "S" a success."""
    out: list[Transition] = []
    for o in outcomes:
        out += b.record(now, o == "S", duration)
    return out


def test_the_default_window_is_consecutive_and_ignores_rates() -> None:
    cfg = BreakerConfig()
    assert (cfg.window, cfg.state, cfg.scope, cfg.slow_call_s) == (
        "consecutive",
        "auto",
        "trial",
        None,
    )
    b = CircuitBreaker(BreakerConfig(failure_threshold=3))
    # A 50 % failure rate over many calls never opens a consecutive breaker.
    assert feed(b, 0.0, "FSFSFSFSFS" * 3) == []
    assert feed(b, 1.0, "FFF") == [Transition(CLOSED, OPEN, 1.0, "failure_threshold")]


def test_record_is_record_success_and_record_failure() -> None:
    a, b = make(threshold=2), make(threshold=2)
    assert a.record(0.0, False, 3.0) == b.record_failure(0.0) == []
    assert a.record(1.0, True) == b.record_success(1.0) == []
    assert a.record(2.0, False) == b.record_failure(2.0) == []
    assert a.record(3.0, False) == b.record_failure(3.0)
    assert a.state is b.state is OPEN


def test_count_window_does_not_open_below_minimum_calls() -> None:
    b = rated(window_size=10, minimum_calls=5)
    assert feed(b, 0.0, "FFFF") == []  # 100 % failures, but only 4 calls
    assert b.state is CLOSED
    assert feed(b, 1.0, "F") == [Transition(CLOSED, OPEN, 1.0, "failure_rate")]


def test_failure_rate_exactly_at_the_threshold_opens() -> None:
    b = rated(window_size=4, minimum_calls=4, failure_rate=0.5)
    assert feed(b, 0.0, "SSF") == []
    assert feed(b, 0.0, "F") == [Transition(CLOSED, OPEN, 0.0, "failure_rate")]  # 2 / 4


def test_failure_rate_threshold_is_not_spoiled_by_float_rounding() -> None:
    # 0.3 * 10 is 3.0000000000000004: a product would miss "3 of 10 is 30 %".
    b = rated(window_size=10, minimum_calls=10, failure_rate=0.3)
    assert feed(b, 0.0, "SSSSSSSFF") == []
    assert feed(b, 0.0, "F") == [Transition(CLOSED, OPEN, 0.0, "failure_rate")]


def test_failure_rate_just_below_the_threshold_stays_closed() -> None:
    b = rated(window_size=4, minimum_calls=4, failure_rate=0.51)
    assert feed(b, 0.0, "SSFF" * 5) == []
    assert b.state is CLOSED


def test_count_window_evicts_the_oldest_call() -> None:
    b = rated(window_size=3, minimum_calls=3, failure_rate=1.0)
    assert feed(b, 0.0, "FFS") == []
    assert feed(b, 1.0, "F") == []  # [F S F]
    assert feed(b, 2.0, "F") == []  # [S F F]: the success is still in
    assert feed(b, 3.0, "F") == [Transition(CLOSED, OPEN, 3.0, "failure_rate")]  # [F F F]


def test_count_window_minimum_is_capped_at_its_size() -> None:
    # resilience4j: a full count window can always be judged.
    b = rated(window_size=3, minimum_calls=100, failure_rate=1.0)
    assert feed(b, 0.0, "FF") == []
    assert feed(b, 0.0, "F") == [Transition(CLOSED, OPEN, 0.0, "failure_rate")]


def test_time_window_drops_calls_older_than_its_size() -> None:
    b = rated(window="time", window_size=10.0, minimum_calls=3, failure_rate=1.0)
    assert b.record_failure(0.0) == []
    assert b.record_failure(1.0) == []
    assert b.record_failure(10.5) == []  # the call at 0 has left: 2 calls in the window
    assert b.record_failure(10.6) == [Transition(CLOSED, OPEN, 10.6, "failure_rate")]


def test_time_window_boundary_is_exact() -> None:
    cfg = {"window": "time", "window_size": 10.0, "minimum_calls": 3, "failure_rate": 1.0}
    inside, outside = rated(**cfg), rated(**cfg)
    for b in (inside, outside):
        b.record_failure(0.0)
        b.record_failure(5.0)
    # A call recorded at 0 is in the window until just before 10, not at 10.
    assert inside.record_failure(9.999) == [Transition(CLOSED, OPEN, 9.999, "failure_rate")]
    assert outside.record_failure(10.0) == []


def test_time_window_has_no_call_limit_but_needs_its_minimum() -> None:
    b = rated(window="time", window_size=60.0, minimum_calls=20, failure_rate=0.5)
    assert feed(b, 1.0, "S" * 10 + "F" * 9) == []  # 19 calls: not judged yet
    assert feed(b, 2.0, "F") == [Transition(CLOSED, OPEN, 2.0, "failure_rate")]  # 10 / 20


def test_slow_calls_are_counted_by_duration() -> None:
    b = rated(slow_call_s=2.0, slow_call_rate=0.5, failure_rate=1.0)
    assert b.record(0.0, True, 2.0) == []  # exactly at the threshold: not slow
    assert b.record(0.0, True, 2.0) == []
    assert b.record(0.0, True, 0.1) == []
    assert b.record(0.0, True, 2.5) == []  # 1 slow of 4
    # [2.0, 0.1, 2.5, 30.0]: 2 slow of 4.
    assert b.record(0.0, True, 30.0) == [Transition(CLOSED, OPEN, 0.0, "slow_call_rate")]


def test_slow_calls_count_whether_they_fail_or_not() -> None:
    b = rated(slow_call_s=1.0, slow_call_rate=1.0, failure_rate=1.0)
    assert b.record(0.0, False, 5.0) == []
    assert b.record(0.0, True, 5.0) == []
    assert b.record(0.0, False, 5.0) == []
    # 3 of 4 failed (below 100 %), 4 of 4 slow: the slow-call rate opens.
    assert b.record(0.0, True, 5.0) == [Transition(CLOSED, OPEN, 0.0, "slow_call_rate")]


def test_the_failure_rate_wins_when_both_thresholds_are_reached() -> None:
    b = rated(slow_call_s=1.0, slow_call_rate=0.5)
    assert feed(b, 0.0, "FFF", duration=5.0) == []
    assert feed(b, 0.0, "F", duration=5.0) == [Transition(CLOSED, OPEN, 0.0, "failure_rate")]


def test_without_a_slow_call_threshold_durations_never_open() -> None:
    b = rated(failure_rate=1.0, slow_call_rate=0.1)
    assert feed(b, 0.0, "SSSSSSSS", duration=10_000.0) == []
    assert b.state is CLOSED


def test_rate_window_half_open_probes_succeeding_close() -> None:
    b = rated(half_open_probes=3, minimum_calls=4)
    feed(b, 0.0, "FFFF")
    assert [b.allow(10.0).allowed for _ in range(3)] == [True, True, True]
    assert b.record_success(11.0) == []
    assert b.record_failure(11.0) == []
    # 1 failure in 3 probes is below 50 %: healthy.
    assert b.record_success(12.0) == [Transition(HALF, CLOSED, 12.0, "probes_succeeded")]
    # Closing starts an empty window: the old failures are gone and the minimum counts
    # again.
    assert feed(b, 13.0, "FFF") == []
    assert feed(b, 13.0, "F") == [Transition(CLOSED, OPEN, 13.0, "failure_rate")]


def test_rate_window_half_open_probes_failing_reopen_with_a_fresh_wait() -> None:
    b = rated(half_open_probes=3, minimum_calls=4)
    feed(b, 0.0, "FFFF")
    for _ in range(3):
        assert b.allow(10.0).allowed
    assert b.record_failure(11.0) == []
    assert b.record_success(11.5) == []
    assert b.record_failure(12.0) == [Transition(HALF, OPEN, 12.0, "failure_rate")]  # 2 / 3
    assert b.allow(21.5) == BreakerDecision(False, OPEN, 0.5)  # from 12, not from 0
    assert b.allow(21.5).reason == "open"
    assert b.allow(22.0).transitions == (Transition(OPEN, HALF, 22.0, "cooldown_elapsed"),)


def test_rate_window_half_open_decides_after_the_minimum_when_it_is_smaller() -> None:
    b = rated(half_open_probes=4, minimum_calls=4)
    feed(b, 0.0, "FFFF")
    b2 = rated(half_open_probes=4, minimum_calls=2, window_size=2)
    feed(b2, 0.0, "FF")
    for breaker in (b, b2):
        for _ in range(4):
            assert breaker.allow(10.0).allowed
        assert breaker.record_failure(11.0) == []
    # b2 needs only 2 probe outcomes; b waits for all 4.
    assert b2.record_failure(11.0) == [Transition(HALF, OPEN, 11.0, "failure_rate")]
    assert b.record_failure(11.0) == []
    assert b.state is HALF


def test_rate_window_half_open_judges_slow_probes() -> None:
    b = rated(half_open_probes=2, slow_call_s=1.0, slow_call_rate=0.5)
    feed(b, 0.0, "FFFF")
    assert b.allow(10.0).allowed and b.allow(10.0).allowed
    assert b.record(11.0, True, 0.5) == []
    assert b.record(12.0, True, 3.0) == [Transition(HALF, OPEN, 12.0, "slow_call_rate")]


def test_half_open_refuses_calls_beyond_the_permitted_probes() -> None:
    for b in (make(threshold=1, cooldown=10.0, probes=2), rated(half_open_probes=2)):
        feed(b, 0.0, "FFFF")
        decisions = [b.allow(10.0) for _ in range(3)]
        assert [d.allowed for d in decisions] == [True, True, False]
        assert [d.reason for d in decisions] == ["probe", "probe", "half_open_full"]
        assert decisions[2] == BreakerDecision(False, HALF, None)


def test_release_permission_gives_a_half_open_probe_back() -> None:
    b = make(threshold=1, cooldown=5.0, probes=1)
    b.release_permission()  # closed: nothing to give back
    b.record_failure(0.0)
    b.release_permission()  # open: likewise
    assert b.allow(5.0).allowed
    assert not b.allow(5.0).allowed
    b.release_permission()  # the probe never went out (a limiter refused it)
    b.release_permission()  # a second release gives back nothing more
    assert [b.allow(6.0).allowed for _ in range(2)] == [True, False]
    assert b.record_success(7.0) == [Transition(HALF, CLOSED, 7.0, "probes_succeeded")]


def test_a_probe_granted_and_an_ordinary_call_say_so() -> None:
    b = make(threshold=1, cooldown=5.0)
    assert b.allow(0.0).reason is None
    b.record_failure(0.0)
    assert b.allow(1.0).reason == "open"
    assert b.allow(5.0).reason == "probe"


def test_forced_open_refuses_everything_and_never_moves() -> None:
    b = CircuitBreaker(BreakerConfig(state="forced_open", cooldown_s=0.0))
    assert b.state is BreakerState.FORCED_OPEN
    for t in range(5):
        d = b.allow(float(t) * 1000)
        assert d == BreakerDecision(False, BreakerState.FORCED_OPEN, None)
        assert d.reason == "forced_open"
        assert b.record_success(float(t)) == []
    assert b.state is BreakerState.FORCED_OPEN


def test_disabled_state_allows_everything_and_records_nothing() -> None:
    b = CircuitBreaker(BreakerConfig(state="disabled", failure_threshold=1))
    for t in range(5):
        assert b.record_failure(float(t)) == []
        assert b.allow(float(t)) == BreakerDecision(True, BreakerState.DISABLED, None)
    assert b.state is BreakerState.DISABLED
    assert b.consecutive_failures == 0


def test_max_half_open_reopens_a_breaker_stuck_half_open() -> None:
    b = CircuitBreaker(
        BreakerConfig(failure_threshold=1, cooldown_s=10.0, half_open_probes=2, max_half_open_s=5.0)
    )
    b.record_failure(0.0)
    assert b.allow(10.0).allowed  # one probe out of two; the other never comes
    d = b.allow(16.0)
    assert d.transitions == (Transition(HALF, OPEN, 15.0, "half_open_timeout"),)
    # Dated when the limit ran out, so the fresh cooldown counts from 15.
    assert d == BreakerDecision(False, OPEN, 9.0, d.transitions)
    assert b.opened_at == 15.0
    assert b.record_success(16.0) == []  # the lost probe's late answer is stale
    assert b.state is OPEN


def test_max_half_open_noticed_late_can_go_straight_back_to_half_open() -> None:
    b = rated(half_open_probes=3, max_half_open_s=5.0)
    feed(b, 0.0, "FFFF")
    assert b.allow(10.0).allowed
    d = b.allow(40.0)
    assert d.transitions == (
        Transition(HALF, OPEN, 15.0, "half_open_timeout"),
        Transition(OPEN, HALF, 40.0, "cooldown_elapsed"),
    )
    assert d.allowed and d.reason == "probe"


def test_max_half_open_noticed_by_record() -> None:
    b = CircuitBreaker(BreakerConfig(failure_threshold=1, cooldown_s=10.0, max_half_open_s=5.0))
    b.record_failure(0.0)
    assert b.allow(10.0).allowed
    assert b.record_success(14.9) == [Transition(HALF, CLOSED, 14.9, "probes_succeeded")]
    b.record_failure(20.0)
    assert b.allow(30.0).allowed
    assert b.record_success(35.0) == [Transition(HALF, OPEN, 35.0, "half_open_timeout")]


def test_without_max_half_open_a_breaker_waits_half_open_for_ever() -> None:
    b = make(threshold=1, cooldown=10.0, probes=2)
    b.record_failure(0.0)
    assert b.allow(10.0).allowed
    assert b.allow(1e6).allowed  # the second probe, a long time later
    assert b.state is HALF


def test_bank_records_outcomes_with_durations() -> None:
    bank = BreakerBank(
        BreakerConfig(window="count", window_size=2, minimum_calls=2, slow_call_s=1.0)
    )
    assert bank.record("search", 0.0, True, 5.0) == []
    assert bank.record("search", 0.0, True, 5.0) == [
        Transition(CLOSED, OPEN, 0.0, "slow_call_rate")
    ]
    assert bank.states() == {("search", None): OPEN}
    bank.release_permission("search")  # open: nothing to give back
    assert bank.states() == {("search", None): OPEN}


@pytest.mark.parametrize(
    "data",
    [
        {"window": "count", "window_size": 2.5},
        {"window": "sliding"},
        {"window_size": 0},
        {"failure_rate": 0.0},
        {"failure_rate": 1.5},
        {"slow_call_rate": 0.0},
        {"minimum_calls": 0},
        {"slow_call_s": 0.0, "window": "count"},
        {"slow_call_s": 1.0},  # a consecutive window has no use for durations
        {"max_half_open_s": 0.0},
        {"state": "forced_closed"},
        {"state": "forced_open", "enabled": False},
        {"scope": "forever"},
    ],
)
def test_invalid_window_settings_are_rejected(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        BreakerConfig.model_validate(data)


def test_valid_window_settings_build() -> None:
    cfg = BreakerConfig.model_validate(
        {"window": "time", "window_size": 2.5, "slow_call_s": 1.0, "scope": "run"}
    )
    assert (cfg.window, cfg.window_size, cfg.scope) == ("time", 2.5, "run")
    assert BreakerConfig.model_validate({"window": "count", "window_size": 20}).window_size == 20


# --- properties of the rate windows ---------------------------------------------

rate_configs = st.builds(
    BreakerConfig,
    window=st.sampled_from(["count", "time"]),
    window_size=st.integers(1, 6).map(float),
    failure_rate=st.sampled_from([0.2, 0.5, 0.75, 1.0]),
    minimum_calls=st.integers(1, 6),
    slow_call_s=st.sampled_from([None, 1.0]),
    slow_call_rate=st.sampled_from([0.5, 1.0]),
    cooldown_s=st.floats(0.0, 20.0),
    half_open_probes=st.integers(1, 4),
    max_half_open_s=st.sampled_from([None, 3.0]),
)
outcomes = st.lists(
    st.tuples(st.booleans(), st.sampled_from([0.0, 0.5, 2.0]), st.floats(0.0, 3.0)),
    max_size=60,
)


def _oracle(cfg: BreakerConfig, calls: list[tuple[float, bool, float]], now: float) -> str | None:
    """What the window should say, from the whole history since the breaker closed."""
    if cfg.window == "count":
        window = calls[-int(cfg.window_size) :]
        minimum = min(cfg.minimum_calls, int(cfg.window_size))
    else:
        window = [c for c in calls if now - c[0] < cfg.window_size]
        minimum = cfg.minimum_calls
    if not window or len(window) < minimum:
        return None
    if sum(not ok for _, ok, _ in window) / len(window) >= cfg.failure_rate:
        return "failure_rate"
    if cfg.slow_call_s is not None:
        slow = sum(d > cfg.slow_call_s for _, _, d in window)
        if slow / len(window) >= cfg.slow_call_rate:
            return "slow_call_rate"
    return None


@settings(max_examples=300)
@given(cfg=rate_configs, script=outcomes)
def test_a_closed_rate_window_opens_exactly_when_the_oracle_says(
    cfg: BreakerConfig, script: list[tuple[bool, float, float]]
) -> None:
    b = CircuitBreaker(cfg)
    now, calls = 0.0, []
    for ok, duration, dt in script:
        now += dt
        calls.append((now, ok, duration))
        transitions = b.record(now, ok, duration)
        expected = _oracle(cfg, calls, now)
        assert [t.reason for t in transitions] == ([expected] if expected else [])
        if expected:
            assert transitions == [Transition(CLOSED, OPEN, now, expected)]
            return


rate_ops = st.lists(
    st.tuples(
        st.sampled_from(["allow", "ok", "fail", "slow"]),
        st.floats(0.0, 8.0),
    ),
    max_size=80,
)


@settings(max_examples=300)
@given(cfg=rate_configs, script=rate_ops)
def test_rate_windows_follow_the_diagram_and_the_probe_allowance(
    cfg: BreakerConfig, script: list[tuple[str, float]]
) -> None:
    legal = {(CLOSED, OPEN), (OPEN, HALF), (HALF, OPEN), (HALF, CLOSED)}
    b = CircuitBreaker(cfg)
    state, now, probes = CLOSED, 0.0, 0
    for op, dt in script:
        now += dt
        if op == "allow":
            d = b.allow(now)
            transitions = list(d.transitions)
            if any(t.to is HALF for t in transitions):
                probes = 0
            if d.allowed and d.state is HALF:
                probes += 1
                assert probes <= cfg.half_open_probes
            if d.state is OPEN:
                assert not d.allowed and d.retry_in_s is not None and d.retry_in_s > 0
        else:
            transitions = b.record(now, op == "ok", 5.0 if op == "slow" else 0.0)
        for t in transitions:
            assert t.frm is state and (t.frm, t.to) in legal
            assert t.at <= now
            if t.reason == "half_open_timeout":
                assert cfg.max_half_open_s is not None
            state = t.to
        assert b.state is state
