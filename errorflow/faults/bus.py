"""Bus faults: what happens to one send of a message, decided from the seed alone.

Theory of operation
-------------------
A scenario's `bus:` block (`BusFaultSpec`) becomes a `BusFaultPlan`
that every endpoint of the run holds. On each send of a task or result message (the
first, and every resend: its *attempt*, 1, 2, ...) the endpoint asks `plan.fate(send)`
what happens to it and carries the answer out:

    partition   sender and recipient are cut off at the attempt's run time: lost
    drop        lost, with probability p
    duplicate   published twice (p)
    delay       published `delay_s` simulated seconds later, waited as
                `delay_s * time_scale` real seconds like every simulated wait (p)
    reorder     held back and published after the sender's next message (p)

Each kind draws from its own stream, keyed by (seed, "bus", kind, trial, sender,
recipient, message, attempt), where `message` is the message's kind and round (a
sender says one thing per trial, recipient, kind and round): the same seed gives the
same faults whatever the timing, faults of one kind never shift another's draws, and a
kind that is not configured draws nothing (old scenarios draw nothing at all).

A lost attempt is recovered by the next resend (errorflow.bus.outbox). An attempt's run
time is the first send's plus the outbox's schedule, counted as run time
(`attempt_at`: ack_timeout_s, doubling), so whether a partition outlasts the resends
follows from the scenario, not from how fast the machine is. Events, control messages
and acks are never faulted: the acks are the recovery being measured.

The block's names (a partition between participants that exist) are checked with the
rest of the scenario (errorflow.scenario.fault_checks); the runner counts where each
configured kind fired and where it never did (errorflow/runtime/bus_fault_tally.py,
with errorflow.faults.tally) from the trials' events. The default block is empty: a scenario
without one dumps, hashes and runs exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from errorflow.core.seeding import stream
from errorflow.core.shapes import (
    MAX_RUN_S,
    Ident,
    Probability,
    Strict,
)

BusFaultKind = Literal["partition", "drop", "duplicate", "delay", "reorder"]
#: In the order they are decided (and reported).
KINDS: tuple[BusFaultKind, ...] = ("partition", "drop", "duplicate", "delay", "reorder")
#: The kinds that lose the attempt.
LOSING: frozenset[BusFaultKind] = frozenset({"partition", "drop"})


@dataclass(frozen=True, slots=True)
class Partition:
    """Messages between two participants (either way) are lost from `from_s` to `to_s`
    of run time."""

    a: str
    b: str
    from_s: float
    to_s: float

    def cuts(self, sender: str, recipient: str, at: float) -> bool:
        ends = {sender, recipient}
        return ends == {self.a, self.b} and self.from_s <= at < self.to_s


@dataclass(frozen=True, slots=True)
class Send:
    """One attempt at a message: what the draws are keyed by, and its run time."""

    trial: int
    sender: str
    recipient: str
    message: str  # kind and round: "result/0"
    attempt: int
    at: float


@dataclass(frozen=True, slots=True)
class Fate:
    """What happens to one attempt: the kinds that fired, and what to do."""

    fired: tuple[BusFaultKind, ...] = ()
    lost: bool = False
    copies: int = 1
    delay_s: float = 0.0
    hold: bool = False


DELIVERED = Fate()


@dataclass(frozen=True, slots=True)
class BusFaultPlan:
    seed: int
    drop_p: float = 0.0
    duplicate_p: float = 0.0
    delay_p: float = 0.0
    delay_s: float = 0.0
    reorder_p: float = 0.0
    partitions: tuple[Partition, ...] = ()
    time_scale: float = 0.0
    #: The endpoint's ack timeout and resends (None: the endpoint's defaults).
    ack_timeout_s: float | None = None
    max_resends: int | None = None

    @property
    def kinds(self) -> tuple[BusFaultKind, ...]:
        """The kinds configured (that can fire), in `KINDS` order."""
        on = {
            "partition": bool(self.partitions),
            "drop": self.drop_p > 0,
            "duplicate": self.duplicate_p > 0,
            "delay": self.delay_p > 0,
            "reorder": self.reorder_p > 0,
        }
        return tuple(k for k in KINDS if on[k])

    def fate(self, send: Send) -> Fate:
        if any(p.cuts(send.sender, send.recipient, send.at) for p in self.partitions):
            return Fate(fired=("partition",), lost=True, copies=0)
        if self._fires("drop", self.drop_p, send):
            return Fate(fired=("drop",), lost=True, copies=0)
        duplicate = self._fires("duplicate", self.duplicate_p, send)
        delay = self._fires("delay", self.delay_p, send)
        hold = self._fires("reorder", self.reorder_p, send)
        flags: tuple[tuple[BusFaultKind, bool], ...] = (
            ("duplicate", duplicate),
            ("delay", delay),
            ("reorder", hold),
        )
        fired = tuple(kind for kind, on in flags if on)
        if not fired:
            return DELIVERED
        return Fate(
            fired=fired,
            copies=2 if duplicate else 1,
            delay_s=self.delay_s if delay else 0.0,
            hold=hold,
        )

    def _fires(self, kind: BusFaultKind, p: float, s: Send) -> bool:
        if p <= 0:
            return False  # not configured: no draw
        rng = stream(self.seed, "bus", kind, s.trial, s.sender, s.recipient, s.message, s.attempt)
        return rng.random() < p


def attempt_at(first_at: float, attempt: int, ack_timeout_s: float) -> float:
    """The run time of a message's `attempt`-th send: the outbox resends after
    ack_timeout_s, then waits twice as long each time (1: first_at; 2: + t; 3: + 3t)."""
    return first_at + ack_timeout_s * float(2 ** (attempt - 1) - 1)


_LOST_WORDS: dict[str, str] = {"drop": "dropped", "partition": "cut off by a partition"}


def undelivered_reason(sender: str, recipient: str, lost: Mapping[str, int], sends: int) -> str:
    """Why a message never arrived, in one line: `researcher→writer: dropped 7 of 7
    sends` (sends lost for another reason, a broker's, are counted as such)."""
    parts = [f"{_LOST_WORDS[k]} {lost[k]}" for k in ("partition", "drop") if lost.get(k)]
    other = sends - sum(lost.get(k, 0) for k in ("partition", "drop"))
    if other > 0:
        parts.append(f"unacknowledged {other}")
    return f"{sender}→{recipient}: {' and '.join(parts)} of {sends} sends"


# -- the scenario's `bus:` block -----------------------------------------------------------


class BusFaultRate(Strict):
    """Fires on each send of a task or result message with probability `p`."""

    p: Probability


class BusDelay(BusFaultRate):
    """The message is published `seconds` later: simulated seconds, waited as
    `seconds * time_scale` real seconds (like every simulated wait)."""

    seconds: float = Field(gt=0, le=3600)


class PartitionWindow(Strict):
    """Messages between the two (either way) are lost from `from_s` to `to_s` of run
    time (a trial's own simulated time when trials do not share a run clock)."""

    between: list[Ident] = Field(min_length=2, max_length=2)
    from_s: float = Field(ge=0, le=MAX_RUN_S)
    to_s: float = Field(gt=0, le=MAX_RUN_S)

    @model_validator(mode="after")
    def _window(self) -> PartitionWindow:
        if self.to_s <= self.from_s:
            raise ValueError(f"to_s ({self.to_s:g}) must be after from_s ({self.from_s:g})")
        if self.between[0] == self.between[1]:
            raise ValueError(
                f"a partition is between two participants, found {self.between[0]!r} twice"
            )
        return self


class BusFaultSpec(Strict):
    drop: BusFaultRate | None = None
    delay: BusDelay | None = None
    duplicate: BusFaultRate | None = None
    #: Hold a message back and publish it after the sender's next one.
    reorder: BusFaultRate | None = None
    partitions: list[PartitionWindow] = Field(default_factory=list, max_length=64)
    #: The end-to-end acks: first resend after this many seconds, doubling (None: 2 s).
    ack_timeout_s: float | None = Field(default=None, gt=0, le=60)
    #: Resends before a message is given up (None: 6).
    max_resends: int | None = Field(default=None, ge=0, le=20)

    @property
    def configured(self) -> bool:
        """Whether the block says anything (an empty block changes nothing)."""
        return self != BusFaultSpec()

    def plan(self, seed: int, time_scale: float) -> BusFaultPlan | None:
        """What the endpoints carry out; None for an empty block (no draws at all)."""
        if not self.configured:
            return None
        return BusFaultPlan(
            seed=seed,
            drop_p=self.drop.p if self.drop else 0.0,
            duplicate_p=self.duplicate.p if self.duplicate else 0.0,
            delay_p=self.delay.p if self.delay else 0.0,
            delay_s=self.delay.seconds if self.delay else 0.0,
            reorder_p=self.reorder.p if self.reorder else 0.0,
            partitions=tuple(
                Partition(w.between[0], w.between[1], w.from_s, w.to_s) for w in self.partitions
            ),
            time_scale=time_scale,
            ack_timeout_s=self.ack_timeout_s,
            max_resends=self.max_resends,
        )
