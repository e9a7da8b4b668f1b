"""Trials spread over worker processes give what one process gives: the same per-trial
outcomes, labels and costs, and the same stored messages and events (up to their ids,
sequence numbers, timestamps and signatures), all in the one store."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from errorflow import api
from errorflow.cli.main import main
from errorflow.runtime import workers
from errorflow.runtime.runner import RunOptions
from errorflow.runtime.workers import WorkersRefused, count_for, shards_of
from errorflow.scenario.run_plan import RunPlan
from errorflow.scoring.score import TrialScore
from errorflow.store import root_causes
from errorflow.store.opening import open_db
from errorflow.store.readers import get_run
from tests import processes
from tests.conftest import scenario
from tests.test_liveness import cli, slow_file

#: Fields that differ between any two runs (ids are fresh, clocks move).
VOLATILE = ("id", "ts", "sig", "seq", "run_id")

Stored = tuple[
    Counter[str], list[tuple[object, ...]], list[tuple[object, ...]], list[tuple[object, ...]]
]


def stored(db_path: Path) -> list[Stored]:
    """Per run, in the order they started: its task, result and event envelopes with
    every id replaced by who sent what to whom (a multiset), its trial rows, labels and
    stored root causes."""
    runs: list[Stored] = []
    with sqlite3.connect(db_path) as db:
        for (run_id,) in db.execute("SELECT run_id FROM runs ORDER BY started").fetchall():
            envelopes = [
                json.loads(text)
                for (text,) in db.execute(
                    "SELECT envelope FROM messages WHERE run_id = ? AND kind != 'control' "
                    "UNION ALL SELECT envelope FROM events WHERE run_id = ?",
                    (run_id, run_id),
                )
            ]
            names = {e["id"]: f"<{e['sender']}:{e['kind']}:{e['recipient']}>" for e in envelopes}

            def same(value: object, names: dict[str, str] = names, run: str = run_id) -> object:
                if isinstance(value, dict):
                    return {k: same(v) for k, v in value.items()}
                if isinstance(value, list):
                    return [same(v) for v in value]
                if isinstance(value, str):
                    return names.get(value, value.replace(run, "RUN"))
                return value

            messages = Counter(
                json.dumps({k: same(v) for k, v in e.items() if k not in VOLATILE}, sort_keys=True)
                for e in envelopes
            )
            trials = db.execute(
                "SELECT trial, outcome, depth, reason, costs_json FROM trials WHERE run_id = ?"
                " ORDER BY trial",
                (run_id,),
            ).fetchall()
            labels = sorted(
                db.execute(
                    "SELECT trial, sender, label, reason FROM labels WHERE run_id = ?", (run_id,)
                ).fetchall()
            )
            causes = db.execute(
                "SELECT trial, kind, agent, tool, step, code, depth, dropped FROM root_causes"
                " WHERE run_id = ? ORDER BY trial",
                (run_id,),
            ).fetchall()
            runs.append((messages, trials, labels, causes))
    return runs


# -- how trials are split ------------------------------------------------------------------


def test_shards_are_contiguous_near_equal_and_cover_every_trial() -> None:
    todo = [0, 1, 2, 4, 5, 7, 8]
    parts = shards_of(todo, 3)
    assert parts == [(0, 1, 2), (4, 5), (7, 8)]
    assert shards_of([3], 4) == [(3,)]  # never more shards than trials
    assert shards_of(list(range(10)), 1) == [tuple(range(10))]


def test_auto_is_every_core_for_a_large_run_and_one_process_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(workers, "cores", lambda: 6)
    options = RunOptions()
    small = scenario("contamination", trials=workers.LARGE_RUN - 1)
    large = scenario("contamination", trials=workers.LARGE_RUN)
    assert count_for("auto", small, options) == 1
    assert count_for("auto", large, options) == 6
    assert count_for(4, small, options) == 4
    assert count_for(50, scenario("contamination", trials=3), options) == 3


def test_a_run_scoped_scenario_is_refused_more_than_one_process() -> None:
    outage = scenario("outage", trials=workers.LARGE_RUN)
    assert outage.run_scoped
    with pytest.raises(WorkersRefused, match="one process"):
        count_for(2, outage, RunOptions())
    assert count_for("auto", outage, RunOptions()) == 1  # auto falls back
    assert count_for(1, outage, RunOptions()) == 1


def test_a_run_on_a_broker_or_with_external_agents_is_refused() -> None:
    with pytest.raises(WorkersRefused, match="in-process bus"):
        count_for(2, scenario("contamination"), RunOptions(external_agents=True))


# -- the same results ----------------------------------------------------------------------


def test_the_api_gives_the_same_trials_and_messages_with_two_workers(tmp_path: Path) -> None:
    contamination = api.load("contamination")
    one = api.run(contamination, trials=40, db=tmp_path / "one.db")
    two = api.run(contamination, trials=40, db=tmp_path / "two.db", workers=2)
    strip = [{k: v for k, v in r.items() if k != "run_id"} for r in one.records()]
    assert [{k: v for k, v in r.items() if k != "run_id"} for r in two.records()] == strip
    assert two.summary == one.summary
    assert stored(tmp_path / "two.db") == stored(tmp_path / "one.db")
    run = get_run(tmp_path / "two.db", two.run_id)
    assert run is not None and run["status"] == "finished"
    assert run["broker"] == "in-process, 2 worker processes"
    assert sorted(two.raw.messages) == list(range(40))  # kept messages come back too


def test_root_causes_are_made_by_the_workers_and_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    contamination = api.load("contamination")
    api.run(contamination, trials=40, db=tmp_path / "one.db")
    made_here: list[int] = []
    real = root_causes.cause_of
    monkeypatch.setattr(
        root_causes, "cause_of", lambda meta, rows: made_here.append(1) or real(meta, rows)
    )
    api.run(contamination, trials=40, db=tmp_path / "two.db", workers=2)
    assert made_here == []  # the workers (spawned: unpatched) made every one
    causes = stored(tmp_path / "two.db")[0][3]
    assert len(causes) > 10 and causes == stored(tmp_path / "one.db")[0][3]


@pytest.mark.parametrize("made", ["", "CREATE TABLE messages (x); CREATE TABLE events (x);"])
def test_a_shard_stopped_while_it_made_its_store_is_merged_as_empty(
    tmp_path: Path, made: str
) -> None:
    """A worker stopped (another shard's store failed) between creating its store's file
    and its last table stored nothing: the merge passes it by, where it once failed the
    run with "no such table"."""
    shard = tmp_path / "shard-1.db"
    with closing(sqlite3.connect(shard)) as conn:
        conn.execute("BEGIN IMMEDIATE")  # as the worker's check of its path leaves it
        conn.rollback()
        conn.executescript(made)

    async def merged() -> int:
        db = await open_db(tmp_path / "run.db")
        try:
            await workers.merge(db, shard)
            return len(await db.execute_fetchall("SELECT 1 FROM messages"))
        finally:
            await db.close()

    assert asyncio.run(merged()) == 0


def test_an_interrupted_run_sums_up_the_trials_its_store_holds(tmp_path: Path) -> None:
    """A shard killed after its last scores reached the parent but before its store
    wrote them: the interrupted run's summary counts the trials stored (those others run
    again on `--resume`), not the ones it heard of."""
    path = tmp_path / "run.db"
    res = api.run(api.load("contamination"), trials=20, db=path)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM trials WHERE trial >= 15")
    scores = {s.trial: s for s in res.raw.scores}

    async def closed() -> int:
        db = await open_db(path)
        try:
            summary = await workers.close_run(db, res.run_id, [], scores, {}, "interrupted")
            return summary["trials"]
        finally:
            await db.close()

    assert asyncio.run(closed()) == 15 and sorted(scores) == list(range(15))
    run = get_run(path, res.run_id)
    assert run is not None and run["summary"] is not None
    assert run["status"] == "interrupted" and run["summary"]["trials"] == 15


def test_agent_fault_counts_add_up_over_the_workers(tmp_path: Path) -> None:
    guard = api.load("lineage-guard")
    one = api.run(guard, trials=30, db=tmp_path / "one.db")
    two = api.run(guard, trials=30, db=tmp_path / "two.db", workers=2)
    assert two.summary == one.summary
    counts = two.summary["agent_faults"]["b.corrupt"]
    assert counts["fired"] + counts["never"] == 30 and counts["fired"] > 0
    assert [r["outcome"] for r in two.records()] == [r["outcome"] for r in one.records()]


def test_tool_fault_counts_add_up_over_the_workers(tmp_path: Path) -> None:
    silent = api.load("silent-wrong")
    one = api.run(silent, trials=30, db=tmp_path / "one.db")
    two = api.run(silent, trials=30, db=tmp_path / "two.db", workers=2)
    assert two.summary == one.summary
    stale = two.summary["tool_faults"]["tools.kpi_cache.faults[0]"]
    assert stale["kind"] == "stale" and stale["fired"] + stale["never"] == 30
    assert stale["fired"] > 0


def same_cli_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> list[dict[str, Any]]:
    """`run contamination` of 24 trials in one process (one.db) and with `extra`
    (two.db): the same JSON (but ids, broker and time) and the same stored rows. Both
    documents are returned."""
    docs = []
    for name, more in (("one", ()), ("two", extra)):
        db = str(tmp_path / f"{name}.db")
        args = ["run", "contamination", "--trials", "24", "--json", "-q", "--db", db]
        assert main([*args, *more]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    one, two = ({k: v for k, v in d.items() if k not in ("run_id", "broker", "wall_seconds")}
                for d in docs)  # fmt: skip
    assert two == one
    assert stored(tmp_path / "two.db") == stored(tmp_path / "one.db")
    return docs


def test_the_cli_gives_the_same_run_with_two_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same_cli_runs(tmp_path, capsys, "--workers", "2")


def test_a_sweep_with_two_workers_gives_the_same_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = []
    for name, extra in (("one", []), ("two", ["--workers", "2"])):
        db = str(tmp_path / f"{name}.db")
        args = ["sweep", "contamination", "--vary", "propagation=explicit,implicit"]
        args += ["--trials", "12", "--json", "-q", "--db", db]
        assert main([*args, *extra]) == 0
        doc = json.loads(capsys.readouterr().out)
        strip = ("run_id", "broker", "rejects")
        cells.append({c: {k: v for k, v in a.items() if k not in strip}
                      for c, a in doc["cells"].items()})  # fmt: skip
    assert cells[1] == cells[0]
    assert stored(tmp_path / "two.db") == stored(tmp_path / "one.db")  # baselines too


def test_a_large_run_is_spread_over_the_cores_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(workers, "cores", lambda: 2)
    monkeypatch.setattr(workers, "LARGE_RUN", 30)  # a "large" run that runs quickly
    db = tmp_path / "auto.db"
    trials = "30"
    assert main(["run", "contamination", "--trials", trials, "--db", str(db), "--json"]) == 0
    auto = json.loads(capsys.readouterr().out)
    assert auto["broker"] == "in-process, 2 worker processes"
    small = ["run", "contamination", "--trials", "20", "--db", str(db), "--json"]
    assert main(small) == 0
    assert json.loads(capsys.readouterr().out)["broker"] == "in-process"
    one = [*small, "--workers", "1", "--trials", trials, "--propagation", "implicit"]
    assert main(one) == 0  # `--workers 1`: one process (no broker: nobody outside joins)
    assert json.loads(capsys.readouterr().out)["broker"] == "in-process"


def test_the_cli_refuses_two_workers_for_a_run_scoped_scenario(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.db"
    code = main(["run", "outage", "--trials", "3", "--workers", "2", "--db", str(db), "-q"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--workers 2" in err and "one process" in err
    assert not db.exists()  # refused before anything was stored


def test_progress_hears_every_trial_and_a_resumed_run_finishes_the_rest(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    seen: list[TrialScore] = []
    options = RunOptions(db_path=db, run_id="r1", on_trial=seen.append)
    plan = RunPlan.of(scenario("contamination"), trials=30)
    first = asyncio.run(workers.run(plan, options, 3))
    assert sorted(s.trial for s in seen) == list(range(30))
    whole = stored(db)
    with sqlite3.connect(db) as conn:  # an interrupted run that scored trials 0-9 only
        conn.execute("DELETE FROM trials WHERE run_id = 'r1' AND trial >= 10")
        conn.execute("DELETE FROM labels WHERE run_id = 'r1' AND trial >= 10")
        conn.execute("DELETE FROM messages WHERE run_id = 'r1' AND trial >= 10")
        conn.execute("DELETE FROM events WHERE run_id = 'r1' AND trial >= 10")
        conn.execute("UPDATE runs SET status = 'interrupted' WHERE run_id = 'r1'")
    seen.clear()
    again = RunOptions(db_path=db, run_id="r1", resume=True, on_trial=seen.append)
    resumed = asyncio.run(workers.run(plan, again, 2))
    assert sorted(s.trial for s in seen) == list(range(10, 30))
    assert [s.outcome for s in resumed.scores] == [s.outcome for s in first.scores]
    assert stored(db) == whole


@pytest.mark.slow
def test_a_runner_killed_with_sigkill_leaves_no_worker_behind(tmp_path: Path) -> None:
    """The workers and multiprocessing's resource tracker end when the runner dies,
    whatever killed it (SIGKILL gives it no word), and the shards' stores go with them."""
    path, db = slow_file(tmp_path, trials=600), tmp_path / "w.db"
    run = subprocess.Popen(
        cli("run", str(path), "--workers", "2", "--db", str(db), "-q"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    started: list[processes.Proc] = []
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob(".errorflow-workers-*/shard-*.db"))) < 2:  # mid-shard
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.1)
        started = processes.descendants(run.pid)
        assert len(started) == 3, [processes.command(p) for p in started]  # 2 + the tracker
        run.kill()
        left = processes.still_alive(started, limit_s=10)
        assert not left, [processes.command(p) for p in left]
        _, stderr = run.communicate(timeout=10)  # the workers held the runner's stderr
    finally:
        processes.kill_all(started)
        if run.poll() is None:
            run.kill()
    gone = f"the runner (pid {run.pid}) is gone; leaving"
    assert sorted(ln.split(":")[0] for ln in stderr.splitlines() if gone in ln) == [
        "errorflow-worker-0",
        "errorflow-worker-1",
    ], stderr
    assert not list(tmp_path.glob(".errorflow-workers-*")), "the shards' stores were left"
