"""Injected agent crashes (`agents.NAME.faults: [{kind: crash}]`): in-process the trial's
task dies at a seeded model call and the agent reports the crash; as an `errorflow
agent` process the process dies (after announcing it), the runner scores the trials it
held as injected crashes, waits for a replacement and goes on with it, or stops in one
line. Never an infra fault."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from errorflow.bus.transport import InProcessBus
from errorflow.faults.crash import CrashFault, crash_fires
from errorflow.protocol import signing
from errorflow.protocol.events import AgentCrashed, parse_event
from errorflow.runtime.agent_process import CRASH_EXIT, ProcessCrash, serve
from errorflow.runtime.crashes import (
    CRASHED,
    crash_reason,
    crash_score,
    crashed_by_injection,
)
from errorflow.runtime.liveness import Liveness, ParticipantLost
from errorflow.runtime.participants import make_agent
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scenario.overrides import apply
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.store import root_causes
from tests.conftest import Mosquitto, scenario

KEY = signing.new_key()
Tasks = dict[str, asyncio.Task[None]]

# -- the fault and its draw -------------------------------------------------------------


def test_a_crash_is_placed_by_p_or_by_trial() -> None:
    CrashFault(kind="crash", p=0.05)
    CrashFault(kind="crash", trial=3, call=1)
    CrashFault(kind="crash", trial=3, p=0.5)
    for bad in ({}, {"call": 1}, {"call": 1, "p": 0.1}, {"trial": 1, "call": 0, "p": 0.1}):
        with pytest.raises(ValidationError):
            CrashFault.model_validate({"kind": "crash", **bad})


def test_a_crash_fires_at_its_rate_per_model_call() -> None:
    p, n = 0.05, 6000
    fault = CrashFault(kind="crash", p=p)
    hits = sum(
        crash_fires(fault, seed=9, trial=t, owner="writer", index=0, call=c)
        for t in range(1500)
        for c in range(4)
    )
    assert abs(hits - n * p) <= 3 * math.sqrt(n * p * (1 - p)), hits


def test_a_placed_crash_fires_once_where_it_is_placed() -> None:
    fault = CrashFault(kind="crash", trial=4, call=1)
    where = [
        (t, c)
        for t in range(10)
        for c in range(5)
        if crash_fires(fault, seed=0, trial=t, owner="w", index=0, call=c)
    ]
    assert where == [(4, 1)]


# -- in-process ------------------------------------------------------------------------------


def clean(trials: int, **update: object) -> Scenario:
    """The contamination scenario without its tool fault: every trial succeeds."""
    return apply(
        scenario("contamination", trials=trials, **update), {"tools.search_papers.faults": []}
    )


def crashing(s: Scenario, agent: str, **fault: object) -> Scenario:
    return apply(s, {f"agents.{agent}.faults": [{"kind": "crash", **fault}]})


def stored(db: Path, run_id: str) -> tuple[list[Any], list[tuple[int, str, str]]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT envelope FROM events WHERE run_id = ?", (run_id,)).fetchall()
        trials = conn.execute(
            "SELECT trial, outcome, reason FROM trials WHERE run_id = ? ORDER BY trial", (run_id,)
        ).fetchall()
    events = []
    for (raw,) in rows:
        env = json.loads(raw)
        event = parse_event(env["payload"])
        if isinstance(event, AgentCrashed):
            events.append((env["trial"], event))
    return events, trials


async def run_in_process(s: Scenario, db: Path) -> RunResult:
    return await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=db))


@pytest.mark.parametrize("agent", ["researcher", "writer"])
@pytest.mark.parametrize("propagation", ["explicit", "implicit"])
async def test_an_in_process_crash_ends_its_trial_as_an_injected_failure(
    tmp_path: Path, agent: str, propagation: str
) -> None:
    s = clean(6, propagation=propagation)
    base = await run_in_process(s, tmp_path / "a.db")
    hit = await run_in_process(crashing(s, agent, trial=2), tmp_path / "b.db")
    assert hit.infra_faults == 0 and hit.outcomes["bus_fault"] == 0
    struck = hit.scores[2]
    # The crashed agent's result says it crashed (unresolved needs): contained, both ways.
    assert struck.outcome is Outcome.CONTAINED
    assert [sc.outcome for sc in hit.scores if sc.trial != 2] == [
        sc.outcome for sc in base.scores if sc.trial != 2
    ]
    crashed = [m for m in hit.messages[2] if m.sender == agent and m.kind.value == "result"]
    assert [m.payload["stopped"] for m in crashed] == ["crashed"]
    assert crashed[0].payload["trace"]["failures"] == ["internal_error"]
    events, _ = stored(tmp_path / "b.db", hit.run_id)
    assert [(t, e.agent, e.fault, e.call, e.process) for t, e in events] == [
        (2, agent, f"agents.{agent}.faults[0]", 0, False)
    ]


async def test_a_crash_with_p_strikes_the_trials_its_draws_say(tmp_path: Path) -> None:
    """The writer makes one model call per trial: it crashes where call 0's draw hits."""
    s = crashing(clean(40), "writer", p=0.2)
    result = await run_in_process(s, tmp_path / "p.db")
    fault = s.agents["writer"].faults[0]
    assert isinstance(fault, CrashFault)
    expected = [
        t
        for t in range(40)
        if crash_fires(fault, seed=s.seed, trial=t, owner="writer", index=0, call=0)
    ]
    events, _ = stored(tmp_path / "p.db", result.run_id)
    assert sorted(t for t, _ in events) == expected and 2 < len(expected) < 16
    assert [sc.trial for sc in result.scores if sc.outcome is not Outcome.SUCCESS] == expected
    assert result.infra_faults == 0


