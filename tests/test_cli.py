"""The command line as a user runs it (in-process via main(), and one real subprocess)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from errorflow.cli.main import build_parser, main
from errorflow.cli.run_commands import configured


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_run_json_has_the_documented_keys(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "errorflow",
            "run",
            "contamination",
            "--trials",
            "4",
            "--db",
            str(tmp_path / "x.db"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for key in ("run_id", "scenario", "seed", "trials", "propagation", "outcomes", "metrics"):
        assert key in data
    assert data["trials"] == 4 and sum(data["outcomes"].values()) == 4
    assert data["broker"].startswith("embedded amqtt")


def test_run_prints_a_summary_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "run",
        "contamination",
        "--trials",
        "3",
        "--db",
        str(tmp_path / "x.db"),
        "--propagation",
        "implicit",
    )
    assert code == 0
    assert "contaminated" in out and "95% CI" in out and "backend calls" in out


def test_runs_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "x.db")
    code, out, _ = run_cli(capsys, "run", "contamination", "--trials", "2", "--db", db, "--json")
    run_id = json.loads(out)["run_id"]
    code, out, _ = run_cli(capsys, "runs", "--db", db, "--json")
    assert code == 0 and json.loads(out)[0]["run_id"] == run_id
    code, out, _ = run_cli(capsys, "show", run_id[:14], "--db", db, "--json")
    assert code == 0 and json.loads(out)["status"] == "finished"
    code, out, _ = run_cli(capsys, "show", run_id, "--db", db)
    assert code == 0 and "Outcomes" in out
    code, _, err = run_cli(capsys, "show", "nope", "--db", db)
    assert code == 2 and "no run" in err


def test_schema_scenarios_validate(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "schema")
    assert code == 0 and json.loads(out)["title"] == "Envelope"
    code, out, _ = run_cli(capsys, "scenarios")
    assert code == 0 and "contamination" in out
    code, out, _ = run_cli(capsys, "validate", "contamination")
    assert code == 0 and "ok" in out


def test_missing_file_and_bad_broker_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "run", "does/not/exist.yaml")
    assert code == 2 and "no such file" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "run", "contamination", "--broker", "http://x")
    assert code == 2 and "mqtt://" in err


def test_anthropic_without_key_fails_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    from errorflow.scenario.bundled import bundled

    text = (
        bundled()["contamination"]
        .read_text()
        .replace(
            "model: {backend: simulated, profile: small-local}\n    tools",
            "model: {backend: anthropic, model: claude-haiku-4-5}\n    tools",
            1,
        )
    )
    path = tmp_path / "s.yaml"
    path.write_text(text)
    db = tmp_path / "x.db"
    code, _, err = run_cli(capsys, "run", str(path), "--db", str(db))
    assert code == 2
    assert "ANTHROPIC_API_KEY" in err and len(err.strip().splitlines()) == 1
    assert not db.exists()  # nothing started


def test_set_overrides_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys,
        "run",
        "contamination",
        "--trials",
        "10",
        "--db",
        str(tmp_path / "s.db"),
        "--json",
        "--set",
        "agents.writer.model.params={p_heed_upstream: 1.0}",
    )
    assert code == 0 and json.loads(out)["outcomes"]["contaminated"] == 0
    code, _, err = run_cli(capsys, "run", "contamination", "--set", "trials")
    assert code == 2 and "PATH=VALUE" in err
    code, _, err = run_cli(
        capsys,
        "run",
        "contamination",
        "--set",
        "agents.writer.sends_to=[nobody]",
        "--db",
        str(tmp_path / "s.db"),
    )
    assert code == 2 and "invalid scenario" in err


def test_parser_has_one_builder_per_command_in_help_order() -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == [
        "run",
        "sweep",
        "report",
        "agent",
        "validate",
        "schema",
        "scenarios",
        "runs",
        "show",
        "tui",
        "serve",
    ]


def test_run_settings_apply_after_the_set_overrides() -> None:
    parse = build_parser().parse_args
    s = configured(parse(["run", "contamination", "--set", "trials=5", "--set", "seed=4"]))
    assert (s.trials, s.seed) == (5, 4)
    s = configured(parse(["run", "contamination", "--set", "trials=5", "--trials", "7"]))
    assert s.trials == 7
    both = configured(parse(["run", "contamination", "--propagation", "both"]))
    assert both.propagation == "explicit"  # the scenario's: `both` runs each arm in turn
    s = configured(parse(["sweep", "contamination", "--propagation", "implicit", "--seed", "3"]))
    assert (s.propagation, s.seed) == ("implicit", 3)


def test_a_policy_override_that_cannot_build_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.db"
    set_ = "agents.researcher.policy.strategy=yolo"
    code, _, err = run_cli(capsys, "run", "contamination", "--set", set_, "--db", str(db))
    assert code == 2 and "unknown strategy 'yolo'" in err and "Traceback" not in err
    assert not db.exists()  # refused before anything started
    code, _, err = run_cli(capsys, "sweep", "contamination", "--vary", f"{set_},classify")
    assert code == 2 and "unknown strategy 'yolo'" in err


def test_sweep_trials_and_seed_win_over_a_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(
        capsys,
        "sweep",
        "contamination",
        "--vary",
        "trials=2,3",
        "--trials",
        "1",
        "--no-baseline",
        "--json",
        "--db",
        str(tmp_path / "x.db"),
    )
    assert code == 0
    cells = json.loads(out)["cells"]
    assert [cells[label]["trials"] for label in ("2", "3")] == [1, 1]
