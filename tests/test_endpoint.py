"""Endpoints: dedupe by message id, acknowledgements and bounded resends."""

from __future__ import annotations

import asyncio

from errorflow.bus import endpoint as endpoint_mod
from errorflow.bus import topics
from errorflow.bus.endpoint import Endpoint, SeenSet
from errorflow.bus.envelope import Kind
from errorflow.bus.transport import InProcessBus


def test_seen_set_is_keyed_by_id_and_bounded(monkeypatch: object) -> None:
    seen = SeenSet()
    assert seen.add("a") and not seen.add("a") and seen.add("b")
    seen.WINDOW = 3
    for key in "cdef":
        seen.add(key)
    assert seen.add("a")  # forgotten: the oldest leave first


async def _pair(bus: InProcessBus, members: set[str]) -> tuple[Endpoint, Endpoint]:
    a = Endpoint(await bus.connect("a"), "r", "a", members)
    b = Endpoint(await bus.connect("b"), "r", "b", members)
    for ep in (a, b):
        await ep.conn.subscribe(topics.inbox("r", ep.name))
        await ep.start()
    return a, b


async def _drain(ep: Endpoint, into: list[object], n: int) -> None:
    async for env in ep.receive():
        into.append(env)
        if len(into) >= n:
            return


async def test_acked_messages_are_not_resent(monkeypatch: object) -> None:
    bus = InProcessBus()
    a, b = await _pair(bus, {"a", "b"})
    got: list[object] = []
    reader_b = asyncio.create_task(_drain(b, got, 1))
    reader_a = asyncio.create_task(_drain(a, [], 10**9))  # processes acks
    await a.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t")
    await asyncio.wait_for(reader_b, 2)
    for _ in range(50):
        if not a.pending:
            break
        await asyncio.sleep(0.01)
    assert not a.pending and a.resent == 0
    reader_a.cancel()
    await a.close()
    await b.close()


async def test_unacked_messages_are_resent_then_given_up(monkeypatch: object) -> None:
    monkeypatch.setattr(endpoint_mod, "RESEND_TICK_S", 0.01)  # type: ignore[attr-defined]
    bus = InProcessBus()
    a = Endpoint(await bus.connect("a"), "r", "a", {"a", "b"}, ack_timeout_s=0.02, max_resends=2)
    await a.start()
    silent = await bus.connect("b")  # subscribed, never acks
    await silent.subscribe(topics.inbox("r", "b"))
    env = await a.send(kind=Kind.TASK, recipient="b", trial=0, trace_id="t")
    for _ in range(200):
        if a.undelivered:
            break
        await asyncio.sleep(0.01)
    assert a.resent == 2 and a.undelivered == 1 and not a.pending
    copies = []
    while not silent.queue.empty():  # type: ignore[attr-defined]
        copies.append(silent.queue.get_nowait())  # type: ignore[attr-defined]
    assert len(copies) == 3 and len({raw for _, raw in copies}) == 1  # same id, same bytes
    assert env.id.encode() in copies[0][1]
    await a.close()


async def test_restarted_sender_is_not_a_replay() -> None:
    bus = InProcessBus()
    b = Endpoint(await bus.connect("b"), "r", "b", {"a", "b"})
    await b.conn.subscribe(topics.inbox("r", "b"))
    got: list[object] = []
    reader = asyncio.create_task(_drain(b, got, 2))
    first = Endpoint(await bus.connect("a1"), "r", "a", {"a", "b"})
    await first.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t")
    again = Endpoint(await bus.connect("a2"), "r", "a", {"a", "b"})  # seq starts at 0 again
    await again.send(kind=Kind.RESULT, recipient="b", trial=1, trace_id="t")
    await asyncio.wait_for(reader, 2)
    assert [e.trial for e in got] == [0, 1]  # type: ignore[attr-defined]
    assert b.rejects["duplicate"] == 0
