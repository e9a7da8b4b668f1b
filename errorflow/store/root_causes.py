"""Root causes stored with the trials: one row per failed trial of a run.

Written as each trial ends, by the recorder, from the envelopes it has already decoded
(errorflow/store/trial_causes.py), which are the rows it stores; `record`, called
when a run ends and the recorder has written everything, computes from the stored rows
whatever that left out: the same rows give the same root cause, whoever computes it. A
run that never got there (killed) has only those of the trials that ended; `load`
computes what is missing on the fly, read-only, so `show`, `report` and `trace` agree
either way.

The table is this module's own (created here, on the store's connection, if missing):
the primary origin's columns to query by, and the whole root cause as JSON.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import aiosqlite

from errorflow.scoring.genealogy import genealogy
from errorflow.scoring.root_cause import FAILED_OUTCOMES, RootCause, root_cause
from errorflow.store.opening import connect_ro, tables_of
from errorflow.store.trial_store import (
    RunMeta,
    TrialRows,
    read_range,
    read_range_async,
    run_meta,
)

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS root_causes (
    run_id TEXT NOT NULL, trial INTEGER NOT NULL, kind TEXT, agent TEXT, tool TEXT,
    step INTEGER, call_id TEXT, code TEXT, depth INTEGER NOT NULL, dropped TEXT NOT NULL,
    cause_json TEXT NOT NULL, PRIMARY KEY (run_id, trial)
);
"""

#: Trials read per query when a whole run is looked at (memory stays flat).
CHUNK = 500

_FAILED = ", ".join(f"'{o}'" for o in sorted(FAILED_OUTCOMES))


def row_of(run_id: str, trial: int, cause: RootCause) -> tuple[object, ...]:
    p = cause.primary
    dropped = ",".join(f"{d.agent}:{d.how}" for d in cause.dropped)
    return (
        run_id,
        trial,
        p.kind if p else None,
        p.agent if p else None,
        p.tool if p else None,
        p.step if p else None,
        p.call_id if p else None,
        p.code if p else None,
        cause.depth,
        dropped,
        json.dumps(cause.to_wire()),
    )


def cause_of(meta: RunMeta, rows: TrialRows) -> RootCause | None:
    """`trace_of(meta, rows).root_cause`, from only what a root cause reads."""
    outcome = rows.outcome
    if outcome is None or outcome.outcome not in FAILED_OUTCOMES:
        return None
    g = genealogy(
        rows.messages,
        rows.events,
        rows.labels,
        meta.propagation,
        whole=False,
        readings=rows.readings,
    )
    return root_cause(g, outcome.outcome, outcome.depth)


async def record(db: aiosqlite.Connection, run_id: str, *, finished: bool = True) -> int:
    """Store the root cause of every failed trial of `run_id` that has none yet, once
    every row of the run is in; the number stored. A run that did not finish (Ctrl-C, a
    participant lost) stores none, to stop at once: they are computed on reading, and
    stored when a `--resume` finishes it. Never raises."""
    if not finished:
        return 0
    try:
        return await _record(db, run_id)
    except Exception as exc:  # telemetry of the run, not the run: say it, go on
        log.warning("root causes of %s not stored: %s", run_id, exc)
        return 0


async def _record(db: aiosqlite.Connection, run_id: str) -> int:
    await db.executescript(SCHEMA)
    meta_row = await db.execute_fetchall(
        "SELECT run_id, scenario, propagation, trials FROM runs WHERE run_id = ?", (run_id,)
    )
    if not meta_row:
        return 0
    r = next(iter(meta_row))
    meta = RunMeta(str(r[0]), str(r[1]), str(r[2]), int(r[3]))
    stored = 0
    top = await db.execute_fetchall("SELECT MAX(trial) FROM trials WHERE run_id = ?", (run_id,))
    last = next(iter(top))[0]
    # A chunk of trial numbers at a time: memory stays flat however many trials failed.
    for lo in range(0, -1 if last is None else int(last) + 1, CHUNK):
        hi = lo + CHUNK - 1
        todo = [
            int(t[0])
            for t in await db.execute_fetchall(
                f"SELECT trial FROM trials WHERE run_id = ? AND trial BETWEEN ? AND ? AND "
                f"outcome IN ({_FAILED}) AND trial NOT IN (SELECT trial FROM root_causes "
                "WHERE run_id = ? AND trial BETWEEN ? AND ?) ORDER BY trial",
                (run_id, lo, hi, run_id, lo, hi),
            )
        ]
        if not todo:
            continue
        trials = await read_range_async(db, run_id, todo[0], todo[-1])
        rows = []
        for t in todo:
            if t in trials:
                cause = cause_of(meta, trials[t])
                if cause is not None:
                    rows.append(row_of(run_id, t, cause))
        await db.executemany(
            "INSERT OR REPLACE INTO root_causes VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows
        )
        await db.commit()
        stored += len(rows)
    return stored


async def create(db: aiosqlite.Connection) -> None:
    """The table, if missing (before a run stores causes as its trials end)."""
    await db.executescript(SCHEMA)


async def forget(db: aiosqlite.Connection, run_id: str, trials: set[int]) -> None:
    """Drop causes computed too early (a trial's message came after): `record` computes
    them again from the store."""
    if trials:
        await db.executemany(
            "DELETE FROM root_causes WHERE run_id = ? AND trial = ?",
            [(run_id, t) for t in sorted(trials)],
        )
        await db.commit()


async def copy_attached(db: aiosqlite.Connection, schema: str) -> None:
    """Copy the root causes an attached store (`schema`: a worker's shard) computed for
    its trials: they are the rows' own (computed from them alone), so the run's store need
    not compute them again. A shard that stored none (interrupted) has no table."""
    if "root_causes" not in await tables_of(db, schema):
        return
    await db.execute(SCHEMA)  # one statement: inside the merge's transaction
    await db.execute(
        f"INSERT OR REPLACE INTO root_causes SELECT * FROM {schema}.root_causes ORDER BY trial"
    )


def _chunks(trials: list[int]) -> Iterator[tuple[int, int]]:
    for i in range(0, len(trials), CHUNK):
        part = trials[i : i + CHUNK]
        yield part[0], part[-1]


def _stored(conn: sqlite3.Connection, run_id: str) -> dict[int, RootCause]:
    try:
        rows = conn.execute(
            "SELECT trial, cause_json FROM root_causes WHERE run_id = ?", (run_id,)
        ).fetchall()
    except sqlite3.OperationalError:  # a store written before root causes were kept
        return {}
    return {int(t): RootCause.from_wire(json.loads(text)) for t, text in rows}


def load(path: Path, run_id: str) -> dict[int, RootCause]:
    """The root cause of every failed trial of a run, by trial: stored, or computed from
    the stored rows where the run did not store it."""
    with connect_ro(path) as conn:
        causes = _stored(conn, run_id)
        meta = run_meta(conn, run_id)
        failed = [
            int(r[0])
            for r in conn.execute(
                f"SELECT trial FROM trials WHERE run_id = ? AND outcome IN ({_FAILED})"
                " ORDER BY trial",
                (run_id,),
            ).fetchall()
        ]
        missing = [t for t in failed if t not in causes]
        if meta is not None:
            for lo, hi in _chunks(missing):
                trials = read_range(conn, run_id, lo, hi)
                for t in missing:
                    if lo <= t <= hi and t in trials:
                        cause = cause_of(meta, trials[t])
                        if cause is not None:
                            causes[t] = cause
    wanted = set(failed)
    return {t: causes[t] for t in sorted(causes) if t in wanted}
