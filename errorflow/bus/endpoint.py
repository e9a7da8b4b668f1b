"""An endpoint: one named participant of a run on top of a bus connection.

It stamps what it sends (run, sender, per-sender seq) and checks what it receives:
invalid messages, messages of other runs, senders that are not part of the run,
duplicates (a message id seen before: `duplicate`) and a sender's seq seen before under
a new id (`replayed_seq`) are dropped and counted here, never passed on. The recorder
stores the rejected ones with their reasons.

A sender's seq counts up by one per message from where its endpoint started: the wall
clock in microseconds (`first_seq`). A sender that restarts (a new process under the
same name, rejoining the run) therefore goes on above its earlier seqs instead of at 0
again, and `(sender, seq)` names one message across restarts: a repeat is a replay,
never a restart. (Only a clock set back between two processes of one sender, by more
than the time between them, could make them overlap.)

Nothing silently lost: QoS 1 covers a hop to the broker, not a broker that restarts
without persistence. So task and result messages are acknowledged end to end: the
recipient answers every copy it gets (duplicates too) with an `ack` on
`errorflow/{run}/ack/{sender}`, and the sender resends, with the same id and seq, until
acknowledged, at most `max_resends` times with a doubling timeout that follows the
receiver's ack times (a busy receiver is not sent copies). What is still
unacknowledged after that is counted as `undelivered` (and the runner marks the trial
`bus_fault` when its final result never arrives). When to resend and when to give up
is decided by the pure `Outbox` (`errorflow.bus.outbox`); the endpoint only carries
its decisions out, on the clock it was given.

Bus faults (a scenario's `bus:` block) are injected here, on the send side: with a
`BusFaultPlan` (errorflow.faults.bus), every send of a task or result message, the
first and each resend, gets its fate from the plan (lost, doubled, delayed, held back
until our next message) and each fault fired is published first as a `bus_fault`
event. The acks and resends above are what recovers them; a message still lost after
its last resend is published as `bus_undelivered`, with the reason, so the runner ends
its trial as a `bus_fault` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from errorflow.bus.admission import admission
from errorflow.bus.outbox import GiveUp, Outbox, Resend
from errorflow.bus.own_copies import OWN_COPIES
from errorflow.bus.redaction import screened, sealed
from errorflow.bus.seen_seqs import CompactSeenSet, SeenSet
from errorflow.bus.transport import Connection, Delivery, Local, Posted, publish_soon
from errorflow.core.redact import redact
from errorflow.faults.bus import (
    BusFaultPlan,
    Send,
    attempt_at,
    undelivered_reason,
)
from errorflow.protocol import topics
from errorflow.protocol.control import (
    Control,
    ack_payload,
    acked_id,
    is_ack,
)
from errorflow.protocol.envelope import (
    Envelope,
    JsonObject,
    Kind,
    RejectedMessage,
    Status,
    WireError,
)
from errorflow.protocol.events import BusFaultFired, BusUndelivered, Event
from errorflow.protocol.result import round_of

log = logging.getLogger(__name__)

ACK_TIMEOUT_S = 2.0
MAX_RESENDS = 6
#: The longest the resend driver sleeps: it sleeps until the next deadline, but a
#: message sent meanwhile may be due sooner, and is then resent at most this late.
RESEND_TICK_S = 0.25
#: How long `close` waits for the resender to stop once cancelled (a cancellation a
#: client library swallowed must not hang the close).
CLOSE_WAIT_S = 5.0
#: Acks publishing at once per endpoint; past it the receive loop waits for the oldest
#: (a bound on tasks and memory when the broker is slower than the messages coming in).
ACKS_IN_FLIGHT = 256
RELIABLE_KINDS = (Kind.TASK, Kind.RESULT)


def first_seq() -> int:
    """Where a new endpoint's seq starts: the wall clock in microseconds (16 digits until
    the year 2286; JSON and SQLite hold it exactly)."""
    return time.time_ns() // 1000


@dataclass(slots=True)
class _Faulted:
    """A reliable message sent under bus faults: what its sends' draws are keyed by,
    its first send's run time, and what its sends lost, by fault kind."""

    trial: int
    trace_id: str
    recipient: str
    message: str  # kind and round: "result/0"
    first_at: float
    lost: Counter[str] = field(default_factory=Counter)
    delayed: int = 0  # copies a delay fault still holds


