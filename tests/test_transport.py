"""The in-process bus routes as a broker does: MQTT wildcards, each connection once, in
connection order, and routes that follow every subscription and every close."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from errorflow.bus import transport
from errorflow.bus.transport import InProcessBus, InProcessConnection
from errorflow.protocol.envelope import decode
from errorflow.runtime.runner import RunOptions, run_plan
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import load
from errorflow.scenario.run_plan import RunPlan


def pending(conn: InProcessConnection) -> list[str]:
    """The topics waiting in a connection's queue, taken out."""
    out = []
    while not conn.queue.empty():
        item = conn.queue.get_nowait()
        assert item is not None
        out.append(item[0])
    return out


async def test_exact_and_wildcard_subscribers_each_get_a_message_once() -> None:
    bus = InProcessBus()
    exact, plus, hash_, other = [await bus.connect(n) for n in ("e", "p", "h", "o")]
    await exact.subscribe("ef/r/inbox/a")
    await plus.subscribe("ef/r/inbox/+")
    await hash_.subscribe("ef/#")
    await hash_.subscribe("ef/r/inbox/a")  # overlapping patterns: still one copy
    await other.subscribe("ef/r/inbox/b")
    await exact.publish("ef/r/inbox/a", b"x")
    assert pending(exact) == ["ef/r/inbox/a"]
    assert pending(plus) == ["ef/r/inbox/a"]
    assert pending(hash_) == ["ef/r/inbox/a"]
    assert pending(other) == []
    await other.publish("ef/r/events/a", b"y")
    assert [pending(c) for c in (exact, plus, hash_, other)] == [[], [], ["ef/r/events/a"], []]


async def test_a_route_follows_a_new_subscription_and_a_closed_connection() -> None:
    bus = InProcessBus()
    a, b = await bus.connect("a"), await bus.connect("b")
    await a.subscribe("t/1")
    await b.publish("t/1", b"1")  # the route of t/1 is known now
    await b.subscribe("t/+")
    await a.publish("t/1", b"2")
    assert pending(a) == ["t/1", "t/1"]
    assert pending(b) == ["t/1"]  # the new subscription counts at once
    await a.close()
    await b.publish("t/1", b"3")
    assert pending(b) == ["t/1"]
    assert a.queue.get_nowait() is None  # closed: only its end marker, no message


async def test_a_full_queue_holds_the_publisher_back_instead_of_dropping() -> None:
    bus = InProcessBus()
    slow = await bus.connect("slow")
    slow.queue = asyncio.Queue(2)
    await slow.subscribe("t")
    for _ in range(2):
        await slow.publish("t", b"x")
    third = asyncio.create_task(slow.publish("t", b"x"))
    await asyncio.sleep(0.01)
    assert not third.done()  # waiting for room
    await slow.queue.get()
    await asyncio.wait_for(third, 1)
    assert slow.queue.qsize() == 2


async def test_the_route_table_stays_bounded() -> None:
    bus = InProcessBus()
    conn = await bus.connect("c")
    await conn.subscribe("#")
    for i in range(transport.ROUTES_LIMIT + 10):
        await conn.publish(f"t/{i}", b"")
    assert len(bus._routes) <= transport.ROUTES_LIMIT
    assert conn.queue.qsize() == transport.ROUTES_LIMIT + 10  # every message still delivered


async def test_backlog_counts_what_the_reader_has_not_taken() -> None:
    bus = InProcessBus()
    sub, pub = await bus.connect("sub"), await bus.connect("pub")
    await sub.subscribe("t/#")
    for i in range(3):
        await pub.publish("t/x", b"%d" % i)
    assert transport.backlog(sub) == 3
    incoming = aiter(sub.messages())
    await anext(incoming)
    assert transport.backlog(sub) == 2
    assert transport.backlog(object()) == 0  # a connection that cannot tell


def _typed(value: object) -> object:
    """`value` with the type of every part: a tuple is not a list, 1 is not 1.0."""
    if isinstance(value, dict):
        return ("dict", tuple((k, _typed(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(_typed(v) for v in value))
    return (type(value).__name__, value)


def _members(text: str) -> object:
    """The JSON `text` with its members in order and every value's type."""

    def tagged(value: object) -> object:
        if isinstance(value, tuple):  # an object, already tagged
            return value
        if isinstance(value, list):
            return ("list", tuple(tagged(v) for v in value))
        return (type(value).__name__, value)

    def members(pairs: list[tuple[str, object]]) -> object:
        return tuple((k, tagged(v)) for k, v in pairs)

    return tagged(json.loads(text, object_pairs_hook=members))


class _CheckingBus(InProcessBus):
    """An in-process bus that decodes the text of every envelope posted on it: the
    receivers, who get the object, must see exactly what a broker's would decode."""

    def __init__(self) -> None:
        super().__init__()
        self.posted = 0
        self.differ: list[str] = []

    def _check(self, topic: str, payload: transport.Delivery) -> None:
        if isinstance(payload, transport.Posted):
            self.posted += 1
            back = decode(payload.text.encode())
            if back != payload.env or _typed(back.payload) != _typed(payload.env.payload):
                self.differ.append(topic)
            # the text is what pydantic writes: the same members, in order, same values
            ours, theirs = payload.text, payload.env.model_dump_json(exclude={"sig"})
            if _members(ours) != _members(theirs):
                self.differ.append(f"{topic}: {ours} != {theirs}")

    async def deliver(self, topic: str, payload: transport.Delivery) -> None:
        self._check(topic, payload)
        await super().deliver(topic, payload)

    def deliver_nowait(self, topic: str, payload: transport.Delivery) -> bool:
        self._check(topic, payload)  # (a full inbox: checked again by `deliver`)
        return super().deliver_nowait(topic, payload)


@pytest.mark.parametrize("name", ["contamination", "support-pipeline", "lineage-guard"])
async def test_a_posted_envelope_is_what_its_text_decodes_to(name: str, tmp_path: Path) -> None:
    bus = _CheckingBus()
    plan = RunPlan.of(load(resolve(name)), trials=4)
    result = await run_plan(plan, RunOptions(bus=bus, db_path=tmp_path / "r.db"))
    assert sum(result.outcomes.values()) == 4
    assert bus.posted > 40 and bus.differ == []


async def test_a_recorder_hears_all_only_on_the_same_in_process_bus() -> None:
    bus, other = InProcessBus(), InProcessBus()
    recorder, runner, elsewhere = (
        await bus.connect("rec"),
        await bus.connect("run"),
        await other.connect("run"),
    )
    assert transport.hears_all(recorder, runner)
    assert not transport.hears_all(recorder, elsewhere)  # another bus
    assert not transport.hears_all(recorder, None) and not transport.hears_all(object(), runner)
