"""`errorflow run --otlp URL`: trials sent as OpenTelemetry traces while the run goes on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from errorflow.cli import live_otlp
from errorflow.cli.main import main
from errorflow.store.readers import group_runs
from tests.otlp_receiver import ProtoReceiver


def test_trials_arrive_during_the_run_and_all_of_them_by_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(live_otlp, "EVERY_S", 0.2)
    db = tmp_path / "l.db"
    with ProtoReceiver() as receiver:
        started = time.monotonic()
        # time_scale: simulated seconds are partly waited for real, so the run lasts
        # seconds however fast the machine and its path are, and the reads fall inside it
        args = ["run", "support-pipeline", "--propagation", "both", "--trials", "60",
                "--set", "time_scale=0.02",
                "--otlp", receiver.url, "--span-time", "sim", "--db", str(db), "-q"]  # fmt: skip
        assert main(args) == 0
        ended = time.monotonic()
    err = capsys.readouterr().err
    runs = group_runs(db, next(iter({s["resource"]["openinference.project.name"]
                                     for s in receiver.spans})).rsplit("-", 1)[0])  # fmt: skip
    assert {r["label"] for r in runs} == {"explicit", "implicit"}
    traces = {s["trace_id"] for s in receiver.spans}
    assert len(traces) == 120  # every trial of both arms, once
    assert f"of 120 trial(s) to {receiver.url}" in err
    # sent in several reads, the first well before the run ended
    assert receiver.requests > 2 and receiver.times[0] < ended - 0.3 and started < ended


def test_a_receiver_that_refuses_is_said_once_and_the_run_still_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.db"
    args = ["run", "contamination", "--trials", "3", "--otlp", "http://127.0.0.1:9",
            "--db", str(db), "-q"]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "sent 0 spans of 0 trial(s)" in err and "then:" in err
