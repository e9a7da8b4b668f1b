"""The options shared by the commands that run a scenario (errorflow/cli/run_options.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from errorflow.cli.main import main


def test_a_trial_past_its_timeout_is_a_bus_fault_and_the_timeout_is_an_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "t.db")
    argv = ["run", "contamination", "--trials", "2", "--json", "-q", "--db", db]
    assert main(argv) == 0
    counts = json.loads(capsys.readouterr().out)["outcomes"]
    assert counts["bus_fault"] == 0  # the default waits long enough
    assert main([*argv, "--trial-timeout", "0.001"]) == 0
    counts = json.loads(capsys.readouterr().out)["outcomes"]
    assert counts["bus_fault"] == 2  # no final result within a millisecond


def test_a_trial_timeout_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "contamination", "--trial-timeout", "0"]) == 2
    assert "--trial-timeout: expected a number above 0" in capsys.readouterr().err
