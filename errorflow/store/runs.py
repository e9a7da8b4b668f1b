"""A run's row: created when the run starts, taken over by `--resume`, finished (its
status and summary) when it ends."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterable

import aiosqlite

from errorflow.protocol import topics
from errorflow.scoring.summary import RunSummary
from errorflow.store.failures import writing


async def create_run(
    db: aiosqlite.Connection,
    *,
    run_id: str,
    scenario: str,
    scenario_json: str,
    seed: int,
    trials: int,
    propagation: str,
    broker: str,
    group_id: str | None = None,
    label: str | None = None,
    scenario_sha: str | None = None,
    scenario_exact: bool = True,
    truth_json: str | None = None,
) -> None:
    """`scenario_json` is the redacted scenario; `scenario_exact` says whether redaction
    left it unchanged (then `--resume` can run from it) and `scenario_sha` identifies
    the exact scenario (otherwise `--resume` needs the original file to match it).
    `truth_json`: each need's true value as the scorer has it (redacted), kept because
    the stored scenario cannot compute it again (its Python tools' paths are redacted)."""
    async with writing(db):
        await db.execute(
            "INSERT INTO runs (run_id, scenario, scenario_json, seed, trials, propagation, broker,"
            " status, started, group_id, label, pid, host, scenario_sha, scenario_exact,"
            " truth_json) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                scenario,
                scenario_json,
                seed,
                trials,
                propagation,
                broker,
                time.time(),
                group_id,
                label,
                os.getpid(),
                socket.gethostname(),
                scenario_sha,
                int(scenario_exact),
                truth_json,
            ),
        )
        await db.commit()


#: The trials of a run with rows but no outcome stored: stopped mid-trial.
_UNSCORED = (
    "trial IN (SELECT trial FROM {table} WHERE run_id = ?1"
    " EXCEPT SELECT trial FROM trials WHERE run_id = ?1)"
)
#: What a trial stopped mid-way left, which its run again on `--resume` would double
#: (its first task and the results it got, next to the new ones: a different trace).
_FORGET_UNSCORED = (
    "DELETE FROM messages WHERE run_id = ?1 AND kind IN ('task', 'result') AND "
    + _UNSCORED.format(table="messages"),
    # the acks of its tasks and results (a trial's other controls are the run's own)
    "DELETE FROM messages WHERE run_id = ?1 AND kind = 'control'"
    f" AND topic LIKE '{topics.ROOT}/' || ?1 || '/ack/%' AND " + _UNSCORED.format(table="messages"),
    "DELETE FROM events WHERE run_id = ?1 AND " + _UNSCORED.format(table="events"),
    "DELETE FROM labels WHERE run_id = ?1 AND " + _UNSCORED.format(table="labels"),
    # a second copy of one of its messages (a duplicate): the trial's run again rejects
    # its own. Any other reject (unsigned, forged, another run's) stays, as it was seen.
    "DELETE FROM rejects WHERE run_id = ?1 AND reason IN ('duplicate', 'replayed_seq')"
    " AND json_valid(CAST(raw AS TEXT))"
    " AND json_extract(CAST(raw AS TEXT), '$.run_id') = ?1"
    " AND json_type(CAST(raw AS TEXT), '$.trial') = 'integer'"
    " AND (json_extract(CAST(raw AS TEXT), '$.kind') != 'control'"
    f" OR topic LIKE '{topics.ROOT}/' || ?1 || '/ack/%')"
    " AND json_extract(CAST(raw AS TEXT), '$.trial') NOT IN"
    " (SELECT trial FROM trials WHERE run_id = ?1)",
)


async def resume_run(db: aiosqlite.Connection, run_id: str, rerun: Iterable[int] = ()) -> None:
    """Take over an interrupted run: it is ours (this process) and running again, and
    the trials it left unscored, and those scored that run again (`rerun`: a bus fault,
    a trial a lost participant took), start afresh, as if never begun."""
    async with writing(db):
        await db.execute(
            "UPDATE runs SET status = 'running', finished = NULL, pid = ?, host = ?"
            " WHERE run_id = ?",
            (os.getpid(), socket.gethostname(), run_id),
        )
        await db.executemany(
            "DELETE FROM trials WHERE run_id = ? AND trial = ?", ((run_id, t) for t in rerun)
        )
        for sql in _FORGET_UNSCORED:
            await db.execute(sql, (run_id,))
        await db.commit()


async def finish_run(
    db: aiosqlite.Connection, run_id: str, status: str, summary: RunSummary
) -> None:
    async with writing(db):
        await db.execute(
            "UPDATE runs SET status = ?, finished = ?, summary_json = ? WHERE run_id = ?",
            (status, time.time(), json.dumps(summary), run_id),
        )
        await db.commit()
