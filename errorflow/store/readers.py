"""Reading the store (synchronous: used by the CLI and reports, never on the hot path):
runs, their trials and groups, the scores of a run."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path
from typing import Any, TypedDict

from errorflow.core.costs import Costs
from errorflow.scenario.overrides import fault_free
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.summary import RunSummary
from errorflow.store.opening import connect_ro


class RunListing(TypedDict):
    """One line of `errorflow runs`."""

    run_id: str
    scenario: str
    seed: int
    trials: int
    propagation: str
    status: str
    started: float
    finished: float | None
    group_id: str | None
    label: str | None


class TrialRecord(TypedDict):
    """A stored trial outcome; `costs` is `costs_json` read."""

    trial: int
    outcome: str
    depth: int
    reason: str
    costs_json: str
    costs: dict[str, float]


def effective_status(status: str, pid: int | None, host: str | None) -> str:
    """`running` in the store but its process is gone from this host: interrupted."""
    if status != "running":
        return str(status)
    if not pid or host != socket.gethostname():
        return "running"
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return "interrupted"
    except PermissionError:
        return "running"
    return "running"


def list_runs(path: Path) -> list[RunListing]:
    with connect_ro(path) as conn:
        rows = conn.execute(
            "SELECT run_id, scenario, seed, trials, propagation, status, started, finished,"
            " group_id, label, pid, host FROM runs ORDER BY started DESC"
        ).fetchall()
    return [
        RunListing(
            run_id=r["run_id"],
            scenario=r["scenario"],
            seed=r["seed"],
            trials=r["trials"],
            propagation=r["propagation"],
            status=effective_status(r["status"], r["pid"], r["host"]),
            started=r["started"],
            finished=r["finished"],
            group_id=r["group_id"],
            label=r["label"],
        )
        for r in rows
    ]


class StoredCounts(TypedDict):
    """How many rows of each kind a run has in the store."""

    messages: int
    events: int
    rejects: int
    trials: int


class StoredRun(TypedDict):
    """One run as the store holds it: its row, its summary read, and its row counts."""

    run_id: str
    scenario: str
    scenario_json: str  # redacted (see `scenario_exact`)
    seed: int
    trials: int
    propagation: str
    broker: str | None
    status: str  # `running` whose process is gone reads `interrupted`
    started: float
    finished: float | None
    summary: RunSummary | None  # None until the run finishes or is interrupted
    group_id: str | None
    label: str | None
    pid: int | None
    host: str | None
    scenario_sha: str | None
    scenario_exact: int | None
    #: Each need's true value (redacted); None for a run stored before it was kept.
    truth: dict[str, Any] | None
    counts: StoredCounts
    rejects_by_reason: dict[str, int]


def get_run(path: Path, run_id: str) -> StoredRun | None:
    """A run by id, or by a prefix only one run id has (None otherwise)."""
    with connect_ro(path) as conn:
        row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            matches = conn.execute(
                "SELECT * FROM runs WHERE substr(run_id, 1, length(?)) = ? ORDER BY started DESC",
                (run_id, run_id),
            ).fetchall()
            if len(matches) != 1:
                return None
            row = matches[0]
        return _stored_run(conn, row)


def _stored_run(conn: sqlite3.Connection, row: sqlite3.Row) -> StoredRun:
    rid = row["run_id"]

    def count(table: str) -> int:
        sql = f"SELECT COUNT(*) FROM {table} WHERE run_id = ?"
        return int(conn.execute(sql, (rid,)).fetchone()[0])

    rejects = conn.execute(
        "SELECT reason, COUNT(*) FROM rejects WHERE run_id = ? GROUP BY reason", (rid,)
    ).fetchall()
    return StoredRun(
        run_id=rid,
        scenario=row["scenario"],
        scenario_json=row["scenario_json"],
        seed=row["seed"],
        trials=row["trials"],
        propagation=row["propagation"],
        broker=row["broker"],
        status=effective_status(row["status"], row["pid"], row["host"]),
        started=row["started"],
        finished=row["finished"],
        summary=json.loads(row["summary_json"] or "null"),
        group_id=row["group_id"],
        label=row["label"],
        pid=row["pid"],
        host=row["host"],
        scenario_sha=row["scenario_sha"],
        scenario_exact=row["scenario_exact"],
        truth=json.loads(row["truth_json"]) if row["truth_json"] else None,
        counts=StoredCounts(
            messages=count("messages"),
            events=count("events"),
            rejects=count("rejects"),
            trials=count("trials"),
        ),
        rejects_by_reason={str(reason): int(n) for reason, n in rejects},
    )


def trial_rows(path: Path, run_id: str) -> list[TrialRecord]:
    with connect_ro(path) as conn:
        rows = conn.execute(
            "SELECT trial, outcome, depth, reason, costs_json FROM trials WHERE run_id = ?"
            " ORDER BY trial",
            (run_id,),
        ).fetchall()
    return [
        TrialRecord(
            trial=r["trial"],
            outcome=r["outcome"],
            depth=r["depth"],
            reason=r["reason"],
            costs_json=r["costs_json"],
            costs=json.loads(r["costs_json"]),
        )
        for r in rows
    ]


def group_runs(path: Path, group_id: str) -> list[StoredRun]:
    """The runs of a group (a paired comparison or a sweep), in the order they ran."""
    with connect_ro(path) as conn:
        rows = conn.execute(
            "SELECT * FROM runs WHERE group_id = ? ORDER BY started", (group_id,)
        ).fetchall()
        return [_stored_run(conn, row) for row in rows]


def baseline_runs(runs: list[StoredRun]) -> dict[str, StoredRun]:
    """The fault-free baseline each run of a group was measured against, by label: its
    own (`LABEL:baseline`), or the one a cell with the same fault-free scenario ran (a
    sweep runs a baseline once for the cells that share it)."""
    own = {
        r["label"].removesuffix(":baseline"): r
        for r in runs
        if r["label"] and r["label"].endswith(":baseline")
    }
    if not own:
        return {}
    by_scenario = {_fault_free_key(r): r for r in own.values()}
    out = {}
    for r in runs:
        label = r["label"] or r["run_id"]
        if label.endswith(":baseline"):
            continue
        found = own.get(label) or by_scenario.get(_fault_free_key(r))
        if found is not None:
            out[label] = found
    return out


def _fault_free_key(run: StoredRun) -> str:
    """The run's stored scenario with every fault removed, as text to compare (an empty
    `faults` list and none at all are the same: the stored form leaves an empty one out)."""
    data = json.loads(run["scenario_json"])
    if not isinstance(data, dict):
        return json.dumps(data)
    fault_free(data)
    for part in ("agents", "tools"):
        for spec in (data.get(part) or {}).values():
            if isinstance(spec, dict) and not spec.get("faults"):
                spec.pop("faults", None)
    return json.dumps(data, sort_keys=True)


def load_scores(path: Path, run_id: str, include_bus_faults: bool = False) -> dict[int, TrialScore]:
    """The trials of a run already scored (bus faults excluded unless asked: a resumed
    run reruns them)."""
    credits = _credits(path, run_id)
    return {
        row["trial"]: TrialScore(
            row["trial"],
            Outcome(row["outcome"]),
            row["depth"],
            costs=Costs.from_wire(row["costs"]),
            reason=row["reason"],
            credit=credits.get(row["trial"], ({}, False))[0],
            struck=credits.get(row["trial"], ({}, False))[1],
        )
        for row in trial_rows(path, run_id)
        if include_bus_faults or row["outcome"] != Outcome.BUS_FAULT.value
    }


def _credits(path: Path, run_id: str) -> dict[int, tuple[dict[str, str], bool]]:
    """Each stored trial's partial credit and whether a fault struck it (none for a
    trial stored before they were)."""
    with connect_ro(path) as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(trials)")}
        if "credit_json" not in columns:  # a store no run of this version wrote to
            return {}
        rows = conn.execute(
            "SELECT trial, credit_json FROM trials WHERE run_id = ? AND credit_json IS NOT NULL",
            (run_id,),
        ).fetchall()
    out: dict[int, tuple[dict[str, str], bool]] = {}
    for trial, raw in rows:
        doc = json.loads(raw)
        if isinstance(doc, dict):
            credit = doc.get("credit")
            credit = credit if isinstance(credit, dict) else {}
            out[int(trial)] = ({str(k): str(v) for k, v in credit.items()}, bool(doc.get("struck")))
    return out
