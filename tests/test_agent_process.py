"""Agents as separate `errorflow agent` processes, and a client we did not write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from errorflow.protocol import signing
from errorflow.runtime.runner import EXTERNAL_AGENTS, RunOptions, RunResult, run_scenario
from errorflow.scenario.bundled import bundled
from errorflow.scenario.spec.model import Scenario
from errorflow.store.readers import get_run
from tests import processes
from tests.conftest import Mosquitto, scenario
from tests.test_liveness import cli, slow_file, wait_for_trials
from tests.test_python_loop import relaying_over
from tests.test_runner import normalised

#: The run key the runner and the agent processes share (handed over in the environment).
KEY = signing.new_key()
KEY_ENV = {**os.environ, signing.KEY_ENV: signing.key_to_text(KEY)}


def spawn_agent(
    name: str,
    run_id: str,
    url: str,
    env: dict[str, str] | None = None,
    scenario_file: Path | None = None,
) -> subprocess.Popen[bytes]:
    """`errorflow agent` for `scenario_file` (default: the contamination scenario;
    `env`: the run key by default)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "errorflow",
            "agent",
            str(scenario_file or bundled()["contamination"]),
            "--name",
            name,
            "--broker",
            url,
            "--run",
            run_id,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=KEY_ENV if env is None else env,
    )


def awaiting_agents(mosquitto: Mosquitto, db: Path, run_id: str, **more: Any) -> RunOptions:
    """A runner on Mosquitto that waits for `errorflow agent` processes (with the key
    they are given); `more`: other options."""
    options: dict[str, Any] = {"presence_timeout_s": 60, **more}
    return RunOptions(
        broker=mosquitto.url,
        db_path=db,
        run_id=run_id,
        external_agents=True,
        run_key=KEY,
        **options,
    )


