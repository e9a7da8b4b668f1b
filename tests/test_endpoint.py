"""Endpoints: dedupe by message id and by (sender, seq), acknowledgements and bounded
resends.

Resends run on a fake clock: time moves only when a test advances it, and the
endpoint's driver sleeps on that clock, so deadlines are checked exactly, without
real waiting."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest

from errorflow.bus.endpoint import (
    RESEND_TICK_S,
    Endpoint,
    SeenSet,
    first_seq,
)
from errorflow.bus.transport import Connection, Delivery, InProcessBus, Posted
from errorflow.core.taxonomy import ErrorCode
from errorflow.protocol import signing, topics
from errorflow.protocol.control import Ack, Bye
from errorflow.protocol.envelope import (
    Envelope,
    Kind,
    WireError,
    decode,
)
from errorflow.runtime.recorder import Recorder


class FakeClock:
    """A monotonic clock for one endpoint; `sleep` is its driver's sleep.

    `advance` moves time on and returns once the driver has acted on the new time and
    sleeps again."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self._moved = asyncio.Event()
        self._asleep = asyncio.Event()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        wake = self.now + seconds
        while self.now < wake:
            self._moved.clear()
            self._asleep.set()
            await self._moved.wait()
        self._asleep.clear()

    async def asleep(self) -> None:
        await asyncio.wait_for(self._asleep.wait(), 2)

    async def advance(self, seconds: float) -> None:
        await self.asleep()
        self.now += seconds
        self._asleep.clear()
        self._moved.set()
        await self.asleep()


class Recording:
    """A connection that notes when (on the fake clock) each publish happened."""

    def __init__(self, conn: Connection, clock: Callable[[], float]) -> None:
        self.conn = conn
        self.client_id = conn.client_id
        self.clock = clock
        self.published: list[tuple[float, str]] = []

    async def publish(self, topic: str, payload: bytes) -> None:
        self.published.append((self.clock(), topic))
        await self.conn.publish(topic, payload)

    async def subscribe(self, pattern: str) -> None:
        await self.conn.subscribe(pattern)

    def messages(self) -> AsyncIterator[tuple[str, bytes]]:
        return self.conn.messages()

    async def close(self) -> None:
        await self.conn.close()


async def until(condition: Callable[[], bool], turns: int = 100) -> None:
    """Let other tasks run (no time passes) until `condition` holds."""
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never met")


def _env(id: str, seq: int, sender: str = "a") -> Envelope:
    return Envelope(id=id, run_id="r", trial=0, seq=seq, sender=sender, recipient="b",
                    kind=Kind.RESULT, trace_id="t")  # fmt: skip


def test_seen_set_is_keyed_by_id_and_by_sender_and_seq_and_bounded() -> None:
    seen = SeenSet()
    assert seen.repeat(_env("a", 0)) is None and seen.repeat(_env("b", 1)) is None
    assert seen.repeat(_env("a", 0)) == "duplicate"  # a resend: the same id
    assert seen.repeat(_env("c", 0)) == "replayed_seq"  # a's seq 0 again, under a new id
    assert seen.repeat(_env("d", 0, sender="other")) is None  # seqs are per sender
    seen.WINDOW = 3
    for n, key in enumerate("efgh", start=10):
        assert seen.repeat(_env(key, n)) is None
    assert seen.repeat(_env("a", 0)) is None  # forgotten: the oldest leave first, both keys
    assert len(seen._ids) == len(seen._seqs) == 3


def test_seqs_start_from_the_clock_so_a_restarted_sender_goes_on_above() -> None:
    before = first_seq()
    ep = Endpoint(Captured(), "r", "a")
    assert ep.seq >= before and ep.seq < 10**16  # microseconds: 16 digits for centuries
    assert Endpoint(Captured(), "r", "a", seq_from=5).seq == 5


async def _pair(
    bus: InProcessBus, members: set[str], clock: FakeClock
) -> tuple[Endpoint, Endpoint]:
    a = Endpoint(await bus.connect("a"), "r", "a", members, clock=clock, sleep=clock.sleep)
    b_clock = FakeClock()  # never advanced: b sends nothing that needs a resend
    b = Endpoint(await bus.connect("b"), "r", "b", members, clock=b_clock, sleep=b_clock.sleep)
    for ep in (a, b):
        await ep.conn.subscribe(topics.inbox("r", ep.name))
        await ep.start()
    return a, b


