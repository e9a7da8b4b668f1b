"""The wait for a model server after a request to it timed out (errorflow/models/busy_server.py):
requests held until the server answers a ping, each within its own timeout (sent with
what is left, or not at all when less is left than a reply takes); one wait however many
requests time out; a wait joined, not doubled; nothing bound to a loop that has ended."""

from __future__ import annotations

import asyncio

import pytest

from errorflow.models.busy_server import BusyServer


class Server:
    """A ping the test answers: `answer(None)` (free) or `answer("why")`."""

    def __init__(self) -> None:
        self.pings: list[float] = []
        self._answer: asyncio.Future[str | None] | None = None

    async def ping(self, wait_s: float) -> str | None:
        self.pings.append(wait_s)
        self._answer = asyncio.get_running_loop().create_future()
        return await self._answer

    def answer(self, why: str | None = None) -> None:
        assert self._answer is not None
        self._answer.set_result(why)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_nothing_is_held_before_a_request_timed_out() -> None:
    busy = BusyServer()
    assert await busy.hold(0.01) == 0.01  # all of its timeout
    assert busy.stats.held == 0 and busy.stats.waits == 0


async def test_requests_are_held_until_the_server_answers_once_for_every_timeout() -> None:
    busy, server = BusyServer(), Server()
    busy.timed_out(server.ping, 30.0)
    busy.timed_out(server.ping, 30.0)  # sent with it, timed out with it: the same wait
    held = [asyncio.create_task(busy.hold(5.0)) for _ in range(3)]
    await settle()
    assert server.pings == [30.0] and not any(t.done() for t in held)
    server.answer()
    lefts = await asyncio.gather(*held)
    assert all(left is not None and 0 < left <= 5.0 for left in lefts)
    assert await busy.hold(0.01) == 0.01  # free again
    s = busy.stats
    assert (s.timeouts, s.waits, s.held, s.expired, s.unanswered) == (2, 1, 3, 0, 0)


async def test_a_request_is_held_at_most_its_own_timeout_and_the_wait_goes_on() -> None:
    busy, server = BusyServer(), Server()
    busy.timed_out(server.ping, 30.0)
    assert await busy.hold(0.02) is None  # its timeout ran out first
    later = asyncio.create_task(busy.hold(5.0))
    await settle()
    assert not later.done() and len(server.pings) == 1
    server.answer()
    assert await later
    assert busy.stats.expired == 1 and busy.stats.held == 2


async def test_a_server_that_does_not_answer_lets_the_requests_go_and_is_asked_again() -> None:
    busy, server = BusyServer(), Server()
    busy.timed_out(server.ping, 30.0)
    held = asyncio.create_task(busy.hold(5.0))
    await settle()
    server.answer("the model server at h:1 did not answer in 30s")
    assert await held is not None  # sent: if it times out too, the next wait begins
    assert busy.stats.unanswered == 1
    busy.timed_out(server.ping, 30.0)
    await settle()
    assert len(server.pings) == 2 and busy.stats.waits == 2


async def test_without_a_wait_timeouts_are_only_counted() -> None:
    busy, server = BusyServer(), Server()
    busy.timed_out(server.ping, 0.0)
    assert await busy.hold(0.01) == 0.01
    assert server.pings == [] and busy.stats.timeouts == 1 and busy.stats.waits == 0


async def test_answered_joins_the_wait_running_and_a_cancelled_caller_leaves_it() -> None:
    busy, server = BusyServer(), Server()
    busy.timed_out(server.ping, 30.0)
    first = asyncio.create_task(busy.answered(server.ping, 99.0))
    second = asyncio.create_task(busy.answered(server.ping, 99.0))
    held = asyncio.create_task(busy.hold(5.0))
    await settle()
    first.cancel()
    await settle()
    assert server.pings == [30.0] and not held.done()  # one ping; the wait still runs
    server.answer("no answer")
    assert await second == "no answer" and await held is not None
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_answered_starts_a_wait_when_none_runs() -> None:
    busy, server = BusyServer(), Server()
    asked = asyncio.create_task(busy.answered(server.ping, 7.0))
    await settle()
    assert server.pings == [7.0] and await busy.hold(0.01) is None
    server.answer()
    assert await asked is None and busy.stats.waits == 1 and busy.stats.timeouts == 0


