"""A trial's rows read back whole: its tasks and results, its agents' events, its labels
and its outcome, from the store (a read-only connection, or the run's own writer).

The SQL and the decoding live here once; `trace_of` turns the rows into a
`TrialTrace` (errorflow.scoring.trial_trace). Trials are read in ranges, so a long run
is looked at a slice at a time (memory stays flat).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite

from errorflow.protocol.envelope import Envelope
from errorflow.protocol.result import Readings
from errorflow.scoring.genealogy_types import StoredLabel
from errorflow.scoring.trial_trace import TrialOutcome, TrialTrace, trace_trial
from errorflow.store.opening import connect_ro

_RANGE = "run_id = ? AND trial BETWEEN ? AND ?"
MESSAGES_SQL = f"SELECT trial, envelope FROM messages WHERE {_RANGE} AND kind IN ('task', 'result')"
# The runner's own events are labels and outcomes, read from their tables instead.
EVENTS_SQL = f"SELECT trial, envelope FROM events WHERE {_RANGE} AND sender != 'runner'"
LABELS_SQL = f"SELECT trial, message_id, label, reason FROM labels WHERE {_RANGE}"
TRIALS_SQL = f"SELECT trial, outcome, depth, reason FROM trials WHERE {_RANGE}"

Row = Sequence[object]


@dataclass
class TrialRows:
    trial: int
    messages: list[Envelope] = field(default_factory=list)
    events: list[Envelope] = field(default_factory=list)
    labels: dict[str, StoredLabel] = field(default_factory=dict)
    outcome: TrialOutcome | None = None
    #: The scorer's readings of the trial's payloads, when it ran in this process.
    readings: Readings | None = None


@dataclass(frozen=True)
class RunMeta:
    run_id: str
    scenario: str
    propagation: str
    trials: int


def group_rows(
    messages: Iterable[Row], events: Iterable[Row], labels: Iterable[Row], trials: Iterable[Row]
) -> dict[int, TrialRows]:
    """Rows of the four queries, by trial (only trials with a message or an outcome)."""
    out: dict[int, TrialRows] = {}

    def of(trial: object) -> TrialRows:
        t = int(str(trial))
        return out.setdefault(t, TrialRows(t))

    for trial, text in messages:
        of(trial).messages.append(Envelope.model_validate_json(str(text)))
    for trial, text in events:
        of(trial).events.append(Envelope.model_validate_json(str(text)))
    for trial, mid, label, reason in labels:
        of(trial).labels[str(mid)] = StoredLabel(str(label), str(reason))
    for trial, outcome, depth, reason in trials:
        of(trial).outcome = TrialOutcome(str(outcome), int(str(depth)), str(reason))
    return out


def read_range(conn: sqlite3.Connection, run_id: str, lo: int, hi: int) -> dict[int, TrialRows]:
    args = (run_id, lo, hi)
    return group_rows(
        conn.execute(MESSAGES_SQL, args).fetchall(),
        conn.execute(EVENTS_SQL, args).fetchall(),
        conn.execute(LABELS_SQL, args).fetchall(),
        conn.execute(TRIALS_SQL, args).fetchall(),
    )


async def read_range_async(
    db: aiosqlite.Connection, run_id: str, lo: int, hi: int
) -> dict[int, TrialRows]:
    args = (run_id, lo, hi)
    return group_rows(
        await db.execute_fetchall(MESSAGES_SQL, args),
        await db.execute_fetchall(EVENTS_SQL, args),
        await db.execute_fetchall(LABELS_SQL, args),
        await db.execute_fetchall(TRIALS_SQL, args),
    )


def run_meta(conn: sqlite3.Connection, run_id: str) -> RunMeta | None:
    row = conn.execute(
        "SELECT run_id, scenario, propagation, trials FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    if row is None:
        return None
    return RunMeta(str(row[0]), str(row[1]), str(row[2]), int(row[3]))


def trace_of(meta: RunMeta, rows: TrialRows) -> TrialTrace:
    return trace_trial(
        run_id=meta.run_id,
        scenario=meta.scenario,
        trial=rows.trial,
        propagation=meta.propagation,
        outcome=rows.outcome,
        messages=rows.messages,
        events=rows.events,
        labels=rows.labels,
    )


def load_trace(path: str | Path, run_id: str, trial: int) -> TrialTrace | None:
    """One trial of a stored run, traced (None: the run has no such trial)."""
    with connect_ro(Path(path)) as conn:
        meta = run_meta(conn, run_id)
        rows = read_range(conn, run_id, trial, trial).get(trial) if meta else None
    if meta is None or rows is None:
        return None
    return trace_of(meta, rows)


def stored_trials(conn: sqlite3.Connection, run_id: str) -> list[int]:
    """The trials of a run that have an outcome or a message, in order."""
    rows = conn.execute(
        "SELECT trial FROM trials WHERE run_id = ? UNION"
        " SELECT DISTINCT trial FROM messages WHERE run_id = ? AND kind = 'result'"
        " ORDER BY trial",
        (run_id, run_id),
    ).fetchall()
    return [int(r[0]) for r in rows]


def telling_trial(path: Path, run_id: str) -> int | None:
    """The trial worth looking at first: the first contaminated one, else the first
    contained failure, else the first scored (None: nothing scored)."""
    with connect_ro(path) as conn:
        row = conn.execute(
            "SELECT trial FROM trials WHERE run_id = ? ORDER BY CASE outcome"
            " WHEN 'contaminated' THEN 0 WHEN 'contained' THEN 1 ELSE 2 END, trial LIMIT 1",
            (run_id,),
        ).fetchone()
    return int(row[0]) if row is not None else None
