"""Bus faults: each kind fires at its configured rate, keyed by the send alone (not by
timing); partitions cut both ways inside their window; the endpoint carries every fate
out on the send side and says so on the bus before the message."""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import Counter

import pytest

from errorflow.bus.endpoint import Endpoint
from errorflow.bus.transport import InProcessBus, InProcessConnection
from errorflow.faults import bus as bf
from errorflow.faults.bus import (
    DELIVERED,
    BusFaultPlan,
    Partition,
    Send,
    attempt_at,
    undelivered_reason,
)
from errorflow.protocol import topics
from errorflow.protocol.envelope import Envelope, Kind, decode
from errorflow.protocol.events import BusFaultFired, BusUndelivered, parse_event
from tests.test_endpoint import FakeClock, Recording, until

N = 6000


def sends(n: int = N, attempt: int = 1) -> list[Send]:
    """n distinct sends: trials, both directions, two rounds."""
    out = []
    for i in range(n):
        trial, rest = divmod(i, 4)
        sender, recipient = ("researcher", "writer") if rest % 2 else ("writer", "runner")
        out.append(Send(trial, sender, recipient, f"result/{rest // 2}", attempt, 0.0))
    return out


def within_3_sigma(k: int, n: int, p: float) -> bool:
    return abs(k - n * p) <= 3 * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize(
    ("kind", "plan"),
    [
        ("drop", BusFaultPlan(seed=7, drop_p=0.05)),
        ("duplicate", BusFaultPlan(seed=7, duplicate_p=0.05)),
        ("delay", BusFaultPlan(seed=7, delay_p=0.2, delay_s=1.0)),
        ("reorder", BusFaultPlan(seed=7, reorder_p=0.1)),
    ],
)
def test_each_kind_fires_at_its_configured_rate(kind: str, plan: BusFaultPlan) -> None:
    p = {"drop": 0.05, "duplicate": 0.05, "delay": 0.2, "reorder": 0.1}[kind]
    fates = [plan.fate(s) for s in sends()]
    fired = sum(1 for f in fates if kind in f.fired)
    assert within_3_sigma(fired, N, p), (kind, fired, N * p)
    assert all(f.fired in ((), (kind,)) for f in fates)  # only the configured kind fires
    if kind == "drop":
        assert all(f.lost and f.copies == 0 for f in fates if f.fired)
    if kind == "duplicate":
        assert all(f.copies == 2 and not f.lost for f in fates if f.fired)
    if kind == "delay":
        assert all(f.delay_s == 1.0 for f in fates if f.fired)
    if kind == "reorder":
        assert all(f.hold for f in fates if f.fired)


def test_every_resend_draws_afresh_at_the_same_rate() -> None:
    plan = BusFaultPlan(seed=7, drop_p=0.3)
    first = [plan.fate(s).lost for s in sends(2000, attempt=1)]
    second = [plan.fate(s).lost for s in sends(2000, attempt=2)]
    assert within_3_sigma(sum(second), 2000, 0.3)
    both = sum(1 for a, b in zip(first, second, strict=True) if a and b)
    assert within_3_sigma(both, 2000, 0.09)  # independent draws


def test_the_same_send_gets_the_same_fate_and_kinds_do_not_shift_each_other() -> None:
    alone = BusFaultPlan(seed=3, drop_p=0.2)
    mixed = BusFaultPlan(seed=3, drop_p=0.2, duplicate_p=0.5, reorder_p=0.5)
    again = [alone.fate(s).lost for s in sends(500)]
    assert again == [alone.fate(s).lost for s in sends(500)]
    assert again == [mixed.fate(s).lost for s in sends(500)]
    other_seed = [BusFaultPlan(seed=4, drop_p=0.2).fate(s).lost for s in sends(500)]
    assert other_seed != again


def test_a_plan_without_a_rate_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_stream(*_: object) -> object:
        raise AssertionError("drew from a stream")

    monkeypatch.setattr(bf, "stream", no_stream)
    plan = BusFaultPlan(seed=1, ack_timeout_s=0.1)
    assert plan.kinds == ()
    assert all(plan.fate(s) is DELIVERED for s in sends(50))


def test_a_partition_cuts_both_ways_inside_its_window_only() -> None:
    plan = BusFaultPlan(seed=1, partitions=(Partition("researcher", "writer", 10.0, 20.0),))
    assert plan.kinds == ("partition",)

    def cut(sender: str, recipient: str, at: float) -> bool:
        fate = plan.fate(Send(0, sender, recipient, "result/0", 1, at))
        return fate.lost and fate.fired == ("partition",)

    assert cut("researcher", "writer", 10.0) and cut("writer", "researcher", 19.9)
    assert not cut("researcher", "writer", 9.99) and not cut("researcher", "writer", 20.0)
    assert not cut("writer", "runner", 15.0)  # other pairs talk on


