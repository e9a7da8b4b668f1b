"""The shared rate limiter, on a fake clock: what it lets through, and when."""

from __future__ import annotations

import asyncio

import pytest

from errorflow.models.rate_limit import (
    BACKOFF_MAX_S,
    MAX_PAUSE_S,
    RateLimiter,
    RateLimits,
    reset_delay,
)
from tests.fake_time import FakeTime


def limiter(time: FakeTime, **limits: float) -> RateLimiter:
    given = RateLimits(**limits)  # type: ignore[arg-type]
    return RateLimiter(given, clock=time.clock, sleep=time.sleep, wall=time.wall)


async def test_no_more_than_the_concurrency_in_flight() -> None:
    time = FakeTime()
    lim = limiter(time, concurrency=3)
    inside = 0
    peak = 0

    async def request() -> None:
        nonlocal inside, peak
        async with lim.slot(10):
            inside += 1
            peak = max(peak, inside)
            await time.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(request() for _ in range(40)))
    assert peak == 3 and lim.stats.peak_in_flight == 3
    assert lim.stats.requests == 40 and lim.in_flight == 0


async def test_a_cancelled_waiter_hands_its_place_on() -> None:
    time = FakeTime()
    lim = limiter(time, concurrency=1)
    release = asyncio.Event()

    async def holder() -> None:
        async with lim.slot(1):
            await release.wait()

    first = asyncio.create_task(holder())
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(holder()) for _ in range(2)]
    await asyncio.sleep(0)
    release.set()
    waiting[0].cancel()  # woken, then cancelled before it ran: the place goes to the next
    await asyncio.wait_for(asyncio.gather(first, waiting[1]), timeout=5)
    assert lim.in_flight == 0


async def test_requests_a_minute_are_spread_out() -> None:
    time = FakeTime()
    lim = limiter(time, requests_per_minute=60)  # a bucket of 60, one more a second
    for _ in range(60):
        async with lim.slot(1):
            pass
    assert time.slept == []  # the bucket starts full
    async with lim.slot(1):
        pass
    assert sum(time.slept) == pytest.approx(1.0)
    assert lim.stats.paced_s == pytest.approx(1.0)


async def test_tokens_a_minute_count_what_a_reply_really_used() -> None:
    time = FakeTime()
    lim = limiter(time, tokens_per_minute=6000)  # 100 tokens a second
    async with lim.slot(1000):
        pass
    lim.settle(estimated=1000, used=6000)  # the reply used the whole minute's worth
    async with lim.slot(500):
        pass
    assert sum(time.slept) == pytest.approx(5.0)  # 500 tokens at 100 a second


async def test_a_request_not_sent_uses_nothing_and_is_not_counted() -> None:
    time = FakeTime()
    lim = limiter(time, requests_per_minute=1, tokens_per_minute=600)
    async with lim.slot(600):
        lim.unsent(600)  # held past its timeout (errorflow/models/busy_server.py)
    async with lim.slot(600):
        pass
    assert time.slept == [] and lim.stats.requests == 1  # the bucket was whole again


async def test_a_request_larger_than_a_minute_costs_at_most_a_minute_of_debt() -> None:
    time = FakeTime()
    lim = limiter(time, tokens_per_minute=600)
    async with lim.slot(100_000):
        pass
    async with lim.slot(100_000):
        pass
    assert sum(time.slept) == pytest.approx(120.0)  # the debt (600), then a full bucket


async def test_a_429_pauses_everyone_for_its_retry_after_then_backs_off() -> None:
    time = FakeTime()
    lim = limiter(time)
    assert lim.rate_limited(3.0) == 3.0
    async with lim.slot(1):
        pass
    assert time.slept == [3.0]
    assert [lim.rate_limited(None) for _ in range(8)] == [2, 4, 8, 16, 32, 32, 32, 32]
    lim.settle(0, 0)  # a reply: the next 429 without retry-after starts again at 1 s
    assert lim.rate_limited(None) == 1.0
    assert lim.rate_limited(10_000) == MAX_PAUSE_S
    assert lim.stats.rate_limited == 11 and BACKOFF_MAX_S == 32


async def test_headers_of_a_spent_budget_pause_until_its_reset() -> None:
    time = FakeTime()
    lim = limiter(time)
    reset = "2027-01-15T08:00:04Z"
    wall = reset_delay(reset, 0.0)
    assert wall is not None
    time.wall_at_start = wall - 4.0  # the reset is 4 s from now
    lim.observe(
        {
            "anthropic-ratelimit-input-tokens-remaining": "0",
            "anthropic-ratelimit-input-tokens-reset": reset,
            "anthropic-ratelimit-requests-remaining": "17",
            "anthropic-ratelimit-requests-reset": reset,
        }
    )
    async with lim.slot(1):
        pass
    assert time.slept == [pytest.approx(4.0)]


async def test_the_requests_headers_teach_a_limit_not_given() -> None:
    time = FakeTime()
    lim = limiter(time)
    lim.observe(
        {"anthropic-ratelimit-requests-limit": "60", "anthropic-ratelimit-requests-remaining": "1"}
    )
    for _ in range(2):
        async with lim.slot(1):
            pass
    assert sum(time.slept) == pytest.approx(1.0)  # one left, then one a second


def test_unreadable_headers_and_limits() -> None:
    lim = RateLimiter()
    lim.observe({"anthropic-ratelimit-requests-remaining": "soon"})
    spent = {"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": "x"}
    lim.observe(spent)
    assert reset_delay("2027-01-15T08:00:04", 0.0) is None  # no time zone: not trusted
    with pytest.raises(ValueError, match="concurrency"):
        RateLimits(concurrency=0)
