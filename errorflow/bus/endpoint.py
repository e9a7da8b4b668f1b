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
acknowledged, at most `max_resends` times with a doubling timeout. What is still
unacknowledged after that is counted as `undelivered` (and the runner marks the trial
`bus_fault` when its final result never arrives). When to resend and when to give up
is decided by the pure `Outbox` (`errorflow.bus.outbox`); the endpoint only carries
its decisions out, on the clock it was given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

from errorflow.bus import signing, topics
from errorflow.bus.envelope import (
    Envelope,
    JsonObject,
    Kind,
    RejectedMessage,
    Status,
    WireError,
    decode,
)
from errorflow.bus.outbox import GiveUp, Outbox, Resend
from errorflow.bus.transport import Connection
from errorflow.core.control import Ack, Control, ControlAction, parse_control
from errorflow.core.events import Event
from errorflow.core.redact import redact

log = logging.getLogger(__name__)

ACK_TIMEOUT_S = 2.0
MAX_RESENDS = 6
#: The longest the resend driver sleeps: it sleeps until the next deadline, but a
#: message sent meanwhile may be due sooner, and is then resent at most this late.
RESEND_TICK_S = 0.25
RELIABLE_KINDS = (Kind.TASK, Kind.RESULT)


def first_seq() -> int:
    """Where a new endpoint's seq starts: the wall clock in microseconds (16 digits until
    the year 2286; JSON and SQLite hold it exactly)."""
    return time.time_ns() // 1000


class SeenSet:
    """Messages already handled, in a bounded window (oldest forgotten first): by id (a
    resend repeats it, and is a `duplicate`) and by (sender, seq) (a message of a sender
    again under a new id: `replayed_seq`; seqs do not repeat, see `first_seq`)."""

    WINDOW = 500_000

    def __init__(self) -> None:
        self._ids: dict[str, tuple[str, int]] = {}  # insertion order: oldest first
        self._seqs: set[tuple[str, int]] = set()

    def repeat(self, env: Envelope) -> str | None:
        """None for a new message (now seen); otherwise the reason it is a repeat."""
        if env.id in self._ids:
            return "duplicate"
        key = (env.sender, env.seq)
        if key in self._seqs:
            return "replayed_seq"
        self._ids[env.id] = key
        self._seqs.add(key)
        if len(self._ids) > self.WINDOW:
            self._seqs.discard(self._ids.pop(next(iter(self._ids))))
        return None


class Endpoint:
    """One participant's view of the bus; `clock` and `sleep` drive the resends (tests
    pass fake ones: the decisions themselves are the `Outbox`'s); `seq_from` is the
    first seq (default: `first_seq()`)."""

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
    ) -> None:
        self.conn = conn
        # The run key: everything we send is signed and everything we accept must carry a
        # valid signature. None only for a read-only observer that cannot verify (it
        # neither signs nor checks; the TUI says so in its header).
        self.key = key
        self.run_id = run_id
        self.name = name
        self.members = set(members) if members is not None else None
        self.seq = first_seq() if seq_from is None else seq_from
        self.rejects: Counter[str] = Counter()
        self.seen = SeenSet()
        self.outbox = Outbox(ack_timeout_s, max_resends)
        self._clock = clock
        self._sleep = sleep
        self._resender: asyncio.Task[None] | None = None

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
        if self._resender is not None:
            self._resender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resender

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
    ) -> Envelope:
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
        raw = env.encode(self.key)
        if kind in RELIABLE_KINDS and self._resender is not None:
            self.outbox.add(env.id, topic, raw, self._clock())  # before an ack can arrive
        await self.conn.publish(topic, raw)
        return env

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
        env = Envelope(
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

    async def publish_event(self, trial: int, trace_id: str, event: Event) -> None:
        """Publish one telemetry event to the run's observers."""
        await self.send(
            kind=Kind.EVENT,
            recipient="observers",
            trial=trial,
            trace_id=trace_id,
            payload=event.to_payload(),
        )

    async def control(self, action: Control, *, recipient: str = "all", trace: str) -> None:
        """Publish one control action (trial 0; `trace` names the conversation:
        "presence", "control")."""
        await self.send(
            kind=Kind.CONTROL,
            recipient=recipient,
            trial=0,
            trace_id=f"{self.run_id}-{trace}",
            payload=action.to_payload(),
        )

    def check(self, topic: str, raw: bytes) -> Envelope | None:
        """Validate one incoming message; None (and a count) if it must be dropped."""
        env, _ = self._check(raw)
        return env

    def _check(self, raw: bytes) -> tuple[Envelope | None, Envelope | None]:
        """(accepted message, message to acknowledge): a duplicate is acked (its sender
        may not have had our ack), not passed on; a replayed seq is neither."""
        try:
            env = decode(raw)
        except RejectedMessage as exc:
            self.rejects[exc.reason] += 1
            return None, None
        reason = rejection_reason(env, self.run_id, self.members)
        if reason is None and self.key is not None:
            reason = signing.verify(self.key, raw)  # before anything acts on it, acks too
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
            if env.kind is Kind.CONTROL and env.payload.get("action") == ControlAction.ACK:
                ack = parse_control(env.payload)  # a malformed ack acknowledges nothing
                if isinstance(ack, Ack) and env.recipient == self.name:
                    self.outbox.ack(ack.id)
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

    async def _ack(self, env: Envelope) -> None:
        ack = self._envelope(
            kind=Kind.CONTROL,
            recipient=env.sender,
            trial=env.trial,
            trace_id=env.trace_id,
            payload=Ack(id=env.id).to_payload(),
        )
        with contextlib.suppress(ConnectionError):
            await self.conn.publish(topics.acks(self.run_id, env.sender), ack.encode(self.key))

    async def _resend_loop(self) -> None:
        """The driver: sleep until the next deadline, then do what the outbox decided."""
        while True:
            await self._sleep(self._resend_sleep_s())
            await self._resend_due()

    def _resend_sleep_s(self) -> float:
        due = self.outbox.next_due()
        if due is None:
            return RESEND_TICK_S
        return min(RESEND_TICK_S, max(0.0, due - self._clock()))

    async def _resend_due(self) -> None:
        for action in self.outbox.due(self._clock()):
            if isinstance(action, Resend):
                with contextlib.suppress(ConnectionError):
                    await self.conn.publish(action.topic, action.raw)
            elif isinstance(action, GiveUp):
                log.warning(
                    "%s: message %s undelivered after %d sends",
                    self.name,
                    action.message_id,
                    action.sends,
                )


def rejection_reason(env: Envelope, run_id: str, members: set[str] | None) -> str | None:
    if env.run_id != run_id:
        return "wrong_run"
    if members is not None and env.sender not in members:
        return "unknown_sender"
    return None
