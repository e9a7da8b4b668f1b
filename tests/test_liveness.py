"""Liveness with bounded time: a participant that goes away is noticed within seconds,
waited for a grace period (a restarted agent rejoins and its trials end as they would
have), and otherwise ends the run in one line with its trials in flight marked and
resumable. The broker gone for good ends the run in bound, without a traceback; SIGTERM
marks the run interrupted like Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from errorflow.agents.agent import Agent
from errorflow.bus.transport import InProcessBus
from errorflow.protocol import signing
from errorflow.runtime import recorder as recorder_mod
from errorflow.runtime.agent_process import serve
from errorflow.runtime.liveness import (
    LOST,
    Liveness,
    ParticipantLost,
    taken_by_lost,
)
from errorflow.runtime.participants import make_agent
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scenario.overrides import apply
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Outcome, TrialScore
from tests.conftest import Mosquitto, scenario
from tests.test_runner import normalised

KEY = signing.new_key()
GRACE_S = 2.0

# -- the rule ---------------------------------------------------------------------------


def test_a_will_makes_an_agent_suspect_at_once_and_lost_after_the_grace_period() -> None:
    live = Liveness(grace_s=5)
    live.join("writer", "s1", now=0)
    assert live.gone("writer", "s1", now=1) is True
    assert live.suspects == ["writer"]
    assert live.check(now=5.9) == ([], None)
    _, lost = live.check(now=6.1)
    assert lost is not None and lost.who == "agent writer"
    assert "grace period" in lost.what and "last will" in lost.what
    assert lost.reason.startswith(LOST)


def test_an_agent_that_answers_is_back_and_a_new_session_is_a_restart() -> None:
    live = Liveness(grace_s=5)
    live.join("writer", "s1", now=0)
    live.gone("writer", "s1", now=1)
    assert live.join("writer", "s1", now=2) is False  # reconnected: it kept its work
    assert live.suspects == []
    live.gone("writer", "s1", now=3)
    live.alive("writer", "s1", now=4)  # its heartbeat again, also back
    assert live.suspects == []
    assert live.join("writer", "s2", now=5) is True  # a new process: it lost its work
    assert live.suspects == [] and live.check(now=6) == ([], None)


def test_a_will_of_an_older_session_or_a_replayed_one_changes_nothing() -> None:
    live = Liveness(grace_s=5)
    live.join("writer", "s1", now=0)
    live.join("writer", "s2", now=1)  # restarted before the broker gave up on s1
    assert live.gone("writer", "s1", now=2) is False and live.suspects == []
    live.alive("writer", "s1", now=2.2)  # nor does the old process's last heartbeat
    assert live.gone("writer", "s2", now=4) is True
    assert live.gone("writer", "s2", now=8) is False  # the clock is not restarted
    assert live.check(now=9.5)[1] is not None
    assert live.gone("nobody", "x", now=1) is False


def test_two_processes_answering_as_one_agent_end_the_run() -> None:
    """A second copy of an agent joined while the first ran on: both would do their
    trials' work, which the run counts once."""
    live = Liveness(grace_s=5)
    live.join("retriever", "a", now=0)
    assert live.join("retriever", "b", now=1) is True  # taken for a restart at first
    live.alive("retriever", "a", now=1.5)  # a heartbeat sent before it stopped
    assert live.check(now=1.6) == ([], None)
    live.alive("retriever", "a", now=3)  # still running: a second process
    _, lost = live.check(now=3.1)
    assert lost is not None and "two processes answer as agent retriever" in lost.what


def test_silence_makes_an_agent_suspect_only_where_heartbeats_are_due() -> None:
    live = Liveness(grace_s=5, silence_s=3)
    live.join("writer", "s1", now=0)
    live.seen("writer", now=2)  # any message of its counts as a sign of life
    assert live.check(now=4.9) == ([], None)
    assert live.check(now=5.1) == (["writer"], None)
    assert "nothing from it for 3s" in live.why("writer")
    quiet = Liveness(grace_s=5, silence_s=3, heartbeats=False)  # in-process agents
    quiet.join("writer", "s1", now=0)
    assert quiet.check(now=100) == ([], None)


def test_silence_while_the_runner_is_cut_off_counts_against_nobody() -> None:
    live = Liveness(grace_s=5, silence_s=3)
    live.join("writer", "s1", now=0)
    live.gone("writer", "s1", now=1)
    live.deaf(now=10)  # the runner's own broker connection was down until 10
    assert live.check(now=12) == ([], None)
    assert live.check(now=15.5)[1] is not None