def _posted(item: Delivery) -> Envelope:
    """The envelope an in-process connection delivered; its text is the same envelope."""
    assert isinstance(item, Posted)
    assert decode(item.text.encode()) == item.env
    return item.env


async def _drain(ep: Endpoint, into: list[Envelope], n: int) -> None:
    async for env in ep.receive():
        into.append(env)
        if len(into) >= n:
            return


async def test_acked_messages_are_not_resent() -> None:
    bus = InProcessBus()
    clock = FakeClock()
    a, b = await _pair(bus, {"a", "b"}, clock)
    got: list[Envelope] = []
    reader_b = asyncio.create_task(_drain(b, got, 1))
    reader_a = asyncio.create_task(_drain(a, [], 10**9))  # processes acks
    await a.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t")
    assert a.pending == 1
    await asyncio.wait_for(reader_b, 2)
    await until(lambda: not a.pending)  # the ack is back before any time has passed
    await clock.advance(60.0)  # far past every deadline
    assert not a.pending and a.resent == 0
    reader_a.cancel()
    await a.close()
    await b.close()


async def test_unacked_messages_are_resent_on_the_deadlines_then_given_up() -> None:
    bus = InProcessBus()
    clock = FakeClock()
    conn = Recording(await bus.connect("a"), clock)
    a = Endpoint(
        conn,
        "r",
        "a",
        {"a", "b"},
        ack_timeout_s=0.125,
        max_resends=2,
        clock=clock,
        sleep=clock.sleep,
    )
    await a.start()
    silent = await bus.connect("b")  # subscribed, never acks
    await silent.subscribe(topics.inbox("r", "b"))
    env = await a.send(kind=Kind.TASK, recipient="b", trial=0, trace_id="t")
    for _ in range(13):  # to 0.8125 s, in steps finer than the deadlines
        await clock.advance(1 / 16)
    assert a.resent == 2 and a.undelivered == 0 and a.pending == 1
    await clock.advance(1 / 16)  # 0.875 = 0.375 + 0.125 * 2 ** 2: given up
    assert a.resent == 2 and a.undelivered == 1 and not a.pending
    for _ in range(8):
        await clock.advance(1.0)
    assert a.resent == 2 and a.undelivered == 1
    inbox = topics.inbox("r", "b")
    assert [t for t, topic in conn.published if topic == inbox] == [0.0, 0.125, 0.375]
    copies = []
    while not silent.queue.empty():  # type: ignore[attr-defined]
        copies.append(silent.queue.get_nowait())  # type: ignore[attr-defined]
    assert len(copies) == 3 and len({raw for _, raw in copies}) == 1  # same id, same bytes
    assert env.id.encode() in copies[0][1]
    await a.close()


async def test_driver_sleeps_until_the_next_deadline_at_most_a_tick() -> None:
    bus = InProcessBus()
    clock = FakeClock()
    a = Endpoint(
        await bus.connect("a"),
        "r",
        "a",
        {"a", "b"},
        ack_timeout_s=0.375,
        clock=clock,
        sleep=clock.sleep,
    )
    await a.start()
    await clock.asleep()
    await a.send(kind=Kind.TASK, recipient="b", trial=0, trace_id="t")  # due at 0.375
    await clock.advance(RESEND_TICK_S)
    await clock.advance(0.125)
    assert a.resent == 1  # next due at 0.375 + 0.375 * 2 = 1.125
    assert clock.sleeps == [RESEND_TICK_S, 0.125, RESEND_TICK_S]
    await a.close()


async def test_ack_is_a_typed_control_message_built_like_any_other() -> None:
    bus = InProcessBus()
    clock = FakeClock()
    a, b = await _pair(bus, {"a", "b"}, clock)
    spy = await bus.connect("spy")
    await spy.subscribe(topics.acks("r", "a"))
    got: list[Envelope] = []
    reader_b = asyncio.create_task(_drain(b, got, 1))
    task = await a.send(kind=Kind.TASK, recipient="b", trial=4, trace_id="t4")
    await asyncio.wait_for(reader_b, 2)
    await b.acks_sent()
    _, raw = spy.queue.get_nowait()  # type: ignore[attr-defined]
    ack = _posted(raw)
    assert ack.kind is Kind.CONTROL and (ack.sender, ack.recipient) == ("b", "a")
    assert (ack.trial, ack.trace_id) == (4, "t4")
    assert ack.payload == Ack(id=task.id).to_payload() == {"action": "ack", "id": task.id}
    later = await b.send(kind=Kind.RESULT, recipient="a", trial=4, trace_id="t4")
    assert later.seq == ack.seq + 1  # acks and sends share one sequence
    await a.close()
    await b.close()