# -- as a process (emulated on an in-process bus: the process's exit is the task's end) -----


def slow(trials: int = 12) -> Scenario:
    """Trials that take real time (tool latency), a few at once."""
    s = clean(trials, time_scale=1.0, max_in_flight=3)
    return apply(s, {"tools.search_papers.latency_s": 0.1})


def start_agent(bus: InProcessBus, s: Scenario, run_id: str, name: str, tasks: Tasks) -> None:
    """An agent as `errorflow agent` runs one; an injected crash ends its task abruptly
    (no bye: it says `gone` as its will would), as `os._exit` ends the process."""

    async def run() -> None:
        conn = await bus.connect(f"{run_id}-{name}")
        agent = make_agent(RunPlan(s), name, run_id, conn, run_key=KEY)
        me = asyncio.current_task()
        assert me is not None
        agent.backends.on_crash = ProcessCrash(agent, exit=lambda code: me.cancel())
        await serve(agent, heartbeat_s=0.2)

    tasks[name] = asyncio.create_task(run())


def options(db: Path, run_id: str, bus: InProcessBus, **more: Any) -> RunOptions:
    return RunOptions(bus=bus, db_path=db, run_id=run_id, external_agents=True, run_key=KEY, **more)


async def test_a_crashed_process_is_replaced_and_the_run_goes_on(tmp_path: Path) -> None:
    s, bus, tasks = crashing(slow(), "writer", trial=4), InProcessBus(), Tasks()
    for name in s.agents:
        start_agent(bus, s, "back", name, tasks)
    run = asyncio.create_task(run_scenario(s, options(tmp_path / "r.db", "back", bus, grace_s=30)))
    died, _ = await asyncio.wait({tasks["writer"]}, timeout=30)
    assert died and tasks["writer"].cancelled()  # the process's end
    start_agent(bus, s, "back", "writer", tasks)  # a replacement, same options
    result = await asyncio.wait_for(run, 60)
    base = await run_in_process(slow(), tmp_path / "w.db")
    taken = [sc for sc in result.scores if crashed_by_injection(sc)]
    assert 4 in [sc.trial for sc in taken]
    assert all(sc.outcome is Outcome.CONTAINED for sc in taken)
    assert "agent writer crashed at model call 0 of trial 4" in result.scores[4].reason
    assert result.infra_faults == 0 and result.outcomes["bus_fault"] == 0
    rest = {sc.trial: sc.outcome for sc in result.scores if not crashed_by_injection(sc)}
    assert rest == {t: sc.outcome for t, sc in enumerate(base.scores) if t in rest}
    assert len(rest) + len(taken) == s.trials
    events, trials = stored(tmp_path / "r.db", "back")
    assert [(t, e.process) for t, e in events] == [(4, True)]
    assert [r for r in trials if r[2].startswith(CRASHED)] == [
        (sc.trial, "contained", sc.reason) for sc in taken
    ]
    fired = result.summary["agent_faults"]["writer.crash"]
    assert (fired["fired"], fired["times"]) == (1, 1)  # in trial 4, as in one process
    causes = root_causes.load(tmp_path / "r.db", "back")
    origin = causes[4].origins[0]  # the process died before it sent anything
    assert (origin.agent, origin.kind, origin.code) == ("writer", "agent_fault", "internal_error")
    for task in tasks.values():
        task.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)