def test_only_trials_a_lost_participant_took_are_rerun() -> None:
    lost = TrialScore(1, Outcome.INFRA_FAULT, 0, reason=f"{LOST}agent writer is gone")
    server = TrialScore(2, Outcome.INFRA_FAULT, 0, reason="model server unreachable")
    assert taken_by_lost(lost) and not taken_by_lost(server)
    assert not taken_by_lost(TrialScore(3, Outcome.BUS_FAULT, 0, reason=lost.reason))


# -- the runner, with agents it does not start (in-process bus) ---------------------------


def slow(trials: int = 24) -> Scenario:
    """Trials that take real time (tool latency), a few at once."""
    s = scenario("contamination", trials=trials, time_scale=1.0, max_in_flight=3)
    return apply(s, {f"tools.{t}.latency_s": 0.15 for t in s.tools})


def start_agent(
    bus: InProcessBus, s: Scenario, run_id: str, name: str, made: list[Agent] | None = None
) -> asyncio.Task[None]:
    """An agent as `errorflow agent` runs one (heartbeat, gone when it stops), here."""

    async def run() -> None:
        conn = await bus.connect(f"{run_id}-{name}")
        agent = make_agent(RunPlan(s), name, run_id, conn, run_key=KEY)
        if made is not None:
            made.append(agent)
        await serve(agent, heartbeat_s=0.2)

    return asyncio.create_task(run())


def options(db: Path, run_id: str, bus: InProcessBus, **more: Any) -> RunOptions:
    return RunOptions(bus=bus, db_path=db, run_id=run_id, external_agents=True, run_key=KEY, **more)


async def after_trials(done: list[int], count: int) -> None:
    while len(done) < count:
        await asyncio.sleep(0.02)


def outcomes(result: RunResult) -> dict[int, str]:
    return {sc.trial: sc.outcome.value for sc in result.scores}


async def test_a_lost_agent_ends_the_run_with_its_trials_in_flight_marked(tmp_path: Path) -> None:
    s, bus, done = slow(), InProcessBus(), []
    agents = {n: start_agent(bus, s, "lost", n) for n in s.agents}
    run = asyncio.create_task(
        run_scenario(
            s,
            options(
                tmp_path / "l.db", "lost", bus, grace_s=GRACE_S, on_trial=lambda sc: done.append(1)
            ),
        )
    )
    await after_trials(done, 4)
    agents["writer"].cancel()  # gone, and not back
    with pytest.raises(ParticipantLost, match="agent writer is gone") as caught:
        await asyncio.wait_for(run, GRACE_S + 10)  # over within the grace period + 10 s
    assert "grace period" in str(caught.value) and "trials in flight marked infra_fault" in str(
        caught.value
    )
    agents["researcher"].cancel()
    conn = sqlite3.connect(tmp_path / "l.db")
    assert conn.execute("SELECT status FROM runs").fetchone() == ("interrupted",)
    marked = conn.execute("SELECT reason FROM trials WHERE outcome = 'infra_fault'").fetchall()
    assert marked and all(r.startswith(LOST) and "writer" in r for (r,) in marked)
    stored = conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    assert stored < s.trials

    # --resume (in-process agents) reruns the lost trials and the missing ones
    resumed = await run_scenario(
        s, RunOptions(db_path=tmp_path / "l.db", run_id="lost", resume=True)
    )
    whole = await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=tmp_path / "w.db"))
    assert resumed.infra_faults == 0 and len(resumed.scores) == s.trials
    assert outcomes(resumed) == outcomes(whole)


async def test_a_restarted_agent_rejoins_and_its_trials_end_as_they_would_have(
    tmp_path: Path,
) -> None:
    s, bus, done = slow(), InProcessBus(), []
    agents = {n: start_agent(bus, s, "back", n) for n in s.agents}
    run = asyncio.create_task(
        run_scenario(
            s,
            options(tmp_path / "b.db", "back", bus, grace_s=30, on_trial=lambda sc: done.append(1)),
        )
    )
    await after_trials(done, 4)
    agents["writer"].cancel()
    await asyncio.sleep(0.5)
    agents["writer"] = start_agent(bus, s, "back", "writer")  # a new process, same options
    result = await asyncio.wait_for(run, 60)
    whole = await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=tmp_path / "w.db"))
    assert result.outcomes["bus_fault"] == 0 and result.infra_faults == 0
    assert outcomes(result) == outcomes(whole)
    assert normalised(result) == normalised(whole)  # each message once, as it would be
    assert result.summary["metrics"] == whole.summary["metrics"]  # costs counted once
    await asyncio.wait_for(asyncio.gather(*agents.values(), return_exceptions=True), 10)


