"""The recorder's (and runner's) memory of messages seen: exact for seqs over a whole
run, ids for the recent ones, and a few integers per sender, whatever the run's length."""

from __future__ import annotations

import random

from errorflow.bus.envelope import Envelope, Kind
from errorflow.bus.seen_seqs import CompactSeenSet, SeqRuns


def env(sender: str, seq: int, id_: str | None = None) -> Envelope:
    return Envelope(
        id=id_ or f"{sender}-{seq}", run_id="r", trial=0, seq=seq, sender=sender,
        recipient="b", kind=Kind.TASK, trace_id="t",
    )  # fmt: skip


def test_runs_merge_whatever_the_order() -> None:
    runs = SeqRuns()
    order = list(range(100, 200))
    random.Random(1).shuffle(order)
    assert all(runs.add(s) for s in order)
    assert (runs.los, runs.his) == ([100], [199])
    assert not any(runs.add(s) for s in (100, 150, 199))
    assert runs.add(300) and runs.add(201) and runs.add(200)
    assert (runs.los, runs.his) == ([100, 300], [201, 300])


def test_a_resend_is_a_duplicate_and_a_new_id_on_an_old_seq_a_replay() -> None:
    seen = CompactSeenSet()
    assert seen.repeat(env("a", 5)) is None
    assert seen.repeat(env("a", 5)) == "duplicate"
    assert seen.repeat(env("a", 5, "forged")) == "replayed_seq"
    assert seen.repeat(env("b", 5)) is None  # another sender's seq 5


def test_memory_stays_flat_and_old_seqs_are_still_refused() -> None:
    seen = CompactSeenSet(recent_ids=1000)
    for seq in range(50_000):
        for sender in ("a", "b"):
            assert seen.repeat(env(sender, seq)) is None
    assert seen.size() == (1000, 2)  # recent ids, and one run of seqs per sender
    assert seen.repeat(env("a", 3)) == "replayed_seq"  # its id long forgotten: still refused
    assert seen.repeat(env("b", 49_999)) == "duplicate"
