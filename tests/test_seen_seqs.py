"""The recorder's (and runner's) memory of messages seen: exact for seqs over a whole
run, ids for the recent ones, and a few integers per sender, whatever the run's length."""

from __future__ import annotations

import random

import pytest

from errorflow.bus import seen_seqs
from errorflow.bus.seen_seqs import CompactSeenSet, SeqRuns
from errorflow.protocol.envelope import Envelope, Kind


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
    assert (list(runs.los), list(runs.his)) == ([100], [199])
    assert not any(runs.add(s) for s in (100, 150, 199))
    assert runs.add(300) and runs.add(201) and runs.add(200)
    assert (list(runs.los), list(runs.his)) == ([100, 300], [201, 300])


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


def test_a_receiver_of_every_other_seq_stays_bounded_and_refuses_old_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent hears only the messages addressed to it: each seq is a run of its own.
    Past the limit the oldest runs are joined, so old seqs stay refused."""
    monkeypatch.setattr(seen_seqs, "MAX_RUNS", 100)
    runs = SeqRuns()
    heard = range(0, 2000, 2)  # every other seq of the sender
    assert all(runs.add(s) for s in heard)
    assert len(runs) == 100
    assert 0 in runs and 2 in runs and 1998 in runs
    assert not runs.add(0) and not runs.add(10)  # the oldest: still refused
    assert 1999 not in runs and runs.add(1999)  # newer than the last heard: new
    assert 1997 not in runs and runs.add(1997)  # a recent gap stays open
