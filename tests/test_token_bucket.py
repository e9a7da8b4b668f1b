"""The token bucket a service answers 429 from, with an honest Retry-After."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errorflow.policies.token_bucket import Take, TokenBucket


def test_starts_full_and_refuses_when_empty_with_the_time_to_refill() -> None:
    bucket = TokenBucket(3, 2.0)  # 3 tokens, 2 per second
    assert [bucket.take(0.0) for _ in range(3)] == [Take(True, 0.0)] * 3
    assert bucket.take(0.0) == Take(False, 0.5)  # one token takes half a second
    assert bucket.take(0.25) == Take(False, 0.25)
    assert bucket.take(0.5) == Take(True, 0.0)


def test_a_refused_take_takes_nothing() -> None:
    bucket = TokenBucket(2, 1.0, tokens=0.5)
    assert bucket.take(0.0, 2) == Take(False, 1.5)
    assert bucket.level(0.0) == 0.5
    assert bucket.take(0.0, 0.5).ok


def test_refill_is_continuous_and_capped_at_capacity() -> None:
    bucket = TokenBucket(10, 4.0, tokens=0.0)
    assert bucket.level(0.5) == pytest.approx(2.0)
    assert bucket.level(100.0) == 10.0
    assert bucket.utilisation(0.5) == pytest.approx(0.8)
    assert bucket.utilisation(100.0) == 0.0
    assert [bucket.take(100.0).ok for _ in range(11)] == [True] * 10 + [False]


def test_waiting_exactly_the_retry_after_finds_the_tokens() -> None:
    bucket = TokenBucket(5, 0.3, tokens=0.1, start=7.0)
    ok, retry_after = bucket.take(7.0, 3)
    assert not ok
    assert bucket.take(7.0 + retry_after, 3).ok


def test_going_back_in_time_refills_nothing() -> None:
    bucket = TokenBucket(1, 1.0, start=10.0)
    assert bucket.take(10.0).ok
    assert bucket.take(5.0) == Take(False, 1.0)  # an earlier clock: still empty
    assert bucket.level(10.5) == pytest.approx(0.5)  # and the last time stayed 10


@pytest.mark.parametrize(
    ("args", "n"), [((0, 1.0), 1), ((1, 0.0), 1), ((2, 1.0), 3), ((2, 1.0), 0)]
)
def test_impossible_buckets_and_takes_are_errors(args: tuple[float, float], n: float) -> None:
    with pytest.raises(ValueError):
        TokenBucket(*args).take(0.0, n)


def test_initial_tokens_are_clamped_into_the_bucket() -> None:
    assert TokenBucket(2, 1.0, tokens=9).level(0.0) == 2
    assert TokenBucket(2, 1.0, tokens=-1).level(0.0) == 0


# --- properties -------------------------------------------------------------------

takes = st.lists(st.tuples(st.floats(0.0, 3.0), st.sampled_from([0.5, 1.0, 2.0])), max_size=60)


@settings(max_examples=300)
@given(
    capacity=st.sampled_from([2.0, 3.0, 10.0]),
    rate=st.sampled_from([0.1, 0.3, 1.0, 7.0]),
    script=takes,
)
def test_never_more_taken_than_capacity_plus_refill_and_retry_after_is_honest(
    capacity: float, rate: float, script: list[tuple[float, float]]
) -> None:
    bucket = TokenBucket(capacity, rate)
    now, taken = 0.0, 0.0
    for gap, n in script:
        now += gap
        ok, retry_after = bucket.take(now, n)
        if ok:
            taken += n
            assert retry_after == 0.0
        else:
            assert retry_after > 0.0
            # The promise holds: nobody else takes, so the tokens are there then.
            probe = TokenBucket(capacity, rate, tokens=bucket.level(now), start=now)
            assert probe.take(now + retry_after, n).ok
        assert 0.0 <= bucket.level(now) <= capacity
        assert taken <= capacity + rate * now + 1e-6
