"""A model server still writing a reply its client gave up on: what is sent next waits.

Some servers (llama.cpp's) answer one request at a time and write each reply to its end,
even after its client has gone. Once a request to such a server timed out, a request
sent next queues behind that reply and may time out too; abandoned in turn, it keeps the
server busy longer still, so one runaway reply can fail every trial after it. So after a
request timed out, the requests after it are held, not sent, until the server answers a
one-token request again (within `wait_s`, else they go anyway: a server that did not
answer is asked again by the next timeout). A request is held within its own timeout:
held that long, it fails as the server's silence would have, and one set free is sent
with the time it has left, so being held never makes it outlast its timeout (and a
trial whose server stays busy fails as an infrastructure fault). One set free with less
time left than the shortest of the server's recent replies took (half its timeout
before any reply came) is not sent either: it would be abandoned, and keep the server
busy again.

One `BusyServer` per model server and model, shared by every client of it in the process
like the rate limiters (errorflow/models/serving.py). Our own code, not a library's: a
circuit breaker (errorflow/policies) opens on a count of failures and probes on a clock;
this opens on one timeout and closes on the server's own answer, which is what a server
that answers one request at a time needs. Pure asyncio, bound to no loop between waits.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

#: The replies whose times say what a request set free needs left: the shortest of
#: them (a reply's time counts any wait in the server's own queue, so the shortest is
#: the one nearest a reply's own).
RECENT_REPLIES = 8

#: Asks the server a one-token request, waiting up to the seconds given: None once it
#: answered (whatever it answered), else why not, in one line.
Ping = Callable[[float], Awaitable[str | None]]


@dataclass
class BusyStats:
    timeouts: int = 0  # requests that got no answer in time
    waits: int = 0  # waits for the server to answer again
    unanswered: int = 0  # waits the server did not answer within `wait_s`
    held: int = 0  # requests held during a wait
    expired: int = 0  # held ones not sent: too little of their timeout left


class BusyServer:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._waiting: asyncio.Task[str | None] | None = None
        self._started = 0  # waits started: tells a wait whether it is still the one
        self._replies: deque[float] = deque(maxlen=RECENT_REPLIES)  # how long they took
        self.stats = BusyStats()

    def _wait_running(self) -> asyncio.Task[str | None] | None:
        waiting = self._waiting
        if waiting is not None and waiting.get_loop() is not asyncio.get_running_loop():
            self._waiting = waiting = None  # left by a loop that has ended
        return waiting

    async def hold(self, budget_s: float) -> float | None:
        """Before a request is sent: the seconds of `budget_s` left to send it with
        (all of it when the server is not being waited for), or None when it is not to be
        sent (`budget_s` ran out, or less is left than a reply needs)."""
        waiting = self._wait_running()
        if waiting is None:
            return budget_s
        self.stats.held += 1
        start = self._clock()
        try:
            async with asyncio.timeout(budget_s):
                await asyncio.shield(waiting)
        except TimeoutError:
            self.stats.expired += 1
            return None
        left = budget_s - (self._clock() - start)
        need = min(self._replies) if self._replies else budget_s / 2
        if left < need:
            self.stats.expired += 1
            return None
        return left

    def replied(self, took_s: float) -> None:
        """A request was answered after `took_s` (what a request set free needs left)."""
        self._replies.append(took_s)

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
        self._started += 1
        wait = self._wait(ping, wait_s, self._started)
        self._waiting = asyncio.get_running_loop().create_task(wait)
        return self._waiting

    async def _wait(self, ping: Ping, wait_s: float, number: int) -> str | None:
        try:
            why = await ping(wait_s)
        except Exception as exc:  # the holders go on: nothing of this reaches them
            why = f"the server could not be asked ({type(exc).__name__})"
        finally:
            if self._started == number:  # (not a later wait: an ended loop's ends late)
                self._waiting = None
        if why is not None:
            self.stats.unanswered += 1
        return why
