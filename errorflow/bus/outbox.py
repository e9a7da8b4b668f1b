"""The sender's side of end-to-end acknowledgements: what is unacked, and what to do now.

Theory of operation
-------------------
QoS 1 covers one hop to the broker, not a broker that restarts without persistence, so
task and result messages are acknowledged end to end (`errorflow.bus.endpoint`). The
`Outbox` is the bookkeeping for that and nothing else: it never reads a clock, sleeps
or publishes. The driver passes the time in (`now`, monotonic seconds) and carries out
the decisions it gets back, so every timing rule is tested with plain numbers.

Each pending message keeps its encoded bytes, how often it was sent and a deadline:

    add(id, topic, raw, now)     sent once; due at now + timeout() (ack_timeout_s,
                                   unless adaptive: below)
    due(now), deadline reached   sends <= max_resends: Resend (the same bytes, so the
                                   same id and seq); after the k-th send the next
                                   deadline is now + its first timeout * 2 ** (k - 1)
                                 otherwise: GiveUp; forgotten and counted undelivered
    ack(id)                      forgotten; an unknown or repeated id changes nothing

With the defaults (2 s, 6 resends) a message goes out 7 times, waiting 2, 4, 8, ... 128 s
after each send, before it is given up. `next_due` tells the driver how long it may
sleep.

A receiver that is busy, not gone, acks late: its inbox holds a backlog. With a fixed
timeout every message queued longer than 2 s would be sent again, the copies would
lengthen the backlog, and a run's cost would grow with its length (a wide fan-in on a
real broker resends mostly duplicates). With `adaptive`, the timeout
follows the acks as TCP's retransmission timer does (RFC 6298): a smoothed ack time and
its variation from every message acked after one send (Karn: a resent message's ack
says nothing of which send it answers), timeout = srtt + 4 * rttvar, never below
`ack_timeout_s` (a quiet bus keeps the configured timeout) nor above `MAX_TIMEOUT_S`.
A resend also backs the timeout off for the messages sent after it, to twice the wait
that proved too short, until an ack of a message sent once gives a fresh estimate:
without that, a sender whose every message is resent would never learn anything.
Runs with simulated bus faults keep the fixed schedule: their faults' times are
computed from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from errorflow.bus.transport import Delivery


@dataclass(frozen=True, slots=True)
class Resend:
    """Publish these bytes again; `sends` counts this send too."""

    message_id: str
    topic: str
    raw: Delivery
    sends: int


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Still unacked after `sends` sends: the message is undelivered."""

    message_id: str
    sends: int


Action = Resend | GiveUp

#: The adaptive timeout's ceiling: a receiver this slow is treated as gone.
MAX_TIMEOUT_S = 60.0


@dataclass(slots=True)
class _Pending:
    topic: str
    raw: Delivery
    sends: int
    due: float
    sent: float  # the first send
    base: float  # the timeout it was first sent with (doubled after each resend)


class Outbox:
    def __init__(self, ack_timeout_s: float, max_resends: int, adaptive: bool = False) -> None:
        self.ack_timeout_s = ack_timeout_s
        self.max_resends = max_resends
        self.adaptive = adaptive
        self.resent = 0
        self.undelivered = 0
        self.srtt: float | None = None  # smoothed ack time (adaptive only)
        self.rttvar = 0.0
        self.backed_off = 0.0  # the least timeout since the last resend (adaptive only)
        self._pending: dict[str, _Pending] = {}  # insertion order: oldest first

    def timeout(self) -> float:
        """The wait after a first send (doubled after each resend)."""
        estimate = self.ack_timeout_s if self.srtt is None else self.srtt + 4 * self.rttvar
        return min(MAX_TIMEOUT_S, max(self.ack_timeout_s, estimate, self.backed_off))

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._pending

    def add(self, message_id: str, topic: str, raw: Delivery, now: float) -> None:
        """Track a message that has just been sent for the first time."""
        timeout = self.timeout()
        self._pending[message_id] = _Pending(topic, raw, 1, now + timeout, now, timeout)

    def ack(self, message_id: str, now: float | None = None) -> None:
        """Forget an acked message; with `now`, an adaptive outbox learns its ack time."""
        p = self._pending.pop(message_id, None)
        if p is None or not self.adaptive or now is None or p.sends != 1:
            return
        sample = max(0.0, now - p.sent)
        self.backed_off = 0.0  # a fresh estimate replaces the backed-off timeout
        if self.srtt is None:
            self.srtt, self.rttvar = sample, sample / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - sample)
            self.srtt = 0.875 * self.srtt + 0.125 * sample

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
            wait = p.base * 2 ** (p.sends - 1)
            p.due = now + wait
            if self.adaptive:
                self.backed_off = min(MAX_TIMEOUT_S, max(self.backed_off, wait))
            self.resent += 1
            actions.append(Resend(message_id, p.topic, p.raw, p.sends))
        return actions

    def next_due(self) -> float | None:
        """The earliest deadline, or None when nothing waits for an ack."""
        return min((p.due for p in self._pending.values()), default=None)