class SlowAcks(Recording):
    """A connection whose ack publishes wait until the test releases them (a broker
    slow to answer with its PUBACK)."""

    def __init__(self, conn: Connection, clock: Callable[[], float]) -> None:
        super().__init__(conn, clock)
        self.release = asyncio.Event()

    async def publish(self, topic: str, payload: bytes) -> None:
        if "/ack/" in topic:
            await self.release.wait()
        await super().publish(topic, payload)


async def test_the_receive_loop_does_not_wait_for_its_acks_to_go_out_but_a_bye_does() -> None:
    """Over a connection to a broker (here one whose PUBACKs are slow)."""
    bus = InProcessBus()
    clock = FakeClock()
    a, _ = await _pair(bus, {"a", "b"}, clock)
    slow = SlowAcks(await bus.connect("b2"), clock)
    b = Endpoint(slow, "r", "b", {"a", "b"}, clock=clock, sleep=clock.sleep)
    await slow.subscribe(topics.inbox("r", "b"))
    await b.start()
    got: list[Envelope] = []
    reader_b = asyncio.create_task(_drain(b, got, 3))
    for _ in range(3):
        await a.send(kind=Kind.TASK, recipient="b", trial=1, trace_id="t")
    await asyncio.wait_for(reader_b, 2)  # all three taken while no ack is out yet
    assert len(got) == 3 and slow.published == [] and len(b._acking) == 3
    bye = asyncio.create_task(b.control(Bye(agent="b"), trace="presence"))
    await asyncio.sleep(0.01)
    assert not bye.done() and slow.published == []  # the bye waits behind the acks
    slow.release.set()
    await asyncio.wait_for(bye, 2)
    kinds = [topic.split("/")[2] for _, topic in slow.published]
    assert kinds == ["ack", "ack", "ack", "control"]  # the bye is the last word
    assert not b._acking
    await a.close()
    await b.close()


async def test_in_process_acks_go_out_at_once_without_a_task() -> None:
    """On the in-process bus an ack is delivered as the message is taken (no task, no
    wait); with an inbox full it falls back to a task that waits for room."""
    bus = InProcessBus()
    clock = FakeClock()
    a, b = await _pair(bus, {"a", "b"}, clock)
    spy = await bus.connect("spy")
    await spy.subscribe(topics.acks("r", "a"))
    got: list[Envelope] = []
    reader_b = asyncio.create_task(_drain(b, got, 2))
    sent = [await a.send(kind=Kind.TASK, recipient="b", trial=1, trace_id="t") for _ in range(2)]
    await asyncio.wait_for(reader_b, 2)
    assert not b._acking
    acks = [_posted(spy.queue.get_nowait()[1]) for _ in range(2)]  # type: ignore[attr-defined]
    assert [ack.payload["id"] for ack in acks] == [m.id for m in sent]
    spy.queue.maxsize = 1  # type: ignore[attr-defined]
    spy.queue.put_nowait(("x", b""))  # type: ignore[attr-defined]
    reader_b = asyncio.create_task(_drain(b, got, 3))
    third = await a.send(kind=Kind.TASK, recipient="b", trial=1, trace_id="t")
    await asyncio.wait_for(reader_b, 2)
    assert len(b._acking) == 1  # waiting for room in the spy's inbox
    spy.queue.get_nowait()  # type: ignore[attr-defined]
    await b.acks_sent()
    assert _posted(spy.queue.get_nowait()[1]).payload["id"] == third.id  # type: ignore[attr-defined]
    await a.close()
    await b.close()


