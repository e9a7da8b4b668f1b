"""The command line as a user runs it (in-process via main(), and one real subprocess)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from errorflow.cli.commands.store import group_lines, runs_lines
from errorflow.cli.errors import UsageError
from errorflow.cli.main import build_parser, main
from errorflow.cli.run_keys import agent_key, runner_key
from errorflow.cli.run_options import scenario_of as configured
from errorflow.protocol.signing import KEY_ENV, new_key
from errorflow.scenario.bundled import bundled
from errorflow.scoring.summary import summarize
from errorflow.store.opening import open_db
from errorflow.store.readers import get_run, list_runs, trial_rows
from errorflow.store.runs import create_run, finish_run
from tests.conftest import Mosquitto


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
    assert data["broker"] == "in-process"  # nothing outside joins: no broker is started


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


def test_show_prints_what_fired_as_run_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "f.db")
    code, ran, _ = run_cli(capsys, "run", "contamination", "--trials", "6", "--db", db,
                           "--run-id", "f-1")  # fmt: skip
    fired = [line for line in ran.splitlines() if "fired in" in line]
    assert code == 0 and fired
    code, shown, _ = run_cli(capsys, "show", "f-1", "--db", db)
    assert code == 0 and all(line in shown.splitlines() for line in fired)


def test_show_says_an_interrupted_run_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "i.db"
    assert run_cli(capsys, "run", "contamination", "--trials", "2", "--db", str(db),
                   "--run-id", "i-1", "-q")[0] == 0  # fmt: skip
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET status = 'interrupted'")
    code, out, _ = run_cli(capsys, "show", "i-1", "--db", str(db))
    assert code == 0 and " · stopped " in out and " · finished " not in out


def test_schema_scenarios_validate(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "schema")
    assert code == 0 and json.loads(out)["title"] == "Envelope"
    code, out, _ = run_cli(capsys, "scenarios")
    assert code == 0 and "contamination" in out
    code, out, _ = run_cli(capsys, "validate", "contamination")
    assert code == 0 and "ok" in out


def test_validate_shows_a_path_as_written_and_long_paths_unbroken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Brackets in a path are text, not markup; a long path stays on one line.
    folder = tmp_path / "[red]x" / ("deep" * 30)
    folder.mkdir(parents=True)
    path = folder / "c.yaml"
    path.write_text((bundled()["contamination"]).read_text())
    code, out, _ = run_cli(capsys, "validate", str(path))
    assert code == 0
    assert out.startswith(f"ok {path}: scenario 'contamination'") and out.count("\n") == 1


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
    assert code == 2 and "Traceback" not in err
    where = "--set agents.writer.sends_to=[nobody]: agents.writer.sends_to.0"
    assert f"invalid scenario: {where}: unknown agent 'nobody'" in err


def test_parser_has_one_builder_per_command_in_help_order() -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == [
        "run",
        "sweep",
        "report",
        "agent",
        "worker",
        "broker-config",
        "validate",
        "schema",
        "scenarios",
        "calibrate",
        "profiles",
        "runs",
        "show",
        "trace",
        "export",
        "completion",
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


# -- readable commands ---------------------------------------------------------------------

LONG_IDS = [
    "strategy-matrix-7370b2-transient_tell-model-baseline",
    "strategy-matrix-7370b2-transient_tell-model",
]


async def _store(db: Path) -> None:
    conn = await open_db(db)
    try:
        for run_id, group in [(LONG_IDS[0], "strategy-matrix-7370b2"),
                              (LONG_IDS[1], "strategy-matrix-7370b2"),
                              ("contamination-1a2b3c4d", None)]:  # fmt: skip
            await create_run(
                conn, run_id=run_id, scenario=run_id.split("-7")[0].split("-1")[0],
                scenario_json="{}", seed=0, trials=20, propagation="explicit",
                broker="embedded", group_id=group, label=run_id[23:] if group else None,
            )  # fmt: skip
            await finish_run(conn, run_id, "finished", summarize([]))
    finally:
        await conn.close()


def test_runs_fit_80_columns_with_whole_ids_and_a_group_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # an 80-column terminal (piped output is not cut)
    db = tmp_path / "r.db"
    asyncio.run(_store(db))
    code, out, _ = run_cli(capsys, "runs", "--db", str(db))
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    for run_id in [*LONG_IDS, "contamination-1a2b3c4d"]:
        assert run_id in lines  # whole, on a line of its own
    # The header comes before the first run (the title above it may wrap a long path).
    first = min(lines.index(run_id) for run_id in [*LONG_IDS, "contamination-1a2b3c4d"])
    assert any("group" in line and "started" in line for line in lines[:first])
    wide = runs_lines(list_runs(db), 200)  # room enough: one line a run
    assert len(wide) == 5 and all(len(line) <= 200 for line in wide)
    line = next(line for line in wide if line.startswith(LONG_IDS[1]))
    assert "  strategy-matrix-7370b2  strategy-matrix  explicit" in line


def test_show_a_run_and_a_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # as the expected lines were laid out
    db = tmp_path / "r.db"
    asyncio.run(_store(db))
    code, out, _ = run_cli(capsys, "show", "contamination-1a", "--db", str(db))
    assert code == 0 and "{" not in out  # read as a person reads, not a Python dict
    assert out.startswith("run contamination-1a2b3c4d  finished")
    assert "seed 0 · 20 trials · propagation explicit" in out
    code, out, _ = run_cli(capsys, "show", "strategy-matrix-73", "--db", str(db))
    assert code == 0 and out.startswith("group strategy-matrix-7370b2: scenario")
    assert all(run_id in out.splitlines() for run_id in LONG_IDS)
    assert f"errorflow report strategy-matrix-7370b2 --db {db}" in out
    code, out, _ = run_cli(capsys, "show", "strategy-matrix-7370b2", "--db", str(db), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["group_id"] == "strategy-matrix-7370b2"
    assert [r["run_id"] for r in doc["runs"]] == LONG_IDS
    code, out, _ = run_cli(capsys, "report", "contamination-1", "--db", str(db), "--format", "json")
    assert code == 0 and json.loads(out)["arms"][0]["run_id"] == "contamination-1a2b3c4d"


def test_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    asyncio.run(_store(db))
    proc = subprocess.Popen(
        [sys.executable, "-m", "errorflow", "show", "contamination-1", "--db", str(db), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`: the reader is gone before the first write
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == ""


def test_verbose_shows_errorflow_logs_not_the_drivers(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "errorflow", "-v", "run", "contamination", "--trials", "1",
         "--db", str(tmp_path / "v.db"), "-q"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "DEBUG errorflow.cli.commands.run: run contamination-" in proc.stderr
    assert "aiosqlite" not in proc.stderr and "asyncio" not in proc.stderr
    assert all(line.split()[1].startswith("errorflow") for line in proc.stderr.splitlines())


def _has_trials(db: Path, run_id: str) -> bool:
    try:
        return bool(trial_rows(db, run_id))
    except (FileNotFoundError, sqlite3.Error):  # not created yet
        return False


def _interrupted(db: Path, run_id: str, workers: str, under_way: Callable[[], bool]) -> str:
    """A 100,000-trial run started, Ctrl-C once `under_way()`: exit 130, and the
    message it printed, which must be the exact resume command."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "errorflow", "run", "contamination", "--trials", "100000",
         "--run-id", run_id, "--db", str(db), "-q", "--workers", workers],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not under_way():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    resume = f"errorflow run --resume {run_id} --db {db}"
    assert err.strip() == f"error: interrupted; resume with: {resume}"
    run = get_run(db, run_id)
    assert run is not None and run["status"] == "interrupted"
    return str(run["broker"])