class Endpoint:
    """One participant's view of the bus; `clock` and `sleep` drive the resends (tests
    pass fake ones: the decisions themselves are the `Outbox`'s); `seq_from` is the
    first seq (default: `first_seq()`); `faults` the run's bus faults (its ack timeout
    and resends, when it sets them, replace the defaults)."""

    def __init__(
        self,
        conn: Connection,
        run_id: str,
        name: str,
        members: Iterable[str] | None = None,
        *,
        ack_timeout_s: float = ACK_TIMEOUT_S,
        max_resends: int = MAX_RESENDS,
        key: bytes | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        seq_from: int | None = None,
        faults: BusFaultPlan | None = None,
    ) -> None:
        self.conn = conn
        # A connection that never leaves the process takes our envelopes as they are
        # (`Posted`): no signing, and its receivers neither decode nor verify them.
        self._local = conn if isinstance(conn, Local) else None
        # A broker connection that writes a publish at once (gmqtt's) is used so: no task
        # and no coroutine chain of its own for each event and ack.
        self._soon = publish_soon(conn) if self._local is None else None
        # The run key: everything we send is signed and everything we accept must carry a
        # valid signature. None only for a read-only observer that cannot verify (it
        # neither signs nor checks; the TUI says so in its header).
        self.key = key
        self.run_id = run_id
        self.name = name
        self.members = set(members) if members is not None else None
        self.seq = first_seq() if seq_from is None else seq_from
        self.rejects: Counter[str] = Counter()
        # every (sender, seq) of the run remembered in flat memory (seen_seqs)
        self.seen: SeenSet = CompactSeenSet()
        if faults is not None and faults.ack_timeout_s is not None:
            ack_timeout_s = faults.ack_timeout_s
        if faults is not None and faults.max_resends is not None:
            max_resends = faults.max_resends
        # Simulated bus faults time their resends by the fixed schedule (outbox.py).
        self.outbox = Outbox(ack_timeout_s, max_resends, adaptive=faults is None)
        self.faults = faults
        self._faulted: dict[str, _Faulted] = {}  # by message id, while unacked
        self._held: list[tuple[float, str, Delivery]] = []  # reordered: (deadline, topic, raw)
        self._delayed: set[asyncio.Task[None]] = set()
        self._clock = clock
        self._sleep = sleep
        self._resender: asyncio.Task[None] | None = None
        # Acks publishing: the receive loop does not wait for the broker's PUBACK of each
        # one before the next message (a 32-wide fan-in's runner would otherwise take its
        # results one round trip at a time); controls wait for them (`control`).
        self._acking: set[asyncio.Future[None]] = set()

    @property
    def pending(self) -> int:
        """Reliable messages sent and not acknowledged yet."""
        return len(self.outbox)

    @property
    def resent(self) -> int:
        return self.outbox.resent

    @property
    def undelivered(self) -> int:
        return self.outbox.undelivered

    async def start(self) -> None:
        """Subscribe to our acknowledgements and start resending what is not acked."""
        await self.conn.subscribe(topics.acks(self.run_id, self.name))
        self._resender = asyncio.create_task(self._resend_loop(), name=f"resend-{self.name}")

    async def close(self) -> None:
        for task in list(self._delayed):
            task.cancel()
        if self._acking:  # acks already accepted for sending go out, within a bound
            _, late = await asyncio.wait(set(self._acking), timeout=CLOSE_WAIT_S)
            for ack in late:
                ack.cancel()
        if self._resender is not None:
            self._resender.cancel()
            done, _ = await asyncio.wait({self._resender}, timeout=CLOSE_WAIT_S)
            if not done:
                log.warning("%s: resender did not stop within %gs", self.name, CLOSE_WAIT_S)

    async def send(
        self,
        *,
        kind: Kind,
        recipient: str,
        trial: int,
        trace_id: str,
        payload: JsonObject | None = None,
        status: Status = Status.OK,
        confidence: float = 1.0,
        errors: list[WireError] | None = None,
        derived_from: list[str] | None = None,
        at: float | None = None,
    ) -> Envelope:
        """Send one message; `at` is its run time (simulated seconds), which bus faults'
        partitions are decided on (None: 0)."""
        env = self._envelope(
            kind=kind,
            recipient=recipient,
            trial=trial,
            trace_id=trace_id,
            payload=payload,
            status=status,
            confidence=confidence,
            errors=errors,
            derived_from=derived_from,
        )
        topic = topics.for_message(self.run_id, kind, self.name, recipient)
        raw: Delivery
        if self._local is not None:
            env, text, clean = screened(env)
            raw = Posted(env, text, clean)
        else:
            env, raw = self._sealed(env)
        tracked = kind in RELIABLE_KINDS and self._resender is not None
        if tracked:
            self.outbox.add(env.id, topic, raw, self._clock())  # before an ack can arrive
        if tracked and self.faults is not None:
            message = f"{kind.value}/{round_of(env.payload)}"
            self._faulted[env.id] = _Faulted(trial, trace_id, recipient, message, at or 0.0)
            await self._attempt(env.id, topic, raw, 1)
        else:
            await self._publish(topic, raw)
        return env

    async def _publish(self, topic: str, raw: Delivery) -> None:
        """Publish, then what a reorder fault held back until our next message."""
        await self._put(topic, raw)
        if self._held:
            held, self._held = self._held, []
            for _, held_topic, held_raw in held:
                await self._put(held_topic, held_raw)

    async def _put(self, topic: str, raw: Delivery) -> None:
        if isinstance(raw, Posted):
            assert self._local is not None  # only a local connection's sends are Posted
            await self._local.post(topic, raw)
        elif self._soon is not None and (written := self._soon(topic, raw)) is not None:
            await written
        else:
            await self.conn.publish(topic, raw)

    async def _attempt(self, message_id: str, topic: str, raw: Delivery, attempt: int) -> None:
        """One send of a message under bus faults: its fate, each fault fired published
        (before the message), and the message lost, published, delayed or held."""
        sent = self._faulted.get(message_id)
        if sent is None or self.faults is None:
            await self._publish(topic, raw)
            return
        at = attempt_at(sent.first_at, attempt, self.outbox.ack_timeout_s)
        send = Send(sent.trial, self.name, sent.recipient, sent.message, attempt, at)
        fate = self.faults.fate(send)
        for kind in fate.fired:
            event = BusFaultFired(
                sender=self.name,
                recipient=sent.recipient,
                kind=kind,
                message_id=message_id,
                attempt=attempt,
                at=round(at, 6),
            )
            await self.publish_event(sent.trial, sent.trace_id, event)
        if fate.lost:
            sent.lost[fate.fired[0]] += 1
            return
        copies = [(topic, raw)] * fate.copies
        if fate.delay_s > 0:
            wait = fate.delay_s * self.faults.time_scale
            sent.delayed += 1
            task = asyncio.create_task(self._deliver_later(wait, copies, fate.hold, sent))
            self._delayed.add(task)
            task.add_done_callback(self._delayed.discard)
        else:
            await self._deliver(copies, fate.hold)

    async def _deliver(self, copies: list[tuple[str, Delivery]], hold: bool) -> None:
        if hold:  # out after our next message, or the resend driver's next tick
            deadline = self._clock() + RESEND_TICK_S
            self._held.extend((deadline, topic, raw) for topic, raw in copies)
            return
        for topic, raw in copies:
            await self._publish(topic, raw)

    async def _deliver_later(
        self, wait_s: float, copies: list[tuple[str, Delivery]], hold: bool, sent: _Faulted
    ) -> None:
        try:
            await asyncio.sleep(wait_s)
            with contextlib.suppress(ConnectionError):  # lost: the resends recover it
                await self._deliver(copies, hold)
        finally:
            sent.delayed -= 1

    def _sealed(self, env: Envelope) -> tuple[Envelope, bytes]:
        """`env` as it leaves for the broker (redaction's net, signed), a copy kept for
        this process's receivers (`bus.own_copies`)."""
        env, raw, clean = sealed(env, self.key)
        OWN_COPIES.keep(raw, env, self.key, clean)
        return env, raw

    def _envelope(
        self,
        *,
        kind: Kind,
        recipient: str,
        trial: int,
        trace_id: str,
        payload: JsonObject | None = None,
        status: Status = Status.OK,
        confidence: float = 1.0,
        errors: list[WireError] | None = None,
        derived_from: list[str] | None = None,
    ) -> Envelope:
        """A new envelope from us, with our next seq."""
        env = Envelope.built(
            run_id=self.run_id,
            trial=trial,
            seq=self.seq,
            sender=self.name,
            recipient=recipient,
            kind=kind,
            trace_id=trace_id,
            derived_from=derived_from or [],
            status=status,
            confidence=confidence,
            errors=errors or [],
            payload=payload or {},
            ts=time.time(),  # wall clock, informational: not the resend clock
        )
        self.seq += 1
        return env

    async def publish_event(
        self, trial: int, trace_id: str, event: Event, at: float | None = None
    ) -> None:
        """Publish one telemetry event to the run's observers (`at`: see `to_payload`)."""
        await self.send(
            kind=Kind.EVENT,
            recipient="observers",
            trial=trial,
            trace_id=trace_id,
            payload=event.to_payload(at),
        )

    def post_event(
        self, trial: int, trace_id: str, event: Event, at: float | None = None
    ) -> Coroutine[Any, Any, None] | asyncio.Future[None] | None:
        """`publish_event` at once where it need not wait (no bus faults: an event's
        publish also lets out what a reorder fault held back). On an in-process bus with
        room in every inbox: None, delivered. On a broker connection that writes at
        once: a future, the message written after everything sent before it, to await
        for its PUBACK. Else the coroutine to await. A task per event cost more than the
        event itself."""
        local, soon = self._local, self._soon
        if (local is None and soon is None) or self.faults is not None or self._held:
            return self.publish_event(trial, trace_id, event, at)
        env = self._envelope(
            kind=Kind.EVENT,
            recipient="observers",
            trial=trial,
            trace_id=trace_id,
            payload=event.to_payload(at),
        )
        topic = topics.for_message(self.run_id, Kind.EVENT, self.name, "observers")
        raw: Delivery
        if local is None:
            assert soon is not None
            env, raw = self._sealed(env)
            written = soon(topic, raw)
            return written if written is not None else self._publish(topic, raw)
        env, text, clean = screened(env)
        raw = Posted(env, text, clean)
        return None if local.post_nowait(topic, raw) else self._publish(topic, raw)

    async def control(self, action: Control, *, recipient: str = "all", trace: str) -> None:
        """Publish one control action (trial 0; `trace` names the conversation:
        "presence", "control"), after every ack already being published: a `bye` or an
        `end` is the last word of what came before it."""
        await self.acks_sent()
        await self.send(
            kind=Kind.CONTROL,
            recipient=recipient,
            trial=0,
            trace_id=f"{self.run_id}-{trace}",
            payload=action.to_payload(),
        )

    def will(self, action: Control, recipient: str) -> tuple[str, bytes]:
        """A last will for the broker to publish if this connection drops uncleanly: the
        control `action` as our message, signed now (it takes the next seq, so it is one
        of our messages like any other, published at most once); its topic and bytes."""
        env = Envelope(
            run_id=self.run_id,
            trial=0,
            seq=self.seq,
            sender=self.name,
            recipient=recipient,
            kind=Kind.CONTROL,
            trace_id=f"{self.run_id}-presence",
            payload=action.to_payload(),
            ts=time.time(),
        )
        self.seq += 1
        return topics.control(self.run_id, self.name), env.encode(self.key)

    def check(self, topic: str, raw: Delivery) -> Envelope | None:
        """Validate one incoming message; None (and a count) if it must be dropped."""
        env, _ = self._check(raw)
        return env

    def _check(self, raw: Delivery) -> tuple[Envelope | None, Envelope | None]:
        """(accepted message, message to acknowledge): a duplicate is acked (its sender
        may not have had our ack), not passed on; a replayed seq is neither. A `Posted`
        envelope was validated when built, in this process: it is neither decoded nor
        verified; everything after that is the same for it."""
        try:
            env, reason, _ = admission(raw, self.run_id, self.members, self.key)
        except RejectedMessage as exc:
            self.rejects[exc.reason] += 1
            return None, None
        if reason is not None:
            self.rejects[reason] += 1
            return None, None
        to_ack = env if env.kind in RELIABLE_KINDS and env.recipient == self.name else None
        repeat = self.seen.repeat(env)
        if repeat is not None:
            self.rejects[repeat] += 1
            return None, to_ack if repeat == "duplicate" else None
        return env, to_ack

    async def receive(self) -> AsyncIterator[Envelope]:
        """Accepted messages; acks for us are consumed here, never passed on."""
        async for _topic, raw in self.conn.messages():
            env, to_ack = self._check(raw)
            if to_ack is not None:
                await self._ack(to_ack)
            if env is None:
                continue
            if env.kind is Kind.CONTROL and is_ack(env.payload):
                acked = acked_id(env.payload)  # a malformed ack acknowledges nothing
                if acked is not None and env.recipient == self.name:
                    self.outbox.ack(acked, self._clock())
                    self._faulted.pop(acked, None)
                continue
            yield env

    def handler_failed(self, env: Envelope, exc: Exception) -> None:
        """A receiver's code failed on one accepted message: counted and logged, and the
        receive loop goes on (no single message stops it)."""
        self.rejects["handler_error"] += 1
        log.error(
            "%s: message %s from %s could not be handled: %s",
            self.name,
            env.id,
            env.sender,
            redact(f"{type(exc).__name__}: {exc}")[:300],
        )

    async def acks_sent(self) -> None:
        """Wait until every ack being published is out (or has failed)."""
        while self._acking:
            await asyncio.wait(set(self._acking))

    async def _ack(self, env: Envelope) -> None:
        """Start publishing the ack of `env` and return (at most `ACKS_IN_FLIGHT` at once:
        past that, wait for one). Its seq is taken now, in receive order."""
        ack = self._envelope(
            kind=Kind.CONTROL,
            recipient=env.sender,
            trial=env.trial,
            trace_id=env.trace_id,
            payload=ack_payload(env.id),
        )
        topic = topics.acks(self.run_id, env.sender)
        raw: Delivery
        if self._local is not None:
            ack, text, clean = screened(ack)
            raw = Posted(ack, text, clean)
            if self._local.post_nowait(topic, raw):  # room in every inbox: no task
                return
        else:
            raw = ack.encode(self.key)
            OWN_COPIES.keep(raw, ack, self.key, False)  # built of our own fields, never searched
            if self._soon is not None and (written := self._soon(topic, raw)) is not None:
                self._acking.add(written)  # written: no task, its PUBACK to come
                written.add_done_callback(self._ack_settled)
                return
        while len(self._acking) >= ACKS_IN_FLIGHT:
            await asyncio.wait(set(self._acking), return_when=asyncio.FIRST_COMPLETED)
        task = asyncio.create_task(self._publish_ack(topic, raw))
        self._acking.add(task)
        task.add_done_callback(self._acking.discard)

    def _ack_settled(self, written: asyncio.Future[None]) -> None:
        """An ack written at once is out, or failed as `_publish_ack` takes it."""
        self._acking.discard(written)
        exc = None if written.cancelled() else written.exception()
        if exc is not None and not isinstance(exc, ConnectionError):
            log.warning("%s: ack not sent: %s", self.name, redact(repr(exc))[:300])

    async def _publish_ack(self, topic: str, raw: Delivery) -> None:
        """One ack out; a lost connection loses it (the sender resends and is acked
        again), anything else is logged, never raised into a task nobody awaits."""
        try:
            await self._put(topic, raw)
        except ConnectionError:
            pass
        except Exception as exc:  # a detached task: log it, never lose it silently
            log.warning("%s: ack to %s not sent: %s", self.name, topic, redact(repr(exc))[:300])

    async def _resend_loop(self) -> None:
        """The driver: sleep until the next deadline, then do what the outbox decided."""
        while True:
            await self._sleep(self._resend_sleep_s())
            await self._resend_due()

    def _resend_sleep_s(self) -> float:
        dues = [self.outbox.next_due(), *(d for d, _, _ in self._held[:1])]
        due = min((d for d in dues if d is not None), default=None)
        if due is None:
            return RESEND_TICK_S
        return min(RESEND_TICK_S, max(0.0, due - self._clock()))

    async def _resend_due(self) -> None:
        now = self._clock()
        if self._held and self._held[0][0] <= now:  # nothing else sent meanwhile
            held, self._held = self._held, []
            for _, topic, raw in held:
                with contextlib.suppress(ConnectionError):
                    await self._put(topic, raw)
        for action in self.outbox.due(now):
            if isinstance(action, Resend):
                with contextlib.suppress(ConnectionError):
                    await self._attempt(action.message_id, action.topic, action.raw, action.sends)
            elif isinstance(action, GiveUp):
                await self._undelivered(action)

    async def _undelivered(self, action: GiveUp) -> None:
        """A message given up: logged; under bus faults also said on the bus, with why
        (the faults were asked for: not worth a warning)."""
        sent = self._faulted.pop(action.message_id, None)
        log.log(
            logging.WARNING if sent is None else logging.DEBUG,
            "%s: message %s undelivered after %d sends",
            self.name,
            action.message_id,
            action.sends,
        )
        if sent is None or sent.delayed:  # a delayed copy may still arrive: not lost
            return
        event = BusUndelivered(
            sender=self.name,
            recipient=sent.recipient,
            message_id=action.message_id,
            sends=action.sends,
            reason=undelivered_reason(self.name, sent.recipient, sent.lost, action.sends),
            at=round(attempt_at(sent.first_at, action.sends, self.outbox.ack_timeout_s), 6),
        )
        with contextlib.suppress(ConnectionError):
            await self.publish_event(sent.trial, sent.trace_id, event)
