"""The ingest queue between a source and a model: sources append, the UI drains on a timer.

Sources call `sink` once per envelope (cheap: an append with its arrival time); the
app's timer applies whatever has arrived in one batch and refreshes the views once, so
the screen is redrawn 10–20 times a second however fast envelopes come. A rerun gets
a fresh channel: a cancelled source that still appends writes to a channel nobody
drains any more, so no stale envelope reaches the new run's model.
"""

from __future__ import annotations

import time
from collections import deque

from errorflow.bus.envelope import Envelope
from errorflow.tui.state import RunModel

#: Most envelopes applied per tick, so one tick never blocks the UI for long.
MAX_PER_TICK = 20_000


class Channel:
    def __init__(self, model: RunModel) -> None:
        self.model = model
        self.queue: deque[tuple[float, Envelope]] = deque()
        self.finished = False  # the source returned
        self.error: str | None = None

    def sink(self, env: Envelope) -> None:
        self.queue.append((time.perf_counter(), env))

    def drain(self, tick: int = 0, limit: int = MAX_PER_TICK) -> list[float]:
        """Apply up to `limit` queued envelopes as one batch (numbered by the UI's
        `tick`, which the graph's pulse counts in); their arrival times."""
        if not self.queue:
            return []
        self.model.batch = tick
        arrivals = []
        for _ in range(min(limit, len(self.queue))):
            arrived, env = self.queue.popleft()
            self.model.apply(env)
            arrivals.append(arrived)
        return arrivals

    def step(self, tick: int = 0) -> bool:
        """Apply exactly one queued envelope (stepping while paused)."""
        return bool(self.drain(tick, 1))

    @property
    def pending(self) -> int:
        return len(self.queue)
