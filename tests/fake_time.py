"""A clock that moves only when something sleeps on it: rate-limiter waits in tests take
no wall time, and what was waited is exact."""

from __future__ import annotations

import asyncio


class FakeTime:
    def __init__(self, start: float = 1000.0, wall: float = 1_800_000_000.0) -> None:
        self.now = start
        self.wall_at_start = wall
        self.start = start
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.wall_at_start + (self.now - self.start)

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)  # let others run, as a real sleep would
