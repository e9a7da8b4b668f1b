"""The ingest queue between a source and a model: sources append, the UI drains on a timer.

Sources call `sink` once per envelope (cheap: two appends); the app's timer applies
what the pace lets through (errorflow.tui.pace) in one batch and refreshes the views
once, so the screen is redrawn 10–20 times a second however fast envelopes come. A
rerun gets a fresh channel: a cancelled source that still appends writes to a channel
nobody drains any more, so no stale envelope reaches the new run's model.

Theory of operation
-------------------
Without a pace, envelopes are applied in arrival order, as many as have arrived. With
one, the screen follows one trial at a time: a simulated run has all its trials in
flight at once (20 tasks first, then 20 results...), which shows nothing travelling.
So the queue is kept in lanes, one per trial (control messages in a lane of their
own), and a paced drain takes the next envelope from the lane of the trial it showed
last while that lane has any, else from the lane whose head arrived first: each trial
travels the graph hop by hop, then the next. Nothing is held back to do so (a lane
that runs dry, a slow agent, gives way to the next), and control messages keep their
place in arrival order (the runner's `end` shows after everything before it).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from errorflow.protocol.envelope import Envelope, Kind
from errorflow.tui.pace import Pace
from errorflow.tui.state import RunModel

#: Most envelopes applied per tick, so one tick never blocks the UI for long.
MAX_PER_TICK = 20_000
HOPS = (Kind.TASK, Kind.RESULT)
CONTROL_LANE = -1


@dataclass(eq=False, slots=True)
class _Queued:
    seq: int
    arrived: float
    env: Envelope
    applied: bool = False


class _OneHop:
    """A pace that lets exactly one hop through: stepping while paused."""

    def __init__(self) -> None:
        self.left = 1

    def admit(self) -> bool:
        self.left -= 1
        return self.left >= 0


class Channel:
    def __init__(self, model: RunModel) -> None:
        self.model = model
        self.queue: deque[_Queued] = deque()  # arrival order; applied ones skipped lazily
        self.lanes: dict[int, deque[_Queued]] = {}
        self.current: int | None = None  # the trial a paced drain follows
        self._pending = 0
        self._seq = 0
        self.finished = False  # the source returned
        self.error: str | None = None

    def sink(self, env: Envelope) -> None:
        item = _Queued(self._seq, time.perf_counter(), env)
        self._seq += 1
        self.queue.append(item)
        lane_no = CONTROL_LANE if env.kind is Kind.CONTROL else env.trial
        lane = self.lanes.get(lane_no)
        if lane is None:
            lane = self.lanes[lane_no] = deque()
        lane.append(item)
        self._pending += 1

    @property
    def pending(self) -> int:
        return self._pending

    def drain(
        self, tick: int = 0, pace: Pace | _OneHop | None = None, limit: int = MAX_PER_TICK
    ) -> list[float]:
        """Apply what the pace lets through (everything without one, up to `limit`) as
        one batch, numbered by the UI's `tick` (the graph's pulse counts in ticks); the
        arrival times of what was applied."""
        if not self._pending:
            return []
        self.model.batch = tick
        arrivals: list[float] = []
        while self._pending and len(arrivals) < limit:
            item = self._in_order() if pace is None else self._next()
            if pace is not None and item.env.kind in HOPS and not pace.admit():
                break
            self._apply(item)
            arrivals.append(item.arrived)
        return arrivals

    def step(self, tick: int = 0) -> bool:
        """Apply the next hop with the events around it, as a paced drain shows it
        (stepping while paused)."""
        return bool(self.drain(tick, _OneHop()))

    def _in_order(self) -> _Queued:
        while self.queue[0].applied:
            self.queue.popleft()
        return self.queue[0]

    def _next(self) -> _Queued:
        """The next envelope to show at a pace: see the theory of operation."""
        control = self.lanes.get(CONTROL_LANE)
        heads = {t: lane[0] for t, lane in self.lanes.items() if t != CONTROL_LANE}
        first = min(heads.values(), key=lambda q: q.seq, default=None)
        if control and (first is None or control[0].seq < first.seq):
            return control[0]
        if self.current not in heads:
            assert first is not None
            self.current = first.env.trial
        return heads[self.current]

    def _apply(self, item: _Queued) -> None:
        lane_no = CONTROL_LANE if item.env.kind is Kind.CONTROL else item.env.trial
        lane = self.lanes[lane_no]
        lane.popleft()  # always its lane's head: lanes keep arrival order
        if not lane:
            del self.lanes[lane_no]
        item.applied = True
        self._pending -= 1
        self.model.apply(item.env)
