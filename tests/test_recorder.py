"""The recorder: a failed write is never silent, and --resume refills the run."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from errorflow.bus.transport import InProcessBus
from errorflow.runtime.recorder import Recorder
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.runtime.store import StoreError
from tests.conftest import scenario


async def test_a_failed_write_marks_the_run_interrupted_and_resume_refills_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Recorder._write
    calls = {"n": 0}

    async def flaky(self: Recorder, *batch: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk full")
        await real(self, *batch)

    monkeypatch.setattr(Recorder, "_write", flaky)
    s = scenario("contamination", trials=40)
    db = tmp_path / "f.db"
    with pytest.raises(StoreError, match="interrupted"):
        await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=db, run_id="flaky"))
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT status FROM runs").fetchone() == ("interrupted",)
    monkeypatch.setattr(Recorder, "_write", real)
    result = await run_scenario(
        s, RunOptions(bus=InProcessBus(), db_path=db, run_id="flaky", resume=True)
    )
    assert sum(result.outcomes.values()) == 40
    assert conn.execute("SELECT COUNT(*) FROM trials").fetchone() == (40,)
    assert conn.execute("SELECT status FROM runs").fetchone() == ("finished",)
