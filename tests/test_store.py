"""The SQLite store: run rows through their life, every table's rows round trip, the
readers, and databases written by an earlier version."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path

import pytest

from errorflow.bus.envelope import Envelope, Kind, Status
from errorflow.core.costs import Costs
from errorflow.runtime.store import (
    EventRow,
    LabelRow,
    MessageRow,
    RejectRow,
    TrialRow,
    connect_ro,
    create_run,
    effective_status,
    finish_run,
    get_run,
    group_runs,
    insert_rows,
    list_runs,
    load_scores,
    open_db,
    resume_run,
    trial_rows,
)
from errorflow.scoring.score import Label, MessageLabel, Outcome, TrialScore
from errorflow.scoring.summary import summarize


def envelope(kind: Kind = Kind.RESULT, **update: object) -> Envelope:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "trial": 3,
        "seq": 7,
        "sender": "writer",
        "recipient": "runner",
        "kind": kind,
        "trace_id": "run-1-t3",
        "status": Status.PARTIAL_FAILURE,
        "confidence": 0.4,
        "payload": {"type": "model_call"} if kind is Kind.EVENT else {"report": "x"},
    }
    return Envelope.model_validate({**fields, **update})


async def new_run(
    db_path: Path,
    run_id: str = "run-1",
    *,
    group_id: str | None = None,
    label: str | None = None,
    scenario_sha: str | None = None,
) -> None:
    db = await open_db(db_path)
    try:
        await create_run(
            db,
            run_id=run_id,
            scenario="contamination",
            scenario_json='{"name": "contamination"}',
            seed=42,
            trials=4,
            propagation="explicit",
            broker="embedded",
            group_id=group_id,
            label=label,
            scenario_sha=scenario_sha,
        )
    finally:
        await db.close()


SCORES = [
    TrialScore(0, Outcome.SUCCESS, 0, costs=Costs(backend_calls=2, model_calls=3)),
    TrialScore(1, Outcome.CONTAMINATED, 2, reason="fabricated", costs=Costs(retries=1.5)),
    TrialScore(2, Outcome.BUS_FAULT, 0, reason="no final result within 1s"),
]


async def test_a_run_is_created_finished_and_resumed(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    await new_run(db_path, group_id="g1", label="explicit", scenario_sha="abc")
    run = get_run(db_path, "run-1")
    assert run is not None
    assert run["status"] == "running" and run["summary"] is None
    assert (run["group_id"], run["label"], run["scenario_sha"]) == ("g1", "explicit", "abc")
    assert (run["pid"], run["host"]) == (os.getpid(), socket.gethostname())
    summary = summarize(SCORES)
    db = await open_db(db_path)
    try:
        await finish_run(db, "run-1", "interrupted", summary)
        assert get_run(db_path, "run-1")["status"] == "interrupted"  # type: ignore[index]
        await resume_run(db, "run-1")
        resumed = get_run(db_path, "run-1")
        assert resumed is not None and resumed["status"] == "running"
        assert resumed["finished"] is None
        await finish_run(db, "run-1", "finished", summary)
    finally:
        await db.close()
    done = get_run(db_path, "run-")  # a unique prefix finds it
    assert done is not None and done["status"] == "finished"
    assert done["summary"] == json.loads(json.dumps(summary))
    assert done["finished"] >= done["started"]


async def test_trial_and_label_rows_round_trip_into_scores(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    await new_run(db_path)
    label = MessageLabel("m1", "writer", Label.CONTAMINATED, "false claim", touched=True)
    db = await open_db(db_path)
    try:
        await insert_rows(
            db,
            [],
            [],
            [],
            [TrialRow.from_score("run-1", s) for s in SCORES],
            [LabelRow.from_label("run-1", 1, label)],
        )
        # a trial scored again (a resumed run) replaces its row
        again = TrialScore(1, Outcome.CONTAINED, 0, reason="flagged", costs=Costs(retries=2))
        await insert_rows(db, [], [], [], [TrialRow.from_score("run-1", again)], [])
    finally:
        await db.close()
    rows = trial_rows(db_path, "run-1")
    assert [(r["trial"], r["outcome"], r["depth"]) for r in rows] == [
        (0, "success", 0),
        (1, "contained", 0),
        (2, "bus_fault", 0),
    ]
    assert rows[0]["costs"] == Costs(backend_calls=2, model_calls=3).to_wire()
    scores = load_scores(db_path, "run-1")
    assert sorted(scores) == [0, 1]  # bus faults are rerun by --resume
    assert scores[0].costs == Costs(backend_calls=2, model_calls=3)
    assert (scores[1].outcome, scores[1].reason, scores[1].costs) == (
        Outcome.CONTAINED,
        "flagged",
        Costs(retries=2),
    )
    everything = load_scores(db_path, "run-1", include_bus_faults=True)
    assert everything[2].outcome is Outcome.BUS_FAULT
    assert everything[2].reason == "no final result within 1s"
    with connect_ro(db_path) as conn:
        stored = conn.execute("SELECT * FROM labels").fetchall()
    assert [tuple(r) for r in stored] == [
        ("run-1", 1, "m1", "writer", "contaminated", "false claim")
    ]


async def test_message_event_and_reject_rows_round_trip(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    await new_run(db_path)
    result, event = envelope(), envelope(Kind.EVENT, id="e1", recipient="observers")
    wire = result.encode().decode()
    row = MessageRow.from_envelope(result, "errorflow/run-1/inbox/runner", 12.5, wire)
    assert row == MessageRow.from_envelope(result, "errorflow/run-1/inbox/runner", 12.5)
    reject = RejectRow("run-1", "errorflow/run-1/inbox/x", "bad_json", "line 1", b"{\xff", 13.0)
    db = await open_db(db_path)
    try:
        await insert_rows(db, [row], [EventRow.from_envelope(event, 12.75)], [reject], [], [])
        # the runner's backfill repeats a message the recorder stored: kept once
        later = MessageRow.from_envelope(result, "errorflow/run-1/inbox/runner", 99.0)
        await insert_rows(db, [later], [], [], [], [])
    finally:
        await db.close()
    with connect_ro(db_path) as conn:
        messages = [tuple(r) for r in conn.execute("SELECT * FROM messages")]
        events = [tuple(r) for r in conn.execute("SELECT * FROM events")]
        rejects = [tuple(r) for r in conn.execute("SELECT * FROM rejects")]
    assert messages == [tuple(row)]
    assert messages[0][6:9] == ("result", "partial_failure", 0.4)
    assert Envelope.model_validate_json(messages[0][10]) == result
    assert events == [("run-1", "e1", 3, 7, "writer", "model_call", event.encode().decode(), 12.75)]
    assert rejects == [tuple(reject)]
    counts = get_run(db_path, "run-1")
    assert counts is not None
    assert counts["counts"] == {"messages": 1, "events": 1, "rejects": 1, "trials": 0}
    assert counts["rejects_by_reason"] == {"bad_json": 1}


def test_an_event_of_an_unknown_kind_keeps_its_type_string() -> None:
    env = envelope(Kind.EVENT, payload={"type": "from_the_future", "x": 1})
    assert EventRow.from_envelope(env, 1.0).type == "from_the_future"
    assert EventRow.from_envelope(envelope(Kind.EVENT, payload={}), 1.0).type == ""


async def test_list_and_group_runs(tmp_path: Path) -> None:
    db_path = tmp_path / "s.db"
    await new_run(db_path, "a-1", group_id="g", label="explicit")
    await new_run(db_path, "b-1", group_id="g", label="implicit")
    await new_run(db_path, "c-1")
    listed = list_runs(db_path)
    assert [r["run_id"] for r in listed] == ["c-1", "b-1", "a-1"]  # newest first
    assert set(listed[0]) == {
        "run_id",
        "scenario",
        "seed",
        "trials",
        "propagation",
        "status",
        "started",
        "finished",
        "group_id",
        "label",
    }
    assert listed[1]["label"] == "implicit" and listed[0]["status"] == "running"
    assert [r["run_id"] for r in group_runs(db_path, "g")] == ["a-1", "b-1"]
    assert get_run(db_path, "nope") is None
    assert get_run(db_path, "") is None  # a prefix that matches several runs


def test_effective_status_of_a_running_run_whose_process_is_gone() -> None:
    here = socket.gethostname()
    assert effective_status("finished", None, None) == "finished"
    assert effective_status("running", os.getpid(), here) == "running"
    assert effective_status("running", None, here) == "running"
    assert effective_status("running", 12345, "another-host") == "running"
    dead = 2**22 + 12345  # above any pid_max: no such process
    assert effective_status("running", dead, here) == "interrupted"


async def test_a_database_of_an_earlier_version_gets_the_new_columns(tmp_path: Path) -> None:
    db_path = tmp_path / "old.db"
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "CREATE TABLE runs (run_id TEXT PRIMARY KEY, scenario TEXT NOT NULL,"
            " scenario_json TEXT NOT NULL, seed INTEGER NOT NULL, trials INTEGER NOT NULL,"
            " propagation TEXT NOT NULL, broker TEXT, status TEXT NOT NULL,"
            " started REAL NOT NULL, finished REAL, summary_json TEXT)"
        )
        conn.execute(
            "INSERT INTO runs VALUES ('old-1', 's', '{}', 1, 2, 'explicit', NULL,"
            " 'finished', 1.0, 2.0, NULL)"
        )
    conn.close()
    db = await open_db(db_path)
    await db.close()
    with connect_ro(db_path) as ro:
        columns = {r[1] for r in ro.execute("PRAGMA table_info(runs)")}
    ro.close()
    new = {"group_id", "label", "pid", "host", "scenario_sha", "scenario_exact"}
    assert new <= columns
    old = get_run(db_path, "old-1")
    assert old is not None and old["status"] == "finished" and old["group_id"] is None
    await new_run(db_path, "new-1")  # and the old database takes new runs
    assert [r["run_id"] for r in list_runs(db_path)] == ["new-1", "old-1"]


def test_readers_refuse_a_missing_database(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no database"):
        list_runs(tmp_path / "absent.db")