async def run_with_processes(
    procs: list[subprocess.Popen[bytes]], s: Scenario, options: RunOptions
) -> RunResult:
    """Run `s` with `procs` as its agents: the runner's stop ends each (exit 0); any
    left when the run fails is killed."""
    try:
        result = await run_scenario(s, options)
        for p in procs:
            assert p.wait(timeout=30) == 0, p.stderr.read().decode()  # type: ignore[union-attr]
        return result
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_two_agent_processes_give_the_same_outcomes(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    s = scenario("contamination", trials=8)
    url = f"mqtt://127.0.0.1:{mosquitto.port}"
    run_id = "split-run-1"
    procs = [spawn_agent(name, run_id, url) for name in ("researcher", "writer")]
    split = await run_with_processes(
        procs, s, awaiting_agents(mosquitto, tmp_path / "a.db", run_id)
    )
    single = await run_scenario(s, RunOptions(broker=mosquitto.url, db_path=tmp_path / "b.db"))
    assert [x.outcome for x in split.scores] == [x.outcome for x in single.scores]
    assert normalised(split) == normalised(single)
    stored = get_run(tmp_path / "a.db", run_id)  # a resume says its trials left run here
    assert stored is not None and stored["broker"].endswith(EXTERNAL_AGENTS)


@pytest.mark.mosquitto
@pytest.mark.slow
def test_mosquitto_sub_sees_every_message_as_json(mosquitto: Mosquitto, tmp_path: Path) -> None:
    sub_bin = "mosquitto_sub"
    capture = tmp_path / "sub.txt"
    with capture.open("wb") as fh:
        sub = subprocess.Popen(
            [
                sub_bin,
                "-h",
                "127.0.0.1",
                "-p",
                str(mosquitto.port),
                "-t",
                "errorflow/#",
                "-v",
                "-q",
                "1",
            ],
            stdout=fh,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.5)
        db = tmp_path / "r.db"
        try:
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "errorflow",
                    "run",
                    "contamination",
                    "--trials",
                    "5",
                    "--broker",
                    f"mqtt://127.0.0.1:{mosquitto.port}",
                    "--db",
                    str(db),
                    "--json",
                ],
                capture_output=True,
                timeout=120,
                check=True,
            )
            time.sleep(0.5)
        finally:
            sub.terminate()
            sub.wait(5)
    run_id = json.loads(run.stdout)["run_id"]
    lines = [ln for ln in capture.read_text().splitlines() if ln.startswith(f"errorflow/{run_id}/")]
    envelopes = []
    for line in lines:
        _topic, body = line.split(" ", 1)
        env = json.loads(body)
        assert env["run_id"] == run_id and env["v"] == 1
        envelopes.append(env)
    import sqlite3

    conn = sqlite3.connect(db)
    stored = conn.execute(
        "SELECT (SELECT COUNT(*) FROM messages WHERE run_id = ?) +"
        " (SELECT COUNT(*) FROM events WHERE run_id = ?)",
        (run_id, run_id),
    ).fetchone()[0]
    assert len(envelopes) == stored
    kinds = {e["kind"] for e in envelopes}
    assert kinds == {"task", "result", "event", "control"}


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_time_an_agent_process_spends_in_real_tools_does_not_run_out_the_trial(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    """The clerk, in a process of its own, calls a Python tool twice a trial, 1.2 s a
    call, against a trial timeout of 2 s: its heartbeat tells the runner the time its
    trials spend outside errorflow (errorflow/core/outside_time.py), so both trials are
    scored, neither a bus fault."""
    needs = (
        "[{id: revenue, tool: metric, wording: revenue, args: {name: rev}, expect: 1284},"
        " {id: costs, tool: metric, wording: costs, args: {name: cost}, expect: 873}]"
    )
    s = relaying_over(tmp_path, "slower_metric", 2, needs)
    url = f"mqtt://127.0.0.1:{mosquitto.port}"
    run_id = "outside-run-1"
    proc = spawn_agent("clerk", run_id, url, scenario_file=tmp_path / "one-tool.yaml")
    try:
        options = awaiting_agents(mosquitto, tmp_path / "o.db", run_id, trial_timeout_s=2.0)
        result = await run_scenario(s, options)
        assert proc.wait(timeout=30) == 0, proc.stderr.read().decode()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert result.outcomes["success"] == 2, result.outcomes


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_an_agent_with_another_scenario_refuses_to_join(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    url = f"mqtt://127.0.0.1:{mosquitto.port}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "errorflow",
            "agent",
            "contamination",
            "--name",
            "writer",
            "--broker",
            url,
            "--run",
            "mismatch-run",
            "--propagation",
            "implicit",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=KEY_ENV,
    )
    s = scenario("contamination", trials=2)  # explicit
    try:
        with pytest.raises(TimeoutError, match="writer"):
            await run_scenario(
                s,
                awaiting_agents(mosquitto, tmp_path / "m.db", "mismatch-run", presence_timeout_s=3),
            )
        assert proc.wait(timeout=30) == 2
        assert "scenario differs" in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.mosquitto
@pytest.mark.slow
@pytest.mark.parametrize(
    ("signal_", "why"),
    [
        (signal.SIGKILL, "the runner left without a goodbye (its last will)"),
        (signal.SIGSTOP, "nothing from the runner for 10s"),  # no will: its socket stays open
    ],
)
def test_agent_processes_leave_when_their_runner_is_killed(
    mosquitto: Mosquitto, tmp_path: Path, signal_: signal.Signals, why: str
) -> None:
    path, db, key = slow_file(tmp_path, trials=200), tmp_path / "k.db", tmp_path / "run.key"
    url, run_id = f"mqtt://127.0.0.1:{mosquitto.port}", f"orphans-{signal_.name}"
    run = subprocess.Popen(
        [
            *cli("run", str(path), "--broker", url, "--external-agents", "--run-id", run_id),
            *("--key-file", str(key), "--db", str(db), "-q"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    agents: list[subprocess.Popen[str]] = []
    try:
        deadline = time.monotonic() + 30
        while not key.exists():
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        names = ("researcher", "writer")
        agents = [
            subprocess.Popen(
                [
                    *cli("agent", str(path), "--name", name, "--broker", url, "--run", run_id),
                    *("--key-file", str(key), "--wait-timeout", "10"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in names
        ]
        wait_for_trials(db, 4, run)
        left_by_runner = processes.descendants(run.pid)  # none on Mosquitto; checked all the same
        run.send_signal(signal_)
        for name, agent in zip(names, agents, strict=True):  # within their --wait-timeout
            _, stderr = agent.communicate(timeout=10 + 5)  # and a few seconds to say so
            assert agent.returncode == 1, stderr
            last = stderr.strip().splitlines()[-1]
            assert last.startswith(f"error: agent {name}: {why}"), stderr
            assert last.endswith(f"; leaving run {run_id}") and "Traceback" not in stderr
        assert processes.still_alive(left_by_runner, limit_s=5) == []
    finally:
        for proc in [run, *agents]:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