async def test_a_silent_agent_is_missed_without_a_will(tmp_path: Path) -> None:
    """A hung process says nothing, not even gone: its silence gives it away."""
    s, bus, done = slow(), InProcessBus(), []
    made: list[Agent] = []
    agents = {n: start_agent(bus, s, "hung", n, made) for n in s.agents}
    run = asyncio.create_task(
        run_scenario(
            s,
            options(
                tmp_path / "h.db",
                "hung",
                bus,
                grace_s=1,
                silence_s=1,
                on_trial=lambda sc: done.append(1),
            ),
        )
    )
    await after_trials(done, 3)
    for a in made:
        if a.name == "writer":
            a.presence.left = True  # hung: it will say nothing more, not even gone
    agents["writer"].cancel()
    with pytest.raises(ParticipantLost, match=r"agent writer is gone \(nothing from it for 1s\)"):
        await asyncio.wait_for(run, 15)
    for task in agents.values():
        task.cancel()


async def test_a_stopped_recorder_ends_the_run(tmp_path: Path, monkeypatch: Any) -> None:
    real = recorder_mod.Recorder.handle
    seen = [0]

    def handle(self: Any, topic: str, raw: bytes) -> None:
        seen[0] += 1
        if seen[0] == 40:
            raise RuntimeError("recorder bug")
        real(self, topic, raw)

    monkeypatch.setattr(recorder_mod.Recorder, "handle", handle)
    with pytest.raises(ParticipantLost, match=r"the recorder stopped \(RuntimeError: recorder bug"):
        await asyncio.wait_for(
            run_scenario(slow(), RunOptions(bus=InProcessBus(), db_path=tmp_path / "r.db")), 30
        )
    conn = sqlite3.connect(tmp_path / "r.db")
    assert conn.execute("SELECT status FROM runs").fetchone() == ("interrupted",)


# -- real processes on Mosquitto -----------------------------------------------------------


def slow_file(tmp_path: Path, trials: int = 40) -> Path:
    """The slow scenario as a file (`errorflow agent` and `run` need one)."""
    s = scenario("contamination", trials=trials, time_scale=1.0, max_in_flight=4)
    s = apply(s, {f"tools.{t}.latency_s": 0.3 for t in s.tools})
    path = tmp_path / "slow.yaml"
    path.write_text(json.dumps(s.model_dump(mode="json", exclude_none=True)))
    return path


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "errorflow", *args]


