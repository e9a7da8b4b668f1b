"""The client-side rate limiter (resilience4j's fixed cycles), on a fake clock."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errorflow.policies.config import LimiterConfig
from errorflow.policies.rate_limiter import LimiterDecision, RateLimiter, RateLimiterBank


def make(limit: int = 3, period: float = 1.0, timeout: float = 0.0) -> RateLimiter:
    return RateLimiter(
        LimiterConfig(
            enabled=True, limit_for_period=limit, refresh_period_s=period, timeout_s=timeout
        )
    )


def test_off_by_default_allows_everything_at_once() -> None:
    limiter = RateLimiter(LimiterConfig())
    assert not limiter.config.enabled
    assert all(limiter.acquire(0.0) == (True, 0.0) for _ in range(1000))
    assert limiter.next_permit_in(0.0) == 0.0


def test_permits_per_cycle_then_refused_without_a_timeout() -> None:
    limiter = make(limit=3)
    assert [limiter.acquire(0.2) for _ in range(3)] == [LimiterDecision(True, 0.0)] * 3
    assert limiter.acquire(0.9) == LimiterDecision(False, 0.0)
    assert limiter.available(0.9) == 0
    assert limiter.next_permit_in(0.9) == pytest.approx(0.1)
    assert limiter.acquire(1.0) == (True, 0.0)  # a new cycle, a new allowance


def test_unused_permits_do_not_carry_over() -> None:
    limiter = make(limit=3)
    assert limiter.available(50.0) == 3  # 50 idle cycles still give only 3
    assert [limiter.acquire(50.0).allowed for _ in range(4)] == [True, True, True, False]


def test_a_wait_within_the_timeout_reserves_a_permit_of_a_later_cycle() -> None:
    limiter = make(limit=2, period=1.0, timeout=2.0)
    got = [limiter.acquire(0.25) for _ in range(6)]
    assert [d.allowed for d in got] == [True] * 6
    assert [d.wait_s for d in got] == pytest.approx([0.0, 0.0, 0.75, 0.75, 1.75, 1.75])
    assert limiter.available(0.25) == -4  # four reserved ahead
    # The next would wait 2.75 s > 2 s: refused after the whole timeout, nothing reserved.
    assert limiter.acquire(0.25) == LimiterDecision(False, 2.0)
    assert limiter.available(0.25) == -4
    assert limiter.next_permit_in(0.25) == pytest.approx(2.75)


def test_a_wait_of_exactly_the_timeout_is_allowed() -> None:
    limiter = make(limit=1, period=1.0, timeout=1.0)
    assert limiter.acquire(0.0) == (True, 0.0)
    assert limiter.acquire(0.0) == (True, 1.0)
    assert limiter.acquire(0.0) == (False, 1.0)


def test_a_caller_that_waits_its_wait_finds_its_cycle_begun() -> None:
    limiter = make(limit=1, period=0.1, timeout=1.0)
    now = 0.0
    seen = []
    for _ in range(5):
        allowed, wait = limiter.acquire(now)
        assert allowed
        now += wait
        seen.append(math.floor(now / 0.1 + 1e-9))
    assert seen == [0, 1, 2, 3, 4]  # one call per cycle, no cycle skipped or doubled


def test_a_boundary_a_rounding_error_away_counts_as_the_new_cycle() -> None:
    limiter = make(limit=1, period=0.1)
    assert limiter.acquire(0.2).allowed
    assert limiter.acquire(0.3).allowed  # 0.3 / 0.1 == 2.9999999999999996


def test_going_back_in_time_returns_no_permits() -> None:
    limiter = make(limit=1)
    assert limiter.acquire(5.5).allowed
    assert limiter.acquire(2.0) == (False, 0.0)  # an earlier clock is still in cycle 5
    assert limiter.acquire(6.0).allowed


def test_several_permits_at_once() -> None:
    limiter = make(limit=3, timeout=5.0)
    assert limiter.acquire(0.0, permits=2) == (True, 0.0)
    assert limiter.acquire(0.0, permits=2) == (True, 1.0)  # one now is not enough
    assert limiter.available(1.0) == 2
    with pytest.raises(ValueError, match="permits"):
        limiter.acquire(0.0, permits=0)


def test_bank_keys_by_tool_and_optionally_by_argument_pattern() -> None:
    cfg = LimiterConfig(enabled=True, limit_for_period=1, timeout_s=0.0)
    bank = RateLimiterBank(cfg)
    assert bank.acquire("search", 0.0, "a").allowed
    assert not bank.acquire("search", 0.0, "b").allowed
    assert bank.acquire("fetch", 0.0).allowed
    per_arg = RateLimiterBank(cfg.model_copy(update={"per_argument": True}))
    assert per_arg.acquire("search", 0.0, "a").allowed
    assert per_arg.acquire("search", 0.0, "b").allowed


# --- properties -------------------------------------------------------------------


@settings(max_examples=300)
@given(
    limit=st.integers(1, 4),
    period=st.sampled_from([0.1, 0.5, 1.0, 3.0]),
    timeout=st.sampled_from([0.0, 0.5, 2.0, 10.0]),
    gaps=st.lists(st.floats(0.0, 2.0), max_size=60),
)
def test_no_cycle_ever_gets_more_calls_than_the_limit(
    limit: int, period: float, timeout: float, gaps: list[float]
) -> None:
    limiter = make(limit=limit, period=period, timeout=timeout)
    now = 0.0
    per_cycle: Counter[int] = Counter()
    for gap in gaps:
        now += gap
        allowed, wait = limiter.acquire(now)
        if allowed:
            assert 0.0 <= wait <= timeout
            per_cycle[math.floor((now + wait) / period + 1e-9)] += 1
        else:
            assert wait == timeout
            assert limiter.next_permit_in(now) > timeout
    assert all(n <= limit for n in per_cycle.values())
