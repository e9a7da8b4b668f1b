"""The recorder: a failed write is never silent, it stops the run at once, and --resume
refills the run."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from errorflow.bus.transport import InProcessBus
from errorflow.cli.main import main
from errorflow.runtime import recorder, runner
from errorflow.runtime.recorder import Recorder
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.store.failures import StoreFailed
from errorflow.store.opening import open_db
from tests.conftest import scenario


async def test_a_failed_write_marks_the_run_interrupted_and_resume_refills_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = recorder.insert_rows
    calls = {"n": 0}

    async def flaky(db: aiosqlite.Connection, *batch: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk full")
        await real(db, *batch)

    monkeypatch.setattr(recorder, "insert_rows", flaky)
    s = scenario("contamination", trials=40)
    db = tmp_path / "f.db"
    with pytest.raises(StoreFailed, match=rf"^store {db}: OSError: disk full; run flaky stopped"):
        await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=db, run_id="flaky"))
    assert calls["n"] == 1  # nothing is tried after the first failed write
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status FROM runs").fetchone() == ("interrupted",)
    monkeypatch.setattr(recorder, "insert_rows", real)
    result = await run_scenario(
        s, RunOptions(bus=InProcessBus(), db_path=db, run_id="flaky", resume=True)
    )
    assert sum(result.outcomes.values()) == 40
    assert conn.execute("SELECT COUNT(*) FROM trials").fetchone() == (40,)
    assert conn.execute("SELECT status FROM runs").fetchone() == ("finished",)


# -- the store failing for real, mid-run: one line, at once -------------------------------

Fault = Callable[[aiosqlite.Connection, Path], Coroutine[Any, Any, None]]


async def _full(db: aiosqlite.Connection, path: Path) -> None:
    """No room for one more page (SQLite's own limit: the disk full, without root)."""
    ((pages,),) = await db.execute_fetchall("PRAGMA page_count")
    await db.execute_fetchall(f"PRAGMA max_page_count = {pages}")


async def _read_only(db: aiosqlite.Connection, path: Path) -> None:
    await db.execute("PRAGMA query_only = 1")


async def _removed(db: aiosqlite.Connection, path: Path) -> None:
    shutil.rmtree(path.parent)


async def _replaced(db: aiosqlite.Connection, path: Path) -> None:
    os.rename(path, path.with_name("moved.db"))
    path.write_bytes(b"")


FAULTS: dict[str, tuple[Fault, str]] = {
    "disk full": (_full, "database or disk is full (SQLITE_FULL)"),
    "read-only": (_read_only, "attempt to write a readonly database (SQLITE_READONLY)"),
    "directory removed": (_removed, "the file was removed while the run wrote it"),
    "file replaced": (_replaced, "the file was replaced by another while the run wrote it"),
}
#: Trials scored before the store fails; then the run must stop, not run the rest.
FAIL_AT = 20
#: 50 simulated ms a trial, two at once: the 400 trials would take 10 s more.
SLOW = ["--set", "time_scale=1", "--set", "max_in_flight=2", "--trials", "400"]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_store_failing_mid_run_stops_it_at_once_with_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    fault: str,
) -> None:
    """The failure is said once, by the command line, naming the store and the error;
    the run stops within a second or two (no trial runs on with its rows lost) and
    exits 1, and what was stored before is intact."""
    make, said = FAULTS[fault]
    path = tmp_path / "store" / "runs.db"
    dbs: list[aiosqlite.Connection] = []
    struck: list[float] = []

    async def opened(p: Path) -> aiosqlite.Connection:
        dbs.append(await open_db(p))
        return dbs[-1]

    real = Recorder.add_trial

    def add_trial(self: Recorder, *rows: Any) -> None:
        real(self, *rows)
        if len(struck) == 0 and self._trials and self._trials[-1].trial >= FAIL_AT:
            struck.append(time.monotonic())
            asyncio.get_running_loop().create_task(make(dbs[0], path))

    monkeypatch.setattr(runner, "open_db", opened)
    monkeypatch.setattr(Recorder, "add_trial", add_trial)
    caplog.set_level(logging.WARNING, logger="errorflow")
    argv = ["run", "contamination", *SLOW, "-q", "--workers", "1", "--run-id", "f-1"]
    code = main([*argv, "--db", str(path)])
    took = time.monotonic() - struck[0]
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1, err
    assert err.startswith(f"error: store {path}: {said}"), err
    assert [r.getMessage() for r in caplog.records] == []
    assert took < 3.0, f"the run went on for {took:.1f}s after its store failed"
    if path.exists() and fault != "file replaced":
        _check_intact(path, err)


def _check_intact(path: Path, err: str) -> None:
    """The store as the failure left it: undamaged, the run not finished, and holding
    as many trials as the line says (the resume command is there)."""
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    status = conn.execute("SELECT status FROM runs").fetchone()[0]
    stored = conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    conn.close()
    assert status in ("interrupted", "running")  # `running` of a process that is gone
    assert f"run f-1 stopped with {stored} of 400 trials stored" in err
    assert "resume with: errorflow run " in err and f"--resume f-1 --db {path}" in err
