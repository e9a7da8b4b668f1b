"""Simulated time: every wait is recorded in simulated seconds; `time_scale` decides how
much real waiting happens (0 for sweeps, 1 for a live demo)."""

from __future__ import annotations

import asyncio


class SimClock:
    def __init__(self, time_scale: float = 0.0, start: float = 0.0) -> None:
        self.now = start
        self.time_scale = time_scale

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        self.now += seconds
        if self.time_scale > 0:
            await asyncio.sleep(seconds * self.time_scale)