def test_ctrl_c_prints_the_exact_resume_command(tmp_path: Path) -> None:
    db = tmp_path / "c.db"

    def under_way() -> bool:
        if _has_trials(db, "long-1"):
            time.sleep(0.5)
            return True
        return False

    assert _interrupted(db, "long-1", "1", under_way) == "in-process"


def test_ctrl_c_on_a_large_run_over_workers_keeps_what_they_did(tmp_path: Path) -> None:
    """Ctrl-C stops the worker processes, what they stored is merged, and the run is
    resumable like any other."""
    db = tmp_path / "w.db"

    def under_way() -> bool:
        try:
            registered = get_run(db, "long-w") is not None
        except (FileNotFoundError, sqlite3.Error):  # the store is not made yet
            return False
        if registered:
            time.sleep(6)  # the workers start (about a second) and run trials
        return registered

    assert _interrupted(db, "long-w", "2", under_way) == "in-process, 2 worker processes"
    assert 0 < len(trial_rows(db, "long-w")) < 100_000


def test_resume_alone_runs_a_bundled_scenario_with_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.db"
    code, out, _ = run_cli(
        capsys, "run", "contamination", "--trials", "3", "--run-id", "cut-1", "--db", str(db),
        "--json",
    )  # fmt: skip
    done = json.loads(out)["outcomes"]
    with sqlite3.connect(db) as conn:  # as a run killed after its second trial leaves it
        conn.execute("UPDATE runs SET status = 'interrupted', summary_json = NULL")
        conn.execute("DELETE FROM trials WHERE trial = 2")
    conn.close()
    run = get_run(db, "cut-1")
    assert run is not None and run["scenario_exact"] == 0  # the stored copy is redacted
    code, out, err = run_cli(capsys, "run", "--resume", "cut", "--db", str(db), "--json")
    assert code == 0, err
    assert json.loads(out)["run_id"] == "cut-1" and json.loads(out)["outcomes"] == done