async def test_only_a_valid_ack_for_us_acknowledges_and_no_ack_is_passed_on() -> None:
    bus = InProcessBus()
    clock = FakeClock()
    a, _b = await _pair(bus, {"a", "b", "c"}, clock)
    task = await a.send(kind=Kind.TASK, recipient="b", trial=0, trace_id="t")
    forger = await bus.connect("c")

    seqs = iter(range(100))  # a sender's seqs do not repeat (a repeat is `replayed_seq`)

    async def forge(recipient: str, payload: dict[str, object]) -> None:
        env = Envelope(
            run_id="r",
            trial=0,
            seq=next(seqs),
            sender="c",
            recipient=recipient,
            kind=Kind.CONTROL,
            trace_id="t",
            payload=payload,
        )
        await forger.publish(topics.acks("r", "a"), env.encode())

    bad = [
        ("a", {"action": "ack"}),  # no id
        ("a", {"action": "ack", "id": task.id, "extra": 1}),  # not the Ack contract
        ("someone", {"action": "ack", "id": task.id}),  # addressed to someone else
    ]
    for recipient, payload in bad:
        await forge(recipient, payload)
    got: list[Envelope] = []
    reader = asyncio.create_task(_drain(a, got, 1))
    await until(lambda: a.conn.queue.empty())  # type: ignore[attr-defined]
    assert a.pending == 1 and got == []  # nothing acked, nothing passed on
    await forge("a", Ack(id=task.id).to_payload())
    await until(lambda: not a.pending)
    assert got == []
    reader.cancel()
    await a.close()


async def test_restarted_sender_is_not_a_replay() -> None:
    bus = InProcessBus()
    b = Endpoint(await bus.connect("b"), "r", "b", {"a", "b"})
    await b.conn.subscribe(topics.inbox("r", "b"))
    got: list[Envelope] = []
    reader = asyncio.create_task(_drain(b, got, 2))
    first = Endpoint(await bus.connect("a1"), "r", "a", {"a", "b"})
    await first.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t")
    again = Endpoint(await bus.connect("a2"), "r", "a", {"a", "b"})  # seq from the clock again
    await again.send(kind=Kind.RESULT, recipient="b", trial=1, trace_id="t")
    await asyncio.wait_for(reader, 2)
    assert [e.trial for e in got] == [0, 1]
    assert b.rejects["duplicate"] == 0


class Captured:
    """A connection that only keeps what is published."""

    client_id = "captured"

    def __init__(self) -> None:
        self.published: list[tuple[str, bytes]] = []

    async def publish(self, topic: str, payload: bytes) -> None:
        self.published.append((topic, payload))

    async def subscribe(self, pattern: str) -> None:
        pass

    def messages(self) -> AsyncIterator[tuple[str, bytes]]:
        raise NotImplementedError

    async def close(self) -> None:
        pass


async def test_a_seq_again_under_a_new_id_is_rejected_and_not_acked() -> None:
    """A real sender (the run key signs it) repeating a seq with a new id: `replayed_seq`;
    a resend (same bytes) stays a `duplicate`, acked again."""
    key = signing.new_key()
    bus = InProcessBus()
    b = Endpoint(await bus.connect("b"), "r", "b", {"a", "b"}, key=key)
    await b.conn.subscribe(topics.inbox("r", "b"))
    acks = await bus.connect("spy")
    await acks.subscribe(topics.acks("r", "a"))
    a = Endpoint(Captured(), "r", "a", {"a", "b"}, key=key)
    first = await a.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t")
    replayed = first.model_copy(update={"id": "new-id", "trial": 1})
    second = await a.send(kind=Kind.RESULT, recipient="b", trial=2, trace_id="t")
    inbox = topics.inbox("r", "b")
    raws = [first.encode(key), first.encode(key), replayed.encode(key), second.encode(key)]
    publisher = await bus.connect("pub")
    for raw in raws:
        await publisher.publish(inbox, raw)
    got: list[Envelope] = []
    await asyncio.wait_for(_drain(b, got, 2), 2)
    assert [e.trial for e in got] == [0, 2]
    assert b.rejects == {"duplicate": 1, "replayed_seq": 1}
    acked = []
    while not acks.queue.empty():  # type: ignore[attr-defined]
        acked.append(_posted(acks.queue.get_nowait()[1]).payload["id"])  # type: ignore[attr-defined]
    assert acked == [first.id, first.id, second.id]  # the replay is not acked


