"""The wait for a model server after a request to it timed out (errorflow/models/busy_server.py):
requests held until the server answers a ping, each at most its own timeout; one wait
however many requests time out; a wait joined, not doubled; nothing bound to a loop
that has ended."""

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


async def test_nothing_is_held_before_a_request_timed_out() -> None:
    busy = BusyServer()
    assert await busy.hold(0.01)
    assert busy.stats.held == 0 and busy.stats.waits == 0


async def test_requests_are_held_until_the_server_answers_once_for_every_timeout() -> None:
    busy, server = BusyServer(), Server()
    busy.timed_out(server.ping, 30.0)
    busy.timed_out(server.ping, 30.0)  # sent with it, timed out with it: the same wait
    held = [asyncio.create_task(busy.hold(5.0)) for _ in range(3)]
    await settle()
    assert server.pings == [30.0] and not any(t.done() for t in held)
    server.answer()
    assert await asyncio.gather(*held) == [True, True, True]
    assert await busy.hold(0.01)  # free again
    s = busy.stats
    assert (s.timeouts, s.waits, s.held, s.expired, s.unanswered) == (2, 1, 3, 0, 0)


async def test_a_request_is_held_at_most_its_own_timeout_and_the_wait_goes_on() -> None:
    busy, server = BusyServer(), Server()
    busy.timed_out(server.ping, 30.0)
    assert not await busy.hold(0.02)  # its timeout ran out first
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
    assert await held  # sent: if it times out too, the next wait begins
    assert busy.stats.unanswered == 1
    busy.timed_out(server.ping, 30.0)
    await settle()
    assert len(server.pings) == 2 and busy.stats.waits == 2


async def test_without_a_wait_timeouts_are_only_counted() -> None:
    busy, server = BusyServer(), Server()
    busy.timed_out(server.ping, 0.0)
    assert await busy.hold(0.01)
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
    assert await second == "no answer" and await held
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_answered_starts_a_wait_when_none_runs() -> None:
    busy, server = BusyServer(), Server()
    asked = asyncio.create_task(busy.answered(server.ping, 7.0))
    await settle()
    assert server.pings == [7.0] and not await busy.hold(0.01)
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
    assert asyncio.run(busy.hold(0.01)) is True
