"""A model server still writing a reply its client gave up on: what is sent next waits.

Some servers (llama.cpp's) answer one request at a time and write each reply to its end,
even after its client has gone. Once a request to such a server timed out, a request
sent next queues behind that reply and may time out too; abandoned in turn, it keeps the
server busy longer still, so one runaway reply can fail every trial after it. So after a
request timed out, the requests after it are held, not sent, until the server answers a
one-token request again (within `wait_s`, else they go anyway: a server that did not
answer is asked again by the next timeout). A request is held at most its own timeout,
then fails as the server's silence would have, so a trial whose server stays busy
still fails as an infrastructure fault before the runner's trial timeout; one set free
by the server's answer has its whole timeout for its reply.

One `BusyServer` per model server and model, shared by every client of it in the process
like the rate limiters (errorflow/models/serving.py). Our own code, not a library's: a
circuit breaker (errorflow/policies) opens on a count of failures and probes on a clock;
this opens on one timeout and closes on the server's own answer, which is what a server
that answers one request at a time needs. Pure asyncio, bound to no loop between waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

#: Asks the server a one-token request, waiting up to the seconds given: None once it
#: answered (whatever it answered), else why not, in one line.
Ping = Callable[[float], Awaitable[str | None]]


@dataclass
class BusyStats:
    timeouts: int = 0  # requests that got no answer in time
    waits: int = 0  # waits for the server to answer again
    unanswered: int = 0  # waits the server did not answer within `wait_s`
    held: int = 0  # requests held during a wait
    expired: int = 0  # held requests whose own timeout ran out first


class BusyServer:
    def __init__(self) -> None:
        self._waiting: asyncio.Task[str | None] | None = None
        self.stats = BusyStats()

    def _wait_running(self) -> asyncio.Task[str | None] | None:
        waiting = self._waiting
        if waiting is not None and waiting.get_loop() is not asyncio.get_running_loop():
            self._waiting = waiting = None  # left by a loop that has ended
        return waiting

    async def hold(self, budget_s: float) -> bool:
        """Before a request is sent: True at once when the server is not being waited
        for, or once it answered; False when `budget_s` ran out first."""
        waiting = self._wait_running()
        if waiting is None:
            return True
        self.stats.held += 1
        try:
            async with asyncio.timeout(budget_s):
                await asyncio.shield(waiting)
        except TimeoutError:
            self.stats.expired += 1
            return False
        return True

    def timed_out(self, ping: Ping, wait_s: float) -> None:
        """A request got no answer in time: hold the next ones until the server answers
        `ping` within `wait_s` (a wait already running serves; 0: counted, not held)."""
        self.stats.timeouts += 1
        if wait_s > 0 and self._wait_running() is None:
            self._start(ping, wait_s)

    async def answered(self, ping: Ping, wait_s: float) -> str | None:
        """Joins the wait running, or starts one: None once the server answered, else
        why not. Cancelling the caller does not cancel the wait (others may hold on it)."""
        waiting = self._wait_running() or self._start(ping, wait_s)
        return await asyncio.shield(waiting)

    def _start(self, ping: Ping, wait_s: float) -> asyncio.Task[str | None]:
        self.stats.waits += 1
        self._waiting = asyncio.get_running_loop().create_task(self._wait(ping, wait_s))
        return self._waiting

    async def _wait(self, ping: Ping, wait_s: float) -> str | None:
        try:
            why = await ping(wait_s)
        finally:
            self._waiting = None
        if why is not None:
            self.stats.unanswered += 1
        return why