def test_the_recorder_files_a_replayed_seq_as_a_reject() -> None:
    """The recorder applies the same rule: what no receiver accepts is not a message row."""
    key = signing.new_key()
    recorder = Recorder(None, Captured(), "r", {"a", "b"}, key=key)  # type: ignore[arg-type]
    first = _env("m1", 41)
    for env in (first, first, first.model_copy(update={"id": "m2"}), _env("m3", 42)):
        recorder.handle(topics.inbox("r", "b"), env.encode(key))
    assert recorder.counts["result"] == 2
    assert recorder.rejects == {"duplicate": 1, "replayed_seq": 1}
    assert [row.reason for row in recorder._rejects] == ["duplicate", "replayed_seq"]


async def test_close_does_not_hang_on_a_resender_that_ignores_its_cancellation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import errorflow.bus.endpoint as endpoint_module

    monkeypatch.setattr(endpoint_module, "CLOSE_WAIT_S", 0.2)
    ep = Endpoint(await InProcessBus().connect("a"), "r", "a")
    release = asyncio.Event()

    async def stubborn() -> None:  # swallows its cancellation, as a library bug may
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()

    ep._resender = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(ep.close(), 2)  # returns after CLOSE_WAIT_S, does not hang
    assert not ep._resender.done()
    release.set()
    await ep._resender


async def test_what_is_sent_is_redacted_and_signed_as_sent() -> None:
    """The last net before the bus: a payload or error built with a secret in it goes
    out redacted (signed as redacted, a message cut to the wire's limit), `send` returns
    it as it went out, and a clean message goes out as built."""
    wire = Captured()
    key = signing.new_key()
    a = Endpoint(wire, "r", "a", {"a", "b"}, key=key)
    text = "x" * 1988 + " sk-abcdefgh"  # 2000 characters, 2003 once redacted
    error = WireError(code=ErrorCode.TRANSIENT, origin="a", message=text)
    payload = {"prompt": "use ghp_abcdefghijklmnop1234", "args": {"password": "hunter2"}}
    sent = await a.send(
        kind=Kind.RESULT, recipient="b", trial=0, trace_id="t", payload=payload, errors=[error]
    )
    _, raw = wire.published.pop(0)
    assert signing.verify(key, raw) is None
    assert decode(raw).model_copy(update={"sig": None}) == sent
    assert sent.payload == {"prompt": "use [REDACTED_KEY]", "args": {"password": "[REDACTED]"}}
    assert sent.errors[0].message == ("x" * 1988 + " [REDACTED_KEY]")[:2000]
    assert b"hunter2" not in raw and b"ghp_" not in raw and b"sk-abcdefgh" not in raw
    clean = {"claims": [{"key": "token_count", "value": "a/b, input_tokens=3"}]}
    sent = await a.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t", payload=clean)
    _, raw = wire.published.pop(0)
    assert sent.payload == clean and raw == sent.encode(key)


async def test_what_is_posted_in_process_is_redacted_as_sent_and_not_signed() -> None:
    """On the in-process bus the same net: the receivers get the redacted envelope `send`
    returns and its text, unsigned (nobody outside can listen); `clean` says whether the
    store must search the text again."""
    bus = InProcessBus()
    spy = await bus.connect("spy")
    await spy.subscribe("#")
    a = Endpoint(await bus.connect("a"), "r", "a", {"a", "b"}, key=signing.new_key())
    payload = {"prompt": "use ghp_abcdefghijklmnop1234", "args": {"password": "hunter2"}}
    sent = await a.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t", payload=payload)
    _, item = spy.queue.get_nowait()  # type: ignore[attr-defined]
    assert _posted(item) is sent and sent.sig is None and '"sig"' not in item.text
    assert sent.payload == {"prompt": "use [REDACTED_KEY]", "args": {"password": "[REDACTED]"}}
    assert "hunter2" not in item.text and "ghp_" not in item.text and not item.clean
    clean = {"claims": [{"key": "k", "value": 1}]}
    sent = await a.send(kind=Kind.RESULT, recipient="b", trial=0, trace_id="t", payload=clean)
    _, item = spy.queue.get_nowait()  # type: ignore[attr-defined]
    assert _posted(item) is sent and item.clean and item.text == sent.encode().decode()
