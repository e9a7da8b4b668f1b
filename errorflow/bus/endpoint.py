"""An endpoint: one named participant of a run on top of a bus connection.

It stamps what it sends (run, sender, per-sender seq) and checks what it receives:
invalid messages, messages of other runs, senders that are not part of the run and
duplicates (same sender and seq) are dropped and counted here, never passed on. The
recorder stores the rejected ones with their reasons.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from typing import Any

from errorflow.bus import topics
from errorflow.bus.envelope import Envelope, Kind, RejectedMessage, Status, WireError, decode
from errorflow.bus.transport import Connection


class SeenSet:
    """Per-sender seq numbers already handled (bounded memory per sender)."""

    WINDOW = 200_000

    def __init__(self) -> None:
        self._seen: dict[str, set[int]] = {}
        self._high: dict[str, int] = {}

    def add(self, sender: str, seq: int) -> bool:
        """True if new; False for a duplicate or a replay older than the window."""
        seen = self._seen.setdefault(sender, set())
        high = self._high.get(sender, -1)
        if seq in seen or seq <= high - self.WINDOW:
            return False
        seen.add(seq)
        if seq > high:
            self._high[sender] = seq
            if len(seen) > self.WINDOW * 2:
                floor = seq - self.WINDOW
                self._seen[sender] = {s for s in seen if s > floor}
        return True


class Endpoint:
    def __init__(
        self, conn: Connection, run_id: str, name: str, members: Iterable[str] | None = None
    ) -> None:
        self.conn = conn
        self.run_id = run_id
        self.name = name
        self.members = set(members) if members is not None else None
        self.seq = 0
        self.rejects: Counter[str] = Counter()
        self.seen = SeenSet()

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
        await self.conn.publish(
            topics.for_message(self.run_id, kind, self.name, recipient), env.encode()
        )
        return env

    async def event(self, trial: int, trace_id: str, type_: str, data: dict[str, Any]) -> None:
        await self.send(
            kind=Kind.EVENT,
            recipient="observers",
            trial=trial,
            trace_id=trace_id,
            payload={"type": type_, **data},
        )

    def check(self, topic: str, raw: bytes) -> Envelope | None:
        """Validate one incoming message; None (and a count) if it must be dropped."""
        try:
            env = decode(raw)
        except RejectedMessage as exc:
            self.rejects[exc.reason] += 1
            return None
        reason = rejection_reason(env, self.run_id, self.members)
        if reason is None and not self.seen.add(env.sender, env.seq):
            reason = "duplicate"
        if reason is not None:
            self.rejects[reason] += 1
            return None
        return env

    async def receive(self) -> AsyncIterator[Envelope]:
        async for topic, raw in self.conn.messages():
            env = self.check(topic, raw)
            if env is not None:
                yield env


def rejection_reason(env: Envelope, run_id: str, members: set[str] | None) -> str | None:
    if env.run_id != run_id:
        return "wrong_run"
    if members is not None and env.sender not in members:
        return "unknown_sender"
    return None