def test_a_partition_outranks_a_drop_and_the_resend_schedule_is_run_time() -> None:
    plan = BusFaultPlan(seed=1, drop_p=1.0, partitions=(Partition("a", "b", 0, 5),))
    assert plan.fate(Send(0, "a", "b", "task/0", 1, 1.0)).fired == ("partition",)
    assert plan.fate(Send(0, "a", "b", "task/0", 1, 6.0)).fired == ("drop",)
    # the outbox's deadlines: after 2 s, then 4 s, then 8 s
    assert [attempt_at(1.0, k, 2.0) for k in (1, 2, 3, 4)] == [1.0, 3.0, 7.0, 15.0]


def test_the_reason_names_the_edge_and_what_each_send_lost() -> None:
    assert undelivered_reason("researcher", "writer", {"drop": 7}, 7) == (
        "researcher→writer: dropped 7 of 7 sends"
    )
    assert undelivered_reason("a", "b", Counter(partition=2, drop=1), 4) == (
        "a→b: cut off by a partition 2 and dropped 1 and unacknowledged 1 of 4 sends"
    )


# -- the endpoint carries the fates out ---------------------------------------------------


async def _endpoint(
    plan: BusFaultPlan, clock: FakeClock
) -> tuple[Endpoint, Recording, InProcessConnection]:
    bus = InProcessBus()
    conn = Recording(await bus.connect("a"), clock)
    ep = Endpoint(conn, "r", "a", {"a", "b"}, clock=clock, sleep=clock.sleep, faults=plan)
    await ep.start()
    inbox = await bus.connect("b")  # subscribed, never acks: nothing is acknowledged
    await inbox.subscribe(topics.inbox("r", "b"))
    await inbox.subscribe(topics.events("r", "a"))
    return ep, conn, inbox


def _taken(conn: InProcessConnection) -> list[Envelope]:
    out = []
    while not conn.queue.empty():
        item = conn.queue.get_nowait()
        assert item is not None
        out.append(decode(item[1]))
    return out


async def _send_many(ep: Endpoint, n: int) -> list[Envelope]:
    return [
        await ep.send(kind=Kind.RESULT, recipient="b", trial=t, trace_id=f"t{t}") for t in range(n)
    ]


async def test_the_endpoint_drops_and_doubles_sends_and_says_so_first() -> None:
    clock = FakeClock()
    ep, _, inbox = await _endpoint(BusFaultPlan(seed=5, drop_p=0.1, duplicate_p=0.1), clock)
    n = 1500
    sent = await _send_many(ep, n)
    got = _taken(inbox)
    events = [parse_event(e.payload) for e in got if e.kind is Kind.EVENT]
    copies = Counter(e.id for e in got if e.kind is Kind.RESULT)
    dropped = {e.message_id for e in events if isinstance(e, BusFaultFired) and e.kind == "drop"}
    doubled = {
        e.message_id for e in events if isinstance(e, BusFaultFired) and e.kind == "duplicate"
    }
    assert within_3_sigma(len(dropped), n, 0.1) and within_3_sigma(len(doubled), n, 0.1)
    for env in sent:
        expected = 0 if env.id in dropped else 2 if env.id in doubled else 1
        assert copies[env.id] == expected
    # each event comes before the message it struck (the runner learns of it first)
    position = {id(e): i for i, e in enumerate(got)}
    first_copy = {e.id: position[id(e)] for e in reversed(got) if e.kind is Kind.RESULT}
    for e in got:
        event = parse_event(e.payload) if e.kind is Kind.EVENT else None
        if isinstance(event, BusFaultFired) and event.message_id in first_copy:
            assert position[id(e)] < first_copy[event.message_id]
    assert ep.pending == n  # nobody acked: all still awaited, dropped or not
    await ep.close()


