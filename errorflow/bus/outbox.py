"""The sender's side of end-to-end acknowledgements: what is unacked, and what to do now.

Theory of operation
-------------------
QoS 1 covers one hop to the broker, not a broker that restarts without persistence, so
task and result messages are acknowledged end to end (`errorflow.bus.endpoint`). The
`Outbox` is the bookkeeping for that and nothing else: it never reads a clock, sleeps
or publishes. The driver passes the time in (`now`, monotonic seconds) and carries out
the decisions it gets back, so every timing rule is tested with plain numbers.

Each pending message keeps its encoded bytes, how often it was sent and a deadline:

    add(id, topic, raw, now)     sent once; due at now + ack_timeout_s
    due(now), deadline reached   sends <= max_resends: Resend (the same bytes, so the
                                   same id and seq); after the k-th send the next
                                   deadline is now + ack_timeout_s * 2 ** (k - 1)
                                 otherwise: GiveUp; forgotten and counted undelivered
    ack(id)                      forgotten; an unknown or repeated id changes nothing

With the defaults (2 s, 6 resends) a message goes out 7 times, waiting 2, 4, 8, ... 128 s
after each send, before it is given up. `next_due` tells the driver how long it may
sleep.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resend:
    """Publish these bytes again; `sends` counts this send too."""

    message_id: str
    topic: str
    raw: bytes
    sends: int


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Still unacked after `sends` sends: the message is undelivered."""

    message_id: str
    sends: int


Action = Resend | GiveUp


@dataclass(slots=True)
class _Pending:
    topic: str
    raw: bytes
    sends: int
    due: float


class Outbox:
    def __init__(self, ack_timeout_s: float, max_resends: int) -> None:
        self.ack_timeout_s = ack_timeout_s
        self.max_resends = max_resends
        self.resent = 0
        self.undelivered = 0
        self._pending: dict[str, _Pending] = {}  # insertion order: oldest first

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._pending

    def add(self, message_id: str, topic: str, raw: bytes, now: float) -> None:
        """Track a message that has just been sent for the first time."""
        self._pending[message_id] = _Pending(topic, raw, 1, now + self.ack_timeout_s)

    def ack(self, message_id: str) -> None:
        self._pending.pop(message_id, None)

    def due(self, now: float) -> list[Action]:
        """What to do at `now`, oldest message first; the state already reflects it."""
        actions: list[Action] = []
        for message_id, p in list(self._pending.items()):
            if p.due > now:
                continue
            if p.sends > self.max_resends:
                del self._pending[message_id]
                self.undelivered += 1
                actions.append(GiveUp(message_id, p.sends))
                continue
            p.sends += 1
            p.due = now + self.ack_timeout_s * 2 ** (p.sends - 1)
            self.resent += 1
            actions.append(Resend(message_id, p.topic, p.raw, p.sends))
        return actions

    def next_due(self) -> float | None:
        """The earliest deadline, or None when nothing waits for an ack."""
        return min((p.due for p in self._pending.values()), default=None)
