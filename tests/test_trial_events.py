"""How an agent's gates hand a trial's events to the bus (`TrialEvents`): in one process,
posted at once without a task; over a broker connection that writes at once (gmqtt's),
written at once, their PUBACKs settled before the result; behind a full inbox, over
any other broker or a session that is down, by tasks settled before the result; in
emit order every way."""

from __future__ import annotations

import asyncio

from errorflow.agents.trial_work import TrialEvents
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.transport import Delivery, InProcessBus, InProcessConnection, Posted
from errorflow.core.simclock import SimClock
from errorflow.protocol import topics
from errorflow.protocol.envelope import Envelope, decode
from errorflow.protocol.events import AgentStart, parse_event


async def _pair(bus: InProcessBus) -> tuple[TrialEvents, InProcessConnection]:
    observer = await bus.connect("observer")
    await observer.subscribe(topics.run_filter("r"))
    ep = Endpoint(await bus.connect("a"), "r", "a")
    return TrialEvents(ep, 3, "t-3", SimClock()), observer


def _taken(conn: InProcessConnection) -> list[Envelope]:
    out = []
    while not conn.queue.empty():
        item = conn.queue.get_nowait()
        assert item is not None
        raw: Delivery = item[1]
        out.append(raw.env if isinstance(raw, Posted) else decode(raw))
    return out


def _agents(envs: list[Envelope]) -> list[str]:
    return [str(getattr(parse_event(e.payload), "agent", "")) for e in envs]


async def test_in_one_process_an_event_is_posted_at_once_without_a_task() -> None:
    events, observer = await _pair(InProcessBus())
    events.emit(AgentStart(agent="x1", inputs=[], at=0.5))
    assert events.pending == []  # nothing left to settle
    (env,) = _taken(observer)  # there before any await
    assert env.trial == 3 and env.trace_id == "t-3" and _agents([env]) == ["x1"]


async def test_behind_a_full_inbox_events_wait_and_keep_their_order() -> None:
    bus = InProcessBus()
    events, observer = await _pair(bus)
    filler = ("x", Posted.__new__(Posted))
    while not observer.queue.full():  # the observer has not read for a while
        observer.queue.put_nowait(filler)
    for i in range(4):
        events.emit(AgentStart(agent=f"x{i}", inputs=[], at=0.0))
    assert len(events.pending) == 4  # each waits for room, in a task
    settling = asyncio.create_task(events.settle())
    got: list[Envelope] = []
    while len(got) < 4:
        item = await observer.queue.get()
        if item is not None and item is not filler and isinstance(item[1], Posted):
            got.append(item[1].env)
    await settling
    assert _agents(got) == ["x0", "x1", "x2", "x3"]
    assert [e.seq for e in got] == sorted(e.seq for e in got)
    events.emit(AgentStart(agent="x4", inputs=[], at=0.0))  # room again: at once
    assert events.pending == [] and _agents(_taken(observer)[-1:]) == ["x4"]


class _Wire:
    """A connection to a broker: bytes out, nothing local."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    async def publish(self, topic: str, payload: bytes) -> None:
        self.sent.append((topic, payload))

    async def subscribe(self, pattern: str) -> None: ...

    def messages(self) -> object:
        raise NotImplementedError

    async def close(self) -> None: ...


async def test_over_a_broker_an_event_is_published_by_a_task() -> None:
    wire = _Wire()
    events = TrialEvents(Endpoint(wire, "r", "a"), 1, "t-1", SimClock())  # type: ignore[arg-type]
    events.emit(AgentStart(agent="x", inputs=[], at=0.0))
    assert len(events.pending) == 1 and wire.sent == []
    await events.settle()
    ((topic, raw),) = wire.sent
    assert topic == topics.events("r", "a") and decode(raw).trial == 1


class _SoonWire(_Wire):
    """A broker connection that writes a publish at once (as gmqtt's does), until it is
    told the session is down."""

    def __init__(self) -> None:
        super().__init__()
        self.up = True
        self.acked = False  # PUBACKs come at once
        self.written: list[asyncio.Future[None]] = []

    def publish_soon(self, topic: str, payload: bytes) -> asyncio.Future[None] | None:
        if not self.up:
            return None
        self.sent.append((topic, payload))
        self.written.append(asyncio.get_running_loop().create_future())
        if self.acked:
            self.written[-1].set_result(None)
        return self.written[-1]


async def test_over_a_broker_that_writes_at_once_an_event_takes_no_task() -> None:
    wire = _SoonWire()
    events = TrialEvents(Endpoint(wire, "r", "a"), 1, "t-1", SimClock())  # type: ignore[arg-type]
    for i in range(3):
        events.emit(AgentStart(agent=f"x{i}", inputs=[], at=0.0))
    assert len(wire.sent) == 3  # written before any await
    assert events.pending == wire.written and not events.queued  # PUBACKs to come, no task
    wire.up = False  # the session is lost: the next one waits its turn in a task ...
    events.emit(AgentStart(agent="x3", inputs=[], at=0.0))
    wire.up = True
    events.emit(AgentStart(agent="x4", inputs=[], at=0.0))  # ... and so does every later one
    assert events.queued and len(wire.sent) == 3
    wire.acked = True
    for written in wire.written:
        written.set_result(None)
    await events.settle()
    assert _agents([decode(raw) for _, raw in wire.sent]) == [f"x{i}" for i in range(5)]
    assert not events.queued and events.pending == []