def test_baseline_amplification_is_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "b.db")
    code, out, _ = run_cli(capsys, "run", "amplification", "--trials", "4", "--baseline", "--db",
                           db)  # fmt: skip
    assert code == 0 and "amplification vs fault-free baseline: backend" in out
    code, out, _ = run_cli(
        capsys, "run", "contamination", "--trials", "2", "--propagation", "both", "--baseline",
        "--db", db,
    )  # fmt: skip
    assert code == 0
    assert "amplification vs fault-free baseline (backend × / model ×): explicit 1.00/" in out


def test_both_arms_say_which_faults_fired_as_one_arm_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fault = "agents.writer.model.faults=[{kind: overloaded, p: 0.3}]"
    common = ["--trials", "10", "--set", fault, "--db", str(tmp_path / "f.db")]
    code, one, _ = run_cli(capsys, "run", "contamination", *common)
    one = " ".join(one.split())  # the console's width may wrap it
    line = re.search(
        r"model faults: agents\.writer\.model\.faults\[0\] overloaded fired .*? never in \d+", one
    )
    assert code == 0 and line is not None
    code, both, _ = run_cli(capsys, "run", "contamination", "--propagation", "both", *common)
    both = " ".join(both.split())
    assert code == 0 and f"explicit: {line.group(0)}" in both
    assert "implicit: model faults: agents.writer.model.faults[0] overloaded fired in" in both


def test_no_faults_runs_the_same_system_fault_free(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "n.db")
    code, out, _ = run_cli(capsys, "run", "contamination", "--trials", "6", "--no-faults",
                           "--json", "-q", "--db", db)  # fmt: skip
    assert code == 0 and json.loads(out)["outcomes"]["success"] == 6
    code, out, _ = run_cli(capsys, "run", "contamination", "--trials", "6", "--json", "-q",
                           "--db", db)  # fmt: skip
    assert json.loads(out)["outcomes"]["success"] == 0  # the 401 is back


def test_baseline_prints_the_fault_free_outcomes_beside_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "b.db")
    code, out, _ = run_cli(capsys, "run", "contamination", "--trials", "4", "--baseline",
                           "--db", db)  # fmt: skip
    flat = " ".join(out.split())
    assert code == 0 and "fault-free baseline: success 4, contained 0, contaminated 0 of 4" in flat
    code, out, _ = run_cli(capsys, "run", "contamination", "--trials", "4", "--baseline",
                           "--propagation", "both", "--db", db)  # fmt: skip
    flat = " ".join(out.split())
    assert "explicit: fault-free baseline: success 4" in flat
    assert "implicit: fault-free baseline: success 4" in flat


def test_sweep_shows_cell_k_of_n_and_amplification_per_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "sweep", "strategy-matrix", "--trials", "1", "--db", str(tmp_path / "s.db")
    )
    assert code == 0
    assert "cell 1 of 9: transient/blind-retry: 1 trials" in err
    assert "cell 3 of 9: transient/classify (fault-free baseline)" in err
    assert "cell 9 of 9: fatal/classify: 1 trials" in err
    assert "strategy-matrix: amplification b×/m× vs fault-free baseline" in out
    table = out.split("amplification b×/m× vs fault-free baseline")[1]
    assert table.count("/1.00") + table.count("/0.50") >= 9  # a figure in every cell


# -- the agent and the run key ------------------------------------------------------------


