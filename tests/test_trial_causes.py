"""Root causes computed as trials end, from the recorder's envelopes: the same rows the
store gives, stored without the end-of-run pass, and a trial whose message came late
computed again from the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from errorflow.bus.transport import Posted
from errorflow.protocol import topics
from errorflow.protocol.envelope import Envelope, decode
from errorflow.protocol.result import ResultPayload
from errorflow.runtime.recorder import Recorder
from errorflow.scoring.root_cause import FAILED_OUTCOMES
from errorflow.store import root_causes
from errorflow.store.opening import connect_ro
from errorflow.store.rows import LabelRow, TrialRow
from errorflow.store.trial_causes import TrialCauses
from errorflow.store.trial_store import read_range, run_meta
from tests.test_endpoint import Captured
from tests.trace_runs import run_stored


def _stored(db: Path, run_id: str) -> dict[int, str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT trial, cause_json FROM root_causes WHERE run_id = ?", (run_id,)
        ).fetchall()
    return {int(t): str(text) for t, text in rows}


def _from_the_store(db: Path, run_id: str) -> dict[int, str]:
    with connect_ro(db) as conn:
        meta = run_meta(conn, run_id)
        assert meta is not None
        trials = read_range(conn, run_id, 0, meta.trials)
    out = {}
    for t, rows in trials.items():
        if rows.outcome is not None and rows.outcome.outcome in FAILED_OUTCOMES:
            cause = root_causes.cause_of(meta, rows)
            if cause is not None:
                out[t] = json.dumps(cause.to_wire())
    return out


@pytest.mark.parametrize(
    ("name", "propagation"),
    [
        ("contamination", "implicit"),
        ("contamination", "explicit"),
        ("partial-success", "both"),
        ("support-pipeline", "explicit"),
        ("retry-storm", None),
    ],
)
def test_causes_as_trials_end_are_the_stores_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, propagation: str | None
) -> None:
    async def no_end_of_run_pass(*_: object, **__: object) -> int:
        raise AssertionError("the end-of-run pass was needed")

    # Only the stale trials may need the store (none in-process); `record` logs a failure.
    monkeypatch.setattr(root_causes, "_record", no_end_of_run_pass)
    db = tmp_path / "r.db"
    prop = None if propagation == "both" else propagation
    result, _ = run_stored(name, db, trials=16, propagation=prop)
    stored = _stored(db, result.run_id)
    assert stored == _from_the_store(db, result.run_id)
    failed = [s.trial for s in result.scores if s.outcome.value in FAILED_OUTCOMES]
    assert sorted(stored) == failed


def test_a_message_after_the_cause_makes_the_trial_stale(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    result, _ = run_stored("contamination", db, trials=2, propagation="implicit")
    with connect_ro(db) as conn:
        meta = run_meta(conn, result.run_id)
        assert meta is not None
        rows = read_range(conn, result.run_id, 0, 1)[0]
    causes = TrialCauses(meta)
    *early, late = rows.messages
    for env in [*early, *rows.events]:
        causes.filed(env)
    assert rows.outcome is not None
    row = TrialRow(meta.run_id, 0, rows.outcome.outcome, rows.outcome.depth, "", "{}")
    causes.scored(row, [LabelRow(meta.run_id, 0, m, "x", lb.label, lb.reason)
                        for m, lb in rows.labels.items()])  # fmt: skip
    causes.ended(0)
    assert [r[1] for r in causes.take()] == [0] and not causes.open
    causes.filed(late)
    assert causes.stale == {0}


def test_the_runners_copies_fill_in_only_what_the_recorder_missed(tmp_path: Path) -> None:
    """On a broker the recorder may miss a message (an outage, a queue the broker cut):
    the runner's copies of a scored trial are held until the trial's outcome event is
    filed, then only the missing ones are stored, and the cause is the whole trial's;
    those of a trial whose outcome event never came are stored when the run ends."""
    db = tmp_path / "r.db"
    result, _ = run_stored("contamination", db, trials=2, propagation="implicit")
    with connect_ro(db) as conn:
        meta = run_meta(conn, result.run_id)
        assert meta is not None
        trials = read_range(conn, result.run_id, 0, 1)
        ((outcome_text,),) = conn.execute(
            "SELECT envelope FROM events WHERE run_id = ? AND trial = 0 AND sender = ? "
            "AND envelope LIKE '%trial_outcome%'",
            (result.run_id, topics.RUNNER),
        ).fetchall()
    expected = _from_the_store(db, result.run_id)
    recorder = Recorder(None, Captured(), meta.run_id, None, causes=TrialCauses(meta))  # type: ignore[arg-type]
    rows = trials[0]
    first, *missed = rows.messages
    for env in [first, *rows.events]:
        recorder.handle(topics.inbox(meta.run_id, env.recipient), _posted(env))
    recorder.hold(0, rows.messages)
    recorder.hold(1, trials[1].messages)
    assert [m.id for m in recorder._messages] == [first.id]  # nothing filled in yet
    assert rows.outcome is not None
    recorder.add_trial(
        TrialRow(meta.run_id, 0, rows.outcome.outcome, rows.outcome.depth, "", "{}"),
        [LabelRow(meta.run_id, 0, m, "x", lb.label, lb.reason) for m, lb in rows.labels.items()],
    )
    outcome = decode(outcome_text.encode())
    recorder.handle(topics.events(meta.run_id, topics.RUNNER), _posted(outcome))
    assert [m.id for m in recorder._messages] == [first.id, *(m.id for m in missed)]
    causes = recorder.causes.take() if recorder.causes is not None else []
    assert [(r[1], r[-1]) for r in causes] == [(0, expected[0])]
    recorder.settle_held()  # trial 1's outcome event never came
    assert [m.id for m in recorder._messages[3:]] == [m.id for m in trials[1].messages]


def _posted(env: Envelope) -> Posted:
    return Posted(env, env.encode().decode(), True)


def test_the_root_cause_reads_the_payloads_the_scorer_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[int] = []
    from_wire = ResultPayload.from_wire.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ResultPayload], payload: dict[str, object]) -> ResultPayload:
        read.append(id(payload))
        return from_wire(cls, payload)

    monkeypatch.setattr(ResultPayload, "from_wire", classmethod(counted))
    db = tmp_path / "s.db"
    result, _ = run_stored("contamination", db, trials=8, propagation="implicit")
    assert len(_stored(db, result.run_id)) == 8  # every trial failed: 8 causes
    with connect_ro(db) as conn:
        work = "SELECT count(*) FROM messages WHERE kind IN ('task', 'result')"
        messages = conn.execute(work).fetchone()[0]
    assert messages == 24 and len(read) == messages  # once a task or result, not twice
