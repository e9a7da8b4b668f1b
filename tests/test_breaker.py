"""Circuit breaker state machine, driven by a fake clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

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
