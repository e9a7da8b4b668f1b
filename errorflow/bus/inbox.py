"""A connection's inbox: the part of `asyncio.Queue` the bus uses, at a third of its calls.

Every message a participant receives passes through one (two on a broker: the client's
and the reader's side), and `asyncio.Queue` spends a dozen Python calls on each (task
accounting for `join`, an event cleared per put, a wake-up per get) that the bus never
needs. This one is a deque, the readers waiting for an item and the writers waiting for
room; the same FIFO order, the same `QueueFull` / `QueueEmpty`, the same fairness to
waiters (first come, first woken).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Inbox(Generic[T]):
    def __init__(self, maxsize: int = 0) -> None:
        """`maxsize` 0: unbounded."""
        self.maxsize = maxsize
        self._items: deque[T] = deque()
        self._readers: deque[asyncio.Future[None]] = deque()
        self._writers: deque[asyncio.Future[None]] = deque()

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return 0 < self.maxsize <= len(self._items)

    def put_nowait(self, item: T) -> None:
        if 0 < self.maxsize <= len(self._items):
            raise asyncio.QueueFull
        self._items.append(item)
        if self._readers:
            _wake(self._readers)

    async def put(self, item: T) -> None:
        while 0 < self.maxsize <= len(self._items):
            await _wait(self._writers, self._room_left)
        self.put_nowait(item)

    def get_nowait(self) -> T:
        if not self._items:
            raise asyncio.QueueEmpty
        item = self._items.popleft()
        if self._writers:
            _wake(self._writers)
        return item

    async def get(self) -> T:
        while not self._items:
            await _wait(self._readers, self._has_items)
        return self.get_nowait()

    def _has_items(self) -> bool:
        return bool(self._items)

    def _room_left(self) -> bool:
        return not self.full()


def _wake(waiters: deque[asyncio.Future[None]]) -> None:
    """The first waiter still waiting, woken."""
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return


async def _wait(waiters: deque[asyncio.Future[None]], ready: Callable[[], bool]) -> None:
    """Wait in line; a waiter cancelled after it was woken passes its turn on (as
    `asyncio.Queue` does), when what it waited for is still there."""
    waiter = asyncio.get_running_loop().create_future()
    waiters.append(waiter)
    try:
        await waiter
    except BaseException:
        waiter.cancel()  # (a waiter already woken stays woken: not cancelled)
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiter.cancelled() and ready():
            _wake(waiters)
        raise