def test_agent_takes_the_run_options(monkeypatch: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(
        ["agent", "contamination", "--name", "writer", "--broker", "mqtt://h:1", "--run", "r",
         "--set", "agents.writer.model.params={p_heed_upstream: 1.0}", "--trials", "5",
         "--seed", "9", "--propagation", "implicit", "--wait-timeout", "2"]
    )  # fmt: skip
    s = configured(args)
    assert (s.trials, s.seed, s.propagation) == (5, 9, "implicit")
    assert s.agents["writer"].model.params == {"p_heed_upstream": 1.0}
    assert args.wait_timeout == 2.0


def test_an_agent_of_a_scenario_with_services_is_refused_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The runner refuses such a run for external agents: no roll call would come."""
    code = main(["agent", "retry-storm", "--name", "writer", "--broker", "mqtt://127.0.0.1:1",
                 "--run", "r", "--wait-timeout", "1"])  # fmt: skip
    assert code == 2 and "services keep one state" in capsys.readouterr().err


@pytest.mark.mosquitto
def test_agent_says_what_it_waits_for_and_gives_up(
    mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(KEY_ENV, new_key().hex())
    url = f"mqtt://127.0.0.1:{mosquitto.port}"
    code = main(["agent", "contamination", "--name", "writer", "--broker", url,
                 "--run", "no-such-run", "--wait-timeout", "1"])  # fmt: skip
    lines = capfd.readouterr().err.strip().splitlines()
    assert code == 1
    assert lines[0] == f"agent writer: waiting for run no-such-run on {url} (roll call)"
    assert len(lines) == 2 and "no roll call of run no-such-run" in lines[1]
    assert "after 1s" in lines[1] and "--wait-timeout" in lines[1]


def test_run_key_file_is_made_owner_only_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    path = tmp_path / "run.key"
    key = runner_key(str(path), external_agents=True)
    assert key is not None and stat.S_IMODE(path.stat().st_mode) == 0o600
    expected = f"run key in {path} (give it to each agent: --key-file {path} or {KEY_ENV})"
    assert capfd.readouterr().err.strip() == expected
    assert runner_key(str(path), external_agents=True) == key == agent_key(str(path))
    assert runner_key(None, external_agents=False) is None  # the runner makes a fresh one
    monkeypatch.setenv(KEY_ENV, key.hex())
    assert runner_key(None, external_agents=True) == key == agent_key(None)
    path.chmod(0o644)
    with pytest.raises(UsageError, match="readable by others"):
        agent_key(str(path))


# -- strings from outside ------------------------------------------------------------------


def test_a_sweep_of_hostile_values_prints_and_reports_them_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--vary` values are labels in the table, the progress lines, the store and the
    reports: escapes made visible, markup not read, Markdown cells not split, no HTML."""
    db = str(tmp_path / "h.db")
    values = ["a|b", "<script>x</script>", "\x1b]0;PW\x07[/]", "\x1b[?1049l"]
    code, out, err = run_cli(
        capsys, "sweep", "contamination", "--vary", "description=" + ",".join(values),
        "--trials", "1", "--no-baseline", "--db", db,
    )  # fmt: skip
    assert code == 0, err
    for printed in (out, err):
        assert "\x1b" not in printed and "\x07" not in printed
    assert "│ \\x1b]0;PW\\x07[/]" in out and "│ \\x1b[?1049l" in out and "│ a|b " in out
    assert "cell 3 of 4: \\x1b]0;PW\\x07[/]: 1 trials" in err
    group = out.split("group ")[1].split(";")[0]
    code, shown, _ = run_cli(capsys, "show", group, "--db", db)
    assert code == 0 and "\x1b" not in shown and "\\x1b[?1049l" in shown
    code, md, _ = run_cli(capsys, "report", group, "--db", db)
    assert code == 0
    assert "| a\\|b | " in md and "| &lt;script&gt;x&lt;/script&gt; | " in md
    assert "| \\\\x1b\\]0;PW\\\\x07\\[/\\] | " in md
    assert "<script>" not in md and "\x1b" not in md and "\x07" not in md
    code, page, _ = run_cli(capsys, "report", group, "--db", db, "--format", "html")
    assert code == 0 and "<script>" not in page and "\x1b" not in page
    assert "<td>a|b</td>" in page and "<td>&lt;script&gt;x&lt;/script&gt;</td>" in page


def test_a_command_leaves_nothing_installed_for_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """How a run's real models are served (its cassette, limits, timeouts) ends with the
    command: `main` called again in the same thread starts from what was there before."""
    from errorflow.models import serving

    before = serving.current()
    db = str(tmp_path / "s.db")
    assert (
        main(["run", "contamination", "--trials", "1", "--db", db, "-q", "--busy-wait", "3"]) == 0
    )
    assert serving.current() is before


def test_a_group_shows_the_bus_faults_its_runs_had() -> None:
    def run(run_id: str, outcomes: dict[str, int] | None) -> Any:
        summary = {"outcomes": outcomes} if outcomes is not None else None
        return {"run_id": run_id, "label": run_id, "status": "finished", "summary": summary,
                "scenario": "s", "seed": 1, "trials": 60}  # fmt: skip

    counts = {"success": 26, "contained": 14, "contaminated": 3, "bus_fault": 17}
    lines = group_lines("g", [run("a", counts), run("b", None)], "x.db", 100)
    assert lines[1].split()[-1] == "bus_fault" and lines[3].split()[-4:] == ["26", "14", "3", "17"]
    assert lines[4].split()[-4:] == ["–"] * 4
    plain = group_lines("g", [run("a", {"success": 1, "bus_fault": 0})], "x.db", 100)
    assert "bus_fault" not in plain[1]


def test_a_fault_free_run_takes_no_baseline_of_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "nb.db"
    code, _, err = run_cli(capsys, "run", "contamination", "--trials", "2", "--no-faults",
                           "--baseline", "--db", str(db))  # fmt: skip
    assert code == 2 and "--baseline" in err and "--no-faults" in err and not db.exists()
