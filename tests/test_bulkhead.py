"""Bulkheads: concurrent-call permits and a FIFO queue of waiters, on a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errorflow.policies.bulkhead import Bulkhead, BulkheadBank, BulkheadDecision
from errorflow.policies.config import BulkheadConfig


def make(limit: int = 2, wait: float = 0.0) -> Bulkhead:
    return Bulkhead(BulkheadConfig(enabled=True, max_concurrent_calls=limit, max_wait_s=wait))


def test_off_by_default_allows_everything_and_counts_nothing() -> None:
    b = Bulkhead(BulkheadConfig())
    assert not b.config.enabled
    for _ in range(100):
        assert b.try_acquire(0.0) == BulkheadDecision(True, 0.0, 0)
    assert b.release(0.0) is None
    assert b.in_flight == 0


def test_permits_up_to_the_limit_then_rejects_at_once() -> None:
    b = make(limit=2)
    assert b.try_acquire(0.0) == BulkheadDecision(True, 0.0, 1)
    assert b.try_acquire(0.0) == BulkheadDecision(True, 0.0, 2)
    assert b.try_acquire(0.5) == BulkheadDecision(False, 0.0, 2, "bulkhead_full")
    assert b.waiting == 0  # no wait configured: nobody queues
    assert b.release(1.0) is None
    assert b.in_flight == 1
    assert b.try_acquire(1.0).allowed


def test_release_without_a_permit_is_an_error() -> None:
    b = make()
    with pytest.raises(ValueError, match="without a permit"):
        b.release(0.0)


def test_a_full_bulkhead_queues_and_release_hands_the_permit_to_the_oldest() -> None:
    b = make(limit=1, wait=5.0)
    assert b.try_acquire(0.0).allowed
    first = b.try_acquire(1.0)
    second = b.try_acquire(2.0)
    assert first == BulkheadDecision(False, 5.0, 1, "queued", 0)
    assert second == BulkheadDecision(False, 5.0, 1, "queued", 1)
    assert b.waiting == 2
    assert b.poll(0, 3.0) == BulkheadDecision(False, 3.0, 1, "queued", 0)  # 3 s left
    assert b.release(3.5) == 0  # the permit passes straight to the first waiter
    assert b.in_flight == 1
    assert b.poll(0, 3.5) == BulkheadDecision(True, 2.5, 1, None, 0)  # waited 1 -> 3.5
    with pytest.raises(KeyError):
        b.poll(0, 3.5)  # a settled ticket is forgotten once polled
    assert b.release(4.0) == 1
    assert b.poll(1, 4.0).allowed
    assert b.release(4.5) is None
    assert (b.in_flight, b.waiting) == (0, 0)


def test_a_newcomer_cannot_overtake_the_queue() -> None:
    b = make(limit=1, wait=5.0)
    b.try_acquire(0.0)
    waiter = b.try_acquire(0.0)
    assert b.release(1.0) == waiter.ticket
    assert b.try_acquire(1.0).reason == "queued"  # the freed permit went to the waiter


def test_a_waiter_is_rejected_at_its_deadline() -> None:
    b = make(limit=1, wait=5.0)
    b.try_acquire(0.0)
    ticket = b.try_acquire(1.0).ticket
    assert ticket is not None
    assert b.poll(ticket, 5.999).reason == "queued"
    assert b.poll(ticket, 6.0) == BulkheadDecision(False, 5.0, 1, "bulkhead_full", ticket)
    assert b.waiting == 0


def test_a_release_after_the_deadline_does_not_grant_the_expired_waiter() -> None:
    b = make(limit=1, wait=2.0)
    b.try_acquire(0.0)
    late = b.try_acquire(0.0).ticket
    assert late is not None
    assert b.release(2.0) is None  # at the deadline the wait is over
    assert b.in_flight == 0
    assert b.poll(late, 2.0).reason == "bulkhead_full"


def test_an_expired_waiter_makes_room_for_the_next() -> None:
    b = make(limit=1, wait=2.0)
    b.try_acquire(0.0)
    old = b.try_acquire(0.0).ticket
    young = b.try_acquire(1.5).ticket
    assert b.release(2.5) == young  # the first waiter's deadline (2.0) has passed
    assert old is not None and b.poll(old, 2.5).reason == "bulkhead_full"
    assert young is not None and b.poll(young, 2.5) == BulkheadDecision(True, 1.0, 1, None, young)


def test_cancel_withdraws_a_waiter_or_says_it_already_holds_a_permit() -> None:
    b = make(limit=1, wait=5.0)
    b.try_acquire(0.0)
    a, c = b.try_acquire(0.0).ticket, b.try_acquire(0.0).ticket
    assert a is not None and c is not None
    assert b.cancel(c) is True
    assert b.waiting == 1
    assert b.release(1.0) == a
    assert b.cancel(a) is False  # granted: it holds the permit and must release it
    assert b.in_flight == 1
    with pytest.raises(KeyError):
        b.cancel(99)


def test_bank_keys_by_tool_and_optionally_by_argument_pattern() -> None:
    bank = BulkheadBank(BulkheadConfig(enabled=True, max_concurrent_calls=1))
    assert bank.try_acquire("search", 0.0, "a").allowed
    assert not bank.try_acquire("search", 0.0, "b").allowed  # same tool, one permit
    assert bank.try_acquire("fetch", 0.0).allowed
    assert bank.release("search", 1.0) is None
    per_arg = BulkheadBank(BulkheadConfig(enabled=True, max_concurrent_calls=1, per_argument=True))
    assert per_arg.try_acquire("search", 0.0, "a").allowed
    assert per_arg.try_acquire("search", 0.0, "b").allowed
    assert per_arg.get("search", "a") is per_arg.get("search", "a")


def test_the_time_left_never_passes_the_wait_by_a_rounding() -> None:
    b = make(limit=1, wait=1.0)
    at = 31.974112581947335  # (at + 1.0) - at == 1.0000000000000036
    assert b.try_acquire(at).allowed
    queued = b.try_acquire(at)
    assert queued.reason == "queued" and queued.ticket is not None
    assert b.poll(queued.ticket, at).wait_s == 1.0


# --- properties -------------------------------------------------------------------

scripts = st.lists(
    st.tuples(st.sampled_from(["acquire", "release", "poll"]), st.floats(0.0, 2.0)),
    max_size=80,
)


@settings(max_examples=300)
@given(limit=st.integers(1, 3), wait=st.sampled_from([0.0, 1.0, 3.0]), script=scripts)
def test_never_more_in_flight_than_the_limit_and_every_ticket_settles_once(
    limit: int, wait: float, script: list[tuple[str, float]]
) -> None:
    b = make(limit=limit, wait=wait)
    now, held, queued = 0.0, 0, set()
    for op, dt in script:
        now += dt
        if op == "acquire":
            d = b.try_acquire(now)
            held += d.allowed
            if d.reason == "queued":
                assert d.ticket is not None and d.wait_s == wait
                queued.add(d.ticket)
        elif op == "release" and held:
            b.release(now)
            held -= 1
        elif op == "poll" and queued:
            ticket = min(queued)
            d = b.poll(ticket, now)
            assert 0.0 <= d.wait_s <= wait
            if d.reason != "queued":
                queued.discard(ticket)
                held += d.allowed
        assert 0 <= b.in_flight <= limit
        assert b.waiting == 0 or b.in_flight == limit  # never a free permit and a queue
        # Permits held by callers who know it, plus those granted but not yet polled.
        assert held <= b.in_flight
