"""The pace the main screen shows a run at: one control for live runs, attached runs
and replays.

A simulated run of the bundled scenarios is over in well under a second; shown as it
comes, there is nothing to watch. So the screen shows *hops* (task and result
messages, the things that travel along the graph's arrows) at a pace: at ×1 one hop
every `HOP_S` seconds, `speed` times as fast otherwise, 0 meaning as fast as they
come. The events and control messages between two hops ride along with the next one
at no cost. Whatever has arrived and is not shown yet stays queued in the channel, so
the run itself is never slowed down and the queued count is always the truth.

The schedule is kept against an injected clock (`time.monotonic` by default), so a test
measures how long a run takes to show with a fake clock and no waiting. When the queue
ran dry (a slow real model), the next hop shows as soon as it arrives, and no burst of
saved-up hops follows.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Seconds per hop at ×1: the bundled contamination scenario (20 trials, 3 hops each)
#: shows in about half a minute.
HOP_S = 0.5
#: The speeds `+` and `-` step through; 0 (as fast as they come) is past the last.
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
UNPACED = 0.0
#: How far behind schedule the pace may run and catch up (two UI ticks and a half).
CATCH_UP_S = 0.125

Clock = Callable[[], float]


class Pace:
    def __init__(self, speed: float = 1.0, clock: Clock = time.monotonic) -> None:
        if speed < 0:
            raise ValueError(f"speed must be 0 or more, found {speed}")
        self.speed = speed
        self.clock = clock
        self._next: float | None = None  # when the next hop may show

    @property
    def interval(self) -> float:
        return HOP_S / self.speed if self.speed else 0.0

    def admit(self) -> bool:
        """May the next hop show now? Yes counts it: the one after is due an interval on."""
        if not self.speed:
            return True
        now = self.clock()
        if self._next is not None and now < self._next:
            return False
        # On schedule while hops wait (several a tick at high speeds, no drift); after
        # the queue ran dry, from (nearly) now: a slow stretch saves up no burst.
        start = now if self._next is None else max(self._next, now - CATCH_UP_S)
        self._next = start + self.interval
        return True

    def faster(self) -> None:
        self._set(_step(self.speed, +1))

    def slower(self) -> None:
        self._set(_step(self.speed, -1))

    def _set(self, speed: float) -> None:
        if speed != self.speed:
            self.speed = speed
            self._next = None  # the new pace starts now

    @property
    def label(self) -> str:
        return f"×{self.speed:g}" if self.speed else "×max"


def _step(speed: float, direction: int) -> float:
    """The next speed up (+1) or down (-1) from `speed` (which may be off the steps)."""
    if direction > 0:
        if not speed:
            return UNPACED
        return next((s for s in SPEEDS if s > speed), UNPACED)
    if not speed:
        return SPEEDS[-1]
    return next((s for s in reversed(SPEEDS) if s < speed), SPEEDS[0])
