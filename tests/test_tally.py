"""faults/tally.py: fault counts kept as trials finish, without a record a trial."""

from __future__ import annotations

import random

from errorflow.faults.tally import Tally
from errorflow.scoring.summary import bus_fault_line, bus_recovery_line


def _trials(n: int, seed: int) -> list[dict[str, int]]:
    rng = random.Random(seed)
    keys = ["a", "b", "c"]
    return [{k: rng.randint(1, 3) for k in keys if rng.random() < 0.3} for _ in range(n)]


def test_counts_are_the_trials_each_key_fired_in_and_how_often() -> None:
    seen = _trials(500, 1)
    tally = Tally(["a", "b", "c", "never"])
    for trial, s in enumerate(seen):
        tally.add(trial, s)
    counts = tally.counts()
    assert counts is not None
    for key in ("a", "b", "c"):
        hit = [s[key] for s in seen if key in s]
        assert counts[key] == {"fired": len(hit), "never": 500 - len(hit), "times": sum(hit)}
    assert counts["never"] == {"fired": 0, "never": 500, "times": 0}


def test_a_long_run_holds_no_record_a_trial_unless_asked() -> None:
    lean, kept = Tally(["a", "b", "c"]), Tally(["a", "b", "c"], per_trial=True)
    for trial, s in enumerate(_trials(2000, 2)):
        lean.add(trial, s)
        kept.add(trial, s)
    assert lean.fired == {}
    assert len(kept.fired) > 500
    assert lean.counts() == kept.counts()


def test_a_key_outside_the_configured_ones_is_not_counted() -> None:
    tally = Tally(["a"])
    tally.add(0, {"b": 2})
    assert tally.counts() == {"a": {"fired": 0, "never": 1, "times": 0}}
    assert Tally([]).counts() is None


def test_a_trial_whose_counts_never_arrived_is_neither_fired_nor_never() -> None:
    tally = Tally(["a"])
    tally.add(0, {"a": 2})
    tally.add(1, {})
    tally.add_unknown()
    assert tally.counts() == {"a": {"fired": 1, "never": 1, "times": 2, "unknown": 1}}
    line = bus_fault_line(tally.counts() or {}, "tool faults", "calls")
    assert line == (
        "tool faults: a fired in 1 of 2 trials (2 calls), never in 1 "
        "(not known in 1 trials a bus or infra fault ended)"
    )


def test_the_recovery_line_does_not_credit_resends_with_what_dedup_recovered() -> None:
    line = bus_recovery_line({"struck": 35, "recovered": 34, "lost": 1})
    assert line == "bus faults struck 35 trials: 34 finished all the same, 1 lost (bus_fault)"
