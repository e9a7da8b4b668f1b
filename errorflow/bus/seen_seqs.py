"""Messages already handled, in memory that stays flat over a run of any length.

A sender numbers its messages 1 by 1 (`seq`, from `first_seq()`), so the seqs of a sender
seen so far are a few runs of consecutive numbers: kept as runs, every (sender, seq) of
the whole run is remembered in a few integers per sender (a gap, a restarted sender,
costs one run). A repeated (sender, seq) is a `replayed_seq`, however old. Ids are kept
only for the recent messages (`RECENT_IDS`): a resend repeats its message's id within
seconds, and is then a `duplicate`; a copy older than that is still refused, as a
`replayed_seq`. Same interface as `SeenSet` (the bounded window kept before), whose dict of every
id grows by about 250 bytes a message up to its window of 500,000.

Both windows forget their oldest id with `OrderedDict.popitem(last=False)`: deleting a
plain dict's first key leaves a hole that every later `next(iter(...))` walks over again
until the dict is resized, so a full window of a plain dict costs a scan of thousands of
slots per message.
"""

from __future__ import annotations

import bisect
from array import array
from collections import OrderedDict

from errorflow.protocol.envelope import Envelope

#: Ids remembered (a duplicate is told from a replay within these many messages). About
#: 2.5 MB an endpoint, full within the first few thousand trials of a long run (so its
#: memory is flat from there); at a few thousand messages a second it spans the first
#: resends (2, 4 and 8 s after a send) that recover a lost ack.
RECENT_IDS = 20_000
#: Runs kept per sender; past it the two oldest are joined, the numbers between them
#: counted as seen. An endpoint that hears only some of a sender's messages (an agent
#: gets those addressed to it) sees every one as a run of its own and gets there; a
#: number older than the last 10,000 heard from that sender is then refused as
#: `replayed_seq`, never forgotten and accepted again.
MAX_RUNS = 10_000


class SeenSet:
    """Messages already handled, in a bounded window (oldest forgotten first): by id (a
    resend repeats it, and is a `duplicate`) and by (sender, seq) (a message of a sender
    again under a new id: `replayed_seq`; seqs do not repeat, see `first_seq`)."""

    WINDOW = 500_000

    def __init__(self) -> None:
        self._ids: OrderedDict[str, tuple[str, int]] = OrderedDict()  # oldest first
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
            self._seqs.discard(self._ids.popitem(last=False)[1])
        return None


class SeqRuns:
    """The seqs seen of one sender (or any set of numbers that mostly come in order, such
    as the closed trials of a run): sorted, disjoint runs [lo, hi]."""

    __slots__ = ("his", "los")

    def __init__(self) -> None:
        # Machine integers (8 bytes a bound; a list holds a 32-byte int and its slot): a
        # receiver that hears only some of a sender's messages keeps up to MAX_RUNS runs.
        self.los: array[int] = array("q")
        self.his: array[int] = array("q")

    def add(self, seq: int) -> bool:
        """Whether `seq` is new (now seen)."""
        los, his = self.los, self.his
        if his and seq == his[-1] + 1:  # the usual case: the next one
            his[-1] = seq
            return True
        i = bisect.bisect_right(los, seq) - 1
        if i >= 0 and seq <= his[i]:
            return False
        left = i >= 0 and his[i] == seq - 1
        right = i + 1 < len(los) and los[i + 1] == seq + 1
        if left and right:  # fills the gap between two runs
            his[i] = his[i + 1]
            del los[i + 1], his[i + 1]
        elif left:
            his[i] = seq
        elif right:
            los[i + 1] = seq
        else:
            los.insert(i + 1, seq)
            his.insert(i + 1, seq)
            if len(los) > MAX_RUNS:
                his[0] = his[1]
                del los[1], his[1]
        return True

    def __contains__(self, seq: object) -> bool:
        if not isinstance(seq, int):
            return False
        i = bisect.bisect_right(self.los, seq) - 1
        return i >= 0 and seq <= self.his[i]

    def __len__(self) -> int:
        """The runs held (not the numbers in them)."""
        return len(self.los)


class CompactSeenSet(SeenSet):
    """`repeat(env)`: None for a new message (now seen), else `duplicate` (its id was
    seen recently) or `replayed_seq` (its sender's seq was seen). A `SeenSet` wherever
    one is taken."""

    def __init__(self, recent_ids: int = RECENT_IDS) -> None:
        super().__init__()
        self.recent_ids = recent_ids
        self._recent: OrderedDict[str, None] = OrderedDict()  # oldest first
        self._runs: dict[str, SeqRuns] = {}

    def repeat(self, env: Envelope) -> str | None:
        if env.id in self._recent:
            return "duplicate"
        runs = self._runs.get(env.sender)
        if runs is None:
            runs = self._runs[env.sender] = SeqRuns()
        if not runs.add(env.seq):
            return "replayed_seq"
        ids = self._recent
        ids[env.id] = None
        if len(ids) > self.recent_ids:
            ids.popitem(last=False)
        return None

    def size(self) -> tuple[int, int]:
        """Ids and seq runs held (for tests and benchmarks)."""
        return len(self._recent), sum(len(r) for r in self._runs.values())
