"""An endpoint: one named participant of a run on top of a bus connection.

It stamps what it sends (run, sender, per-sender seq) and checks what it receives:
invalid messages, messages of other runs, senders that are not part of the run and
duplicates (same sender and seq) are dropped and counted here, never passed on. The
recorder stores the rejected ones with their reasons.

Nothing silently lost: QoS 1 covers a hop to the broker, not a broker that restarts
without persistence. So task and result messages are acknowledged end to end: the
recipient answers every copy it gets (duplicates too) with an `ack` on
`errorflow/{run}/ack/{sender}`, and the sender resends, with the same id and seq, until
acknowledged, at most `max_resends` times with a doubling timeout. What is still
unacknowledged after that is counted as `undelivered` (and the runner marks the trial
`bus_fault` when its final result never arrives).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from errorflow.bus import topics
from errorflow.bus.envelope import Envelope, Kind, RejectedMessage, Status, WireError, decode
from errorflow.bus.transport import Connection
from errorflow.core.control import Control
from errorflow.core.events import Event

log = logging.getLogger(__name__)

ACK_TIMEOUT_S = 2.0
MAX_RESENDS = 6
RESEND_TICK_S = 0.25
RELIABLE_KINDS = (Kind.TASK, Kind.RESULT)


class SeenSet:
    """Message ids already handled, in a bounded window (oldest forgotten first).

    Keyed by message id, not by (sender, seq): a resend or replay repeats the id, while
    a restarted sender starts its seq at 0 again with new ids and must not be mistaken
    for a replay. `seq` stays on the wire to make loss and reordering visible."""

    WINDOW = 500_000

    def __init__(self) -> None:
        self._seen: dict[str, None] = {}

    def add(self, message_id: str) -> bool:
        """True if new; False for a message already handled."""
        if message_id in self._seen:
            return False
        self._seen[message_id] = None
        if len(self._seen) > self.WINDOW:
            del self._seen[next(iter(self._seen))]  # dicts keep insertion order
        return True


@dataclass
class _Pending:
    topic: str
    raw: bytes
    sends: int
    due: float


class Endpoint:
    def __init__(
        self,
        conn: Connection,
        run_id: str,
        name: str,
        members: Iterable[str] | None = None,
        *,
        ack_timeout_s: float = ACK_TIMEOUT_S,
        max_resends: int = MAX_RESENDS,
    ) -> None:
        self.conn = conn
        self.run_id = run_id
        self.name = name
        self.members = set(members) if members is not None else None
        self.seq = 0
        self.rejects: Counter[str] = Counter()
        self.seen = SeenSet()
        self.ack_timeout_s = ack_timeout_s
        self.max_resends = max_resends
        self.pending: dict[str, _Pending] = {}
        self.resent = 0
        self.undelivered = 0
        self._resender: asyncio.Task[None] | None = None

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
        payload: dict[str, Any] | None = None,
        status: Status = Status.OK,
        confidence: float = 1.0,
        errors: list[WireError] | None = None,
        derived_from: list[str] | None = None,
    ) -> Envelope:
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
            ts=time.time(),
        )
        self.seq += 1
        topic = topics.for_message(self.run_id, kind, self.name, recipient)
        raw = env.encode()
        if kind in RELIABLE_KINDS and self._resender is not None:
            self.pending[env.id] = _Pending(topic, raw, 1, time.monotonic() + self.ack_timeout_s)
        await self.conn.publish(topic, raw)
        return env

    async def event(self, trial: int, trace_id: str, type_: str, data: dict[str, Any]) -> None:
        """Deprecated: untyped events (removed once every producer sends typed ones)."""
        await self.send(
            kind=Kind.EVENT,
            recipient="observers",
            trial=trial,
            trace_id=trace_id,
            payload={"type": type_, **data},
        )

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
        """(accepted message, message to acknowledge): a duplicate is acked, not passed on."""
        try:
            env = decode(raw)
        except RejectedMessage as exc:
            self.rejects[exc.reason] += 1
            return None, None
        reason = rejection_reason(env, self.run_id, self.members)
        if reason is not None:
            self.rejects[reason] += 1
            return None, None
        to_ack = env if env.kind in RELIABLE_KINDS and env.recipient == self.name else None
        if not self.seen.add(env.id):
            self.rejects["duplicate"] += 1
            return None, to_ack
        return env, to_ack

    async def receive(self) -> AsyncIterator[Envelope]:
        async for _topic, raw in self.conn.messages():
            env, to_ack = self._check(raw)
            if to_ack is not None:
                await self._ack(to_ack)
            if env is None:
                continue
            if env.kind is Kind.CONTROL and env.payload.get("action") == "ack":
                if env.recipient == self.name:
                    self.pending.pop(str(env.payload.get("id")), None)
                continue
            yield env

    async def _ack(self, env: Envelope) -> None:
        ack = Envelope(
            run_id=self.run_id,
            trial=env.trial,
            seq=self.seq,
            sender=self.name,
            recipient=env.sender,
            kind=Kind.CONTROL,
            trace_id=env.trace_id,
            payload={"action": "ack", "id": env.id},
            ts=time.time(),
        )
        self.seq += 1
        with contextlib.suppress(ConnectionError):
            await self.conn.publish(topics.acks(self.run_id, env.sender), ack.encode())

    async def _resend_loop(self) -> None:
        while True:
            await asyncio.sleep(RESEND_TICK_S)
            now = time.monotonic()
            for message_id, p in list(self.pending.items()):
                if p.due > now:
                    continue
                if p.sends > self.max_resends:
                    del self.pending[message_id]
                    self.undelivered += 1
                    log.warning(
                        "%s: message %s undelivered after %d sends", self.name, message_id, p.sends
                    )
                    continue
                p.sends += 1
                p.due = now + self.ack_timeout_s * 2 ** (p.sends - 1)
                self.resent += 1
                with contextlib.suppress(ConnectionError):
                    await self.conn.publish(p.topic, p.raw)


def rejection_reason(env: Envelope, run_id: str, members: set[str] | None) -> str | None:
    if env.run_id != run_id:
        return "wrong_run"
    if members is not None and env.sender not in members:
        return "unknown_sender"
    return None