async def test_a_crashed_process_nobody_replaces_stops_the_run_saying_so(tmp_path: Path) -> None:
    s, bus, tasks = crashing(slow(), "writer", trial=4), InProcessBus(), Tasks()
    for name in s.agents:
        start_agent(bus, s, "gone", name, tasks)
    with pytest.raises(ParticipantLost) as lost:
        await asyncio.wait_for(
            run_scenario(s, options(tmp_path / "g.db", "gone", bus, grace_s=1)), 40
        )
    message = str(lost.value)
    assert message.startswith(
        "agent writer is gone (it crashed at model call 0 of trial 4: injected fault "
        "agents.writer.faults[0]) and did not come back within the 1s grace period; run gone "
        "stopped: "
    )
    assert "trials it held scored as injected crashes" in message
    _, trials = stored(tmp_path / "g.db", "gone")
    crashed = [r for r in trials if r[2].startswith(CRASHED)]
    assert (4, "contained") in [(t, o) for t, o, _ in crashed]
    assert all(o == "contained" for _, o, _ in crashed)
    assert all(o != "infra_fault" or r.startswith("lost: ") for _, o, r in trials)
    for task in tasks.values():
        task.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)


# -- a real process on Mosquitto ---------------------------------------------------------------


def spawn(path: Path, name: str, run_id: str, url: str) -> subprocess.Popen[str]:
    env = {**os.environ, signing.KEY_ENV: signing.key_to_text(KEY)}
    where = ["--broker", url, "--run", run_id]
    return subprocess.Popen(
        [sys.executable, "-m", "errorflow", "agent", str(path), "--name", name, *where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_an_agent_process_dies_of_its_crash_and_a_replacement_finishes_the_run(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    s = crashing(slow(10), "writer", trial=3)
    path = tmp_path / "crash.yaml"
    path.write_text(yaml.safe_dump(s.model_dump(mode="json"), sort_keys=False))
    url = f"mqtt://127.0.0.1:{mosquitto.port}"
    run_id = "crash-run-1"
    procs = {n: spawn(path, n, run_id, url) for n in s.agents}
    try:
        run = asyncio.create_task(
            run_scenario(
                s,
                RunOptions(
                    broker=mosquitto.url,
                    db_path=tmp_path / "c.db",
                    run_id=run_id,
                    external_agents=True,
                    run_key=KEY,
                    presence_timeout_s=60,
                    grace_s=60,
                ),
            )
        )
        first = procs["writer"]
        code = await asyncio.to_thread(first.wait, 60)
        stderr = first.stderr.read() if first.stderr else ""
        assert code == CRASH_EXIT, stderr
        assert "injected crash (agents.writer.faults[0]) at model call 0 of trial 3" in stderr
        procs["writer"] = spawn(path, "writer", run_id, url)  # the replacement
        result = await asyncio.wait_for(run, 120)
        for p in procs.values():
            assert await asyncio.to_thread(p.wait, 30) == 0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    assert result.infra_faults == 0 and result.outcomes["bus_fault"] == 0
    assert result.scores[3].outcome is Outcome.CONTAINED and crashed_by_injection(result.scores[3])
    taken = {sc.trial for sc in result.scores if crashed_by_injection(sc)}
    assert all(sc.outcome is Outcome.SUCCESS for sc in result.scores if sc.trial not in taken)
    events, _ = stored(tmp_path / "c.db", run_id)
    assert [(t, e.agent, e.process) for t, e in events] == [(3, "writer", True)]


# -- the rules, pure ---------------------------------------------------------------------------


def test_a_crashed_agent_stays_suspect_until_a_new_session_joins() -> None:
    live = Liveness(grace_s=5)
    live.join("writer", "s1", now=0)
    live.crashed("writer", "it crashed at model call 0 of trial 4", now=1)
    live.alive("writer", "s1", now=1.5)  # a heartbeat sent before it died
    assert live.join("writer", "s1", now=2) is False  # nor does a late hello bring it back
    assert live.gone("writer", "s1", now=2) is False  # its will changes nothing
    assert live.suspects == ["writer"] and "crashed" in live.why("writer")
    _, lost = live.check(now=6.5)
    assert lost is not None and "it crashed at model call 0 of trial 4" in lost.what
    back = Liveness(grace_s=5)
    back.join("writer", "s1", now=0)
    back.crashed("writer", "it crashed", now=1)
    assert back.join("writer", "s2", now=2) is True and back.suspects == []  # a replacement


def test_a_trial_the_crash_took_is_contained_unless_a_final_that_arrived_is_false() -> None:
    event = AgentCrashed(agent="writer", fault="agents.writer.faults[0]", call=1, process=True)
    reason = crash_reason(event, struck=4, trial=5)
    assert reason == (
        "crashed: agent writer crashed at model call 1 of trial 4: injected fault "
        "agents.writer.faults[0]; its process died with this trial in flight"
    )
    waiting = TrialScore(5, Outcome.BUS_FAULT, 0, reason="no final result")
    assert crash_score(waiting, reason).outcome is Outcome.CONTAINED
    false = TrialScore(5, Outcome.CONTAMINATED, 2, reason="false claim(s) stated as certain: x")
    kept = crash_score(false, reason)
    assert (kept.outcome, kept.depth) == (Outcome.CONTAMINATED, 2)
    assert kept.reason.startswith(CRASHED) and kept.reason.endswith("certain: x")