async def test_a_dropped_send_is_resent_and_a_message_lost_every_time_is_announced() -> None:
    clock = FakeClock()
    plan = BusFaultPlan(seed=5, drop_p=1.0, ack_timeout_s=0.25, max_resends=2)
    ep, _, inbox = await _endpoint(plan, clock)
    env = await ep.send(kind=Kind.TASK, recipient="b", trial=3, trace_id="t3", at=1.5)
    for _ in range(8):  # sends at 0, 0.25, 0.75; given up at 1.75
        await clock.advance(0.25)
    got = _taken(inbox)
    assert not [e for e in got if e.kind is Kind.TASK]  # every send lost
    events = [parse_event(e.payload) for e in got]
    fired = [e for e in events if isinstance(e, BusFaultFired)]
    assert [(e.attempt, e.at) for e in fired] == [(1, 1.5), (2, 1.75), (3, 2.25)]
    (gone,) = [e for e in events if isinstance(e, BusUndelivered)]
    assert gone.message_id == env.id and gone.sends == 3
    assert gone.reason == "a→b: dropped 3 of 3 sends"
    assert all(e.trial == 3 for e in got)
    await ep.close()


async def test_a_reordered_message_goes_out_after_the_senders_next_one() -> None:
    clock = FakeClock()
    ep, _, inbox = await _endpoint(BusFaultPlan(seed=9, reorder_p=0.3), clock)
    sent = await _send_many(ep, 300)
    sent.append(await ep.send(kind=Kind.RESULT, recipient="b", trial=999, trace_id="t"))
    await clock.advance(0.25)  # the driver's tick: the last one, if held, goes out too
    got = _taken(inbox)
    held = {
        e.message_id
        for e in (parse_event(x.payload) for x in got if x.kind is Kind.EVENT)
        if isinstance(e, BusFaultFired)
    }
    assert within_3_sigma(len(held), 301, 0.3)
    order = [e.id for e in got if e.kind is Kind.RESULT]
    assert sorted(order) == sorted(e.id for e in sent)  # each exactly once: reordered only
    for this, after in itertools.pairwise(sent):
        if this.id in held and after.id not in held:
            assert order.index(this.id) == order.index(after.id) + 1
        if this.id not in held and after.id not in held:
            assert order.index(this.id) < order.index(after.id)
    await ep.close()


def _taken_events(conn: InProcessConnection) -> list[Envelope]:
    """What is in the queue so far, left there."""
    items = []
    while not conn.queue.empty():
        item = conn.queue.get_nowait()
        assert item is not None
        items.append(item)
    for item in items:
        conn.queue.put_nowait(item)
    return [decode(raw) for _, raw in items]


async def test_a_reordered_message_is_released_by_the_driver_when_nothing_follows() -> None:
    clock = FakeClock()
    ep, _, inbox = await _endpoint(BusFaultPlan(seed=9, reorder_p=1.0), clock)
    env = await ep.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t")
    assert not [e for e in _taken_events(inbox) if e.id == env.id]
    await clock.advance(0.25)  # the driver's tick
    assert [e.id for e in _taken(inbox) if e.kind is Kind.RESULT] == [env.id]
    await ep.close()


async def test_a_delayed_message_arrives_after_its_delay_times_the_time_scale() -> None:
    clock = FakeClock()
    plan = BusFaultPlan(seed=9, delay_p=1.0, delay_s=0.5, time_scale=0.1)  # 0.05 real s
    ep, _, inbox = await _endpoint(plan, clock)
    env = await ep.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t")
    assert not [e for e in _taken_events(inbox) if e.kind is Kind.RESULT]
    await asyncio.sleep(0.2)
    await until(lambda: any(e.id == env.id for e in _taken_events(inbox)))
    await ep.close()


async def test_events_and_control_are_never_faulted() -> None:
    clock = FakeClock()
    ep, conn, _ = await _endpoint(BusFaultPlan(seed=1, drop_p=1.0), clock)
    event = BusFaultFired(sender="a", recipient="b", kind="drop", message_id="x", attempt=1, at=0.0)
    await ep.publish_event(0, "t", event)
    assert [topic for _, topic in conn.published] == [topics.events("r", "a")]
    await ep.close()


async def test_a_message_given_up_while_a_delayed_copy_is_on_its_way_is_not_announced() -> None:
    clock = FakeClock()
    plan = BusFaultPlan(
        seed=9, delay_p=1.0, delay_s=60.0, time_scale=1.0, ack_timeout_s=0.1, max_resends=0
    )
    ep, _, inbox = await _endpoint(plan, clock)
    await ep.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t")
    await clock.advance(0.25)  # given up after its one send: the copy is still delayed
    assert ep.undelivered == 1
    kinds = [e.payload.get("type") for e in _taken_events(inbox) if e.kind is Kind.EVENT]
    assert kinds == ["bus_fault"]  # the delay; no bus_undelivered: the copy may yet arrive
    await ep.close()
