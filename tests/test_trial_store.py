"""A trial's rows read back whole from the store, and which trial to look at first."""

from __future__ import annotations

from pathlib import Path

from errorflow.store.opening import connect_ro
from errorflow.store.trial_store import (
    load_trace,
    read_range,
    stored_trials,
    telling_trial,
)
from tests.trace_runs import run_stored


def test_rows_of_a_trial_and_its_trace(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result, _ = run_stored("contamination", db, trials=3, propagation="implicit")
    with connect_ro(db) as conn:
        rows = read_range(conn, result.run_id, 1, 1)
        assert stored_trials(conn, result.run_id) == [0, 1, 2]
    assert list(rows) == [1]
    r = rows[1]
    assert sorted(m.kind.value for m in r.messages) == ["result", "result", "task"]
    assert {e.sender for e in r.events} == {"researcher", "writer"}  # not the runner's
    assert len(r.labels) == 2 and r.outcome is not None and r.outcome.outcome == "contaminated"
    trace = load_trace(db, result.run_id, 1)
    assert trace is not None and trace.trial == 1 and trace.outcome == "contaminated"
    assert load_trace(db, result.run_id, 7) is None
    assert load_trace(db, "no-such-run", 0) is None


def test_the_trial_to_look_at_first_is_the_first_contaminated(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result, _ = run_stored("partial-success", db, trials=12, propagation="explicit")
    order = {"contaminated": 0, "contained": 1}
    expected = min(result.scores, key=lambda s: (order.get(s.outcome.value, 2), s.trial)).trial
    assert telling_trial(db, result.run_id) == expected
    assert telling_trial(db, "no-such-run") is None