def test_a_wait_left_by_a_loop_that_ended_holds_nothing_in_the_next() -> None:
    busy, server = BusyServer(), Server()

    async def first() -> None:
        busy.timed_out(server.ping, 30.0)
        await settle()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(first())  # the loop ends with the wait unfinished
    finally:
        loop.close()
    assert asyncio.run(busy.hold(0.01)) == 0.01


async def test_a_request_set_free_is_sent_with_the_time_it_has_left() -> None:
    clock = Clock()
    busy, server = BusyServer(clock), Server()
    busy.timed_out(server.ping, 30.0)
    held = asyncio.create_task(busy.hold(5.0))
    await settle()
    clock.now += 2.0
    server.answer()
    assert await held == 3.0  # its whole timeout, less the 2 s held: never longer


async def test_one_set_free_with_less_left_than_the_last_reply_took_is_not_sent() -> None:
    clock = Clock()
    busy, server = BusyServer(clock), Server()
    busy.replied(1.5)
    busy.timed_out(server.ping, 30.0)
    short, long = asyncio.create_task(busy.hold(2.0)), asyncio.create_task(busy.hold(5.0))
    await settle()
    clock.now += 1.0
    server.answer()
    assert await short is None  # 1 s left: it would be abandoned, and keep the server busy
    assert await long == 4.0
    assert busy.stats.expired == 1 and busy.stats.held == 2


async def test_before_any_reply_one_set_free_needs_half_its_timeout_left() -> None:
    """The runaway may be the server's first reply: no reply has said how long one takes."""
    clock = Clock()
    busy, server = BusyServer(clock), Server()
    busy.timed_out(server.ping, 30.0)
    short, long = asyncio.create_task(busy.hold(3.0)), asyncio.create_task(busy.hold(5.0))
    await settle()
    clock.now += 2.0
    server.answer()
    assert await short is None and await long == 3.0  # 1 of 3 s left; 3 of 5


async def test_the_shortest_recent_reply_is_what_one_set_free_needs() -> None:
    clock = Clock()
    busy, server = BusyServer(clock), Server()
    for took in (0.9, 0.3, 0.6):  # 0.9 and 0.6 waited in the server's queue
        busy.replied(took)
    busy.timed_out(server.ping, 30.0)
    held = asyncio.create_task(busy.hold(1.0))
    await settle()
    clock.now += 0.6
    server.answer()
    assert await held == pytest.approx(0.4)  # more than 0.3: sent


async def test_a_ping_that_raises_lets_the_requests_go_with_a_reason() -> None:
    async def broken(wait_s: float) -> str | None:
        raise RuntimeError("closed")

    busy = BusyServer()
    busy.timed_out(broken, 30.0)
    assert await busy.hold(5.0) is not None and busy.stats.held == 1  # let go, not failed
    assert await busy.answered(broken, 1.0) == "the server could not be asked (RuntimeError)"
    assert busy.stats.unanswered == 2


def test_a_wait_of_an_ended_loop_ending_late_leaves_a_later_wait_running() -> None:
    """A loop closed with the wait pending: its coroutine is closed later (when it is
    collected), after a wait of the next loop began."""
    busy, server = BusyServer(), Server()

    async def first() -> asyncio.Task[str | None] | None:
        busy.timed_out(server.ping, 30.0)
        await settle()
        return busy._waiting

    loop = asyncio.new_event_loop()
    stale = loop.run_until_complete(first())
    loop.close()
    assert stale is not None and not stale.done()

    async def second() -> None:
        busy.timed_out(server.ping, 30.0)
        live = busy._waiting
        assert live is not None and live is not stale
        stale.get_coro().close()  # what collecting it does: its `finally` runs
        assert busy._waiting is live and await busy.hold(0.01) is None
        live.cancel()

    asyncio.run(second())