def agent(path: Path, name: str, run_id: str, url: str, key_file: Path) -> subprocess.Popen[str]:
    argv = ["agent", str(path), "--name", name, "--broker", url, "--run", run_id]
    return subprocess.Popen(
        cli(*argv, "--key-file", str(key_file)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def stored_trials(db: Path) -> int:
    if not db.exists():  # (connecting would create it, an empty file the run refuses)
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return int(c.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    except sqlite3.Error:
        return 0


def wait_for_trials(db: Path, count: int, proc: subprocess.Popen[str], limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while stored_trials(db) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.1)


def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("error:")]


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(10)


@pytest.mark.slow
def test_a_killed_agent_ends_the_run_within_the_grace_period_and_it_resumes(
    mosquitto: Mosquitto, tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    path, db, key = slow_file(tmp_path), tmp_path / "k.db", tmp_path / "run.key"
    url = f"mqtt://127.0.0.1:{mosquitto.port}"
    run = subprocess.Popen(
        [
            *cli("run", str(path), "--broker", url, "--external-agents", "--run-id", "killed"),
            *("--key-file", str(key), "--db", str(db), "-q", "--grace-s", "3"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(run)
    deadline = time.monotonic() + 30
    while not key.exists():
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.05)
    writer = agent(path, "writer", "killed", url, key)
    procs += [agent(path, "researcher", "killed", url, key), writer]
    wait_for_trials(db, 6, run)
    writer.send_signal(signal.SIGKILL)
    _, stderr = run.communicate(timeout=3 + 10)  # over within the grace period + 10 s
    assert run.returncode == 1, stderr
    [line] = error_lines(stderr)
    assert "agent writer is gone" in line and "3s grace period" in line, line
    assert "resume with: errorflow run" in line and "--resume killed" in line
    assert "Traceback" not in stderr
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT status FROM runs").fetchone() == ("interrupted",)
        reasons = [r for (r,) in c.execute("SELECT reason FROM trials WHERE outcome='infra_fault'")]
    assert reasons and all("agent writer is gone" in r for r in reasons)

    resume = subprocess.run(
        cli("run", str(path), "--resume", "killed", "--db", str(db), "--json"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resume.returncode == 0, resume.stderr
    assert "processes of their own" in resume.stderr  # the rest runs here: said
    whole = subprocess.run(
        cli("run", str(path), "--db", str(tmp_path / "w.db"), "--json"),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(resume.stdout)["outcomes"] == json.loads(whole.stdout)["outcomes"]
    with sqlite3.connect(db) as c, sqlite3.connect(tmp_path / "w.db") as w:
        query = "SELECT trial, outcome FROM trials ORDER BY trial"
        assert c.execute(query).fetchall() == w.execute(query).fetchall()


@pytest.mark.slow
async def test_an_agent_process_restarted_within_the_grace_period_changes_no_outcome(
    mosquitto: Mosquitto, tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    path, key = slow_file(tmp_path), tmp_path / "run.key"
    signing.write_key_file(key, KEY)
    s = scenario("contamination", trials=40, time_scale=1.0, max_in_flight=4)
    s = apply(s, {f"tools.{t}.latency_s": 0.3 for t in s.tools})
    url, done = f"mqtt://127.0.0.1:{mosquitto.port}", []
    writer = agent(path, "writer", "restarted", url, key)
    procs += [agent(path, "researcher", "restarted", url, key), writer]
    run = asyncio.create_task(
        run_scenario(
            s,
            RunOptions(
                broker=mosquitto.url,
                db_path=tmp_path / "r.db",
                run_id="restarted",
                external_agents=True,
                run_key=KEY,
                presence_timeout_s=60,
                grace_s=30,
                on_trial=lambda sc: done.append(1),
            ),
        )
    )
    await asyncio.wait_for(after_trials(done, 6), 60)
    writer.send_signal(signal.SIGKILL)
    await asyncio.sleep(1)
    procs.append(agent(path, "writer", "restarted", url, key))
    result = await asyncio.wait_for(run, 90)
    whole = await run_scenario(s, RunOptions(broker=mosquitto.url, db_path=tmp_path / "w.db"))
    assert result.outcomes["bus_fault"] == 0 and result.infra_faults == 0
    assert outcomes(result) == outcomes(whole)
    assert normalised(result) == normalised(whole)
    for p in (procs[0], procs[2]):  # the researcher and the new writer: stopped by the runner
        assert p.wait(30) == 0, p.communicate()


@pytest.mark.slow
def test_a_broker_gone_for_good_ends_the_run_in_bound_without_a_traceback(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    broker = Mosquitto(tmp_path)
    broker.start()
    path, db = slow_file(tmp_path), tmp_path / "b.db"
    try:
        run = subprocess.Popen(
            [
                *cli("run", str(path), "--broker", f"mqtt://127.0.0.1:{broker.port}"),
                *("--db", str(db), "-q", "--grace-s", "3"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(run)
        wait_for_trials(db, 6, run)
    finally:
        broker.stop()
    _, stderr = run.communicate(timeout=3 + 10)  # over within the grace period + 10 s
    assert run.returncode == 1, stderr
    assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr
    [line] = error_lines(stderr)
    assert "the broker" in line and "unreachable for 3s" in line and "--resume" in line, line
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT status FROM runs").fetchone() == ("interrupted",)


@pytest.mark.slow
def test_sigterm_marks_the_run_interrupted_like_ctrl_c(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    path, db = slow_file(tmp_path), tmp_path / "t.db"
    run = subprocess.Popen(
        cli("run", str(path), "--db", str(db), "-q", "--run-id", "termed"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(run)
    wait_for_trials(db, 4, run)
    os.kill(run.pid, signal.SIGTERM)
    _, stderr = run.communicate(timeout=30)
    assert run.returncode == 130, stderr
    assert "interrupted (SIGTERM)" in stderr and "--resume termed" in stderr
    assert "Traceback" not in stderr
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT status FROM runs").fetchone() == ("interrupted",)
    resume = subprocess.run(
        cli("run", str(path), "--resume", "termed", "--db", str(db), "-q"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resume.returncode == 0, resume.stderr
    assert stored_trials(db) == 40
