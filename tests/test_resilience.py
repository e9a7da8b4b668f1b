"""A simulator of failures must not fail itself: bad messages, a broker that dies,
a runner killed with SIGKILL, crashing tools, models and agents."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from errorflow.protocol.envelope import MAX_MESSAGE_BYTES
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.overrides import apply
from errorflow.scoring.score import Outcome
from tests.conftest import Mosquitto, scenario


def slow(name: str = "contamination", trials: int = 30, **update: Any) -> Any:
    """A bundled scenario that takes a few real seconds (time_scale 1, 50 ms tools)."""
    s = scenario(name, trials=trials, time_scale=1.0, max_in_flight=4, **update)
    return apply(s, {f"tools.{t}.latency_s": 0.1 for t in s.tools})


def outcomes_by_trial(result: Any) -> dict[int, str]:
    return {sc.trial: sc.outcome.value for sc in result.scores}


# -- 1,000 bad messages into a live run ---------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


# One example: hypothesis generates the garbage, the live run happens once. Only the
# generate phase: the explain phase traces every line (slow on Python < 3.12).
@settings(
    max_examples=1,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.generate],
    database=None,
)
@given(data=st.data())
@pytest.mark.slow
def test_a_thousand_bad_messages_change_nothing(
    data: st.DataObject, mosquitto: Mosquitto, tmp_path_factory: Any
) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    # Live for several seconds: long enough that the replays, sent only after the 950
    # bad messages and 60 genuine ones went by, arrive while the run still records.
    s = apply(slow(trials=100), {"max_in_flight": 2})
    clean = asyncio.run(run_scenario(s, RunOptions(broker=mosquitto.url, db_path=tmp / "c.db")))

    run_id = "fuzzed-run"
    base = json.loads(clean.messages[0][0].encode())  # a real task envelope as a template
    base["run_id"] = run_id
    garbage: list[tuple[str, bytes]] = []
    expect: Counter[str] = Counter()

    def add(reason: str, payload: bytes, target: str = "inbox/writer") -> None:
        garbage.append((f"errorflow/{run_id}/{target}", payload))
        expect[reason] += 1

    targets = ["inbox/writer", "inbox/researcher", "inbox/runner", "events/x", "control/x"]
    for i, blob in enumerate(
        data.draw(st.lists(st.binary(min_size=1, max_size=200), min_size=200, max_size=200))
    ):
        add("bad_json" if not _is_json(blob) else "bad_shape", blob, targets[i % 5])
    text = json.dumps(base)
    for i in range(300):
        add("bad_json", text[: 1 + (i * 7) % (len(text) - 2)].encode(), targets[i % 5])
    for value in data.draw(st.lists(json_values, min_size=150, max_size=150)):
        raw = json.dumps(value).encode()
        add("bad_shape" if not isinstance(value, dict) else "wrong_version", raw)
    for v in range(100):
        add("wrong_version", json.dumps({**base, "v": v + 2}).encode())
    for _ in range(50):
        add("too_large", json.dumps({**base, "payload": {"x": "a" * MAX_MESSAGE_BYTES}}).encode())
    for i in range(150):
        add(
            "unknown_sender",
            json.dumps({**base, "sender": "mallory", "seq": i, "id": f"m{i}"}).encode(),
            targets[i % 3],
        )
    assert sum(expect.values()) == 950  # + 60 replayed copies of real messages = 1,010

    async def fuzzed() -> Any:
        replays: list[tuple[str, bytes]] = []

        async def capture_and_inject() -> None:
            async with aiomqtt.Client(
                mosquitto.url.host, mosquitto.url.port, protocol=aiomqtt.ProtocolVersion.V311
            ) as client:
                await client.subscribe(f"errorflow/{run_id}/inbox/#", qos=1)
                await client.subscribe(f"errorflow/{run_id}/control/runner", qos=1)
                async for message in client.messages:  # the run is live: its roll call
                    if "control" in str(message.topic):
                        break
                for i in range(0, len(garbage), 50):
                    await asyncio.gather(
                        *(client.publish(t, p, qos=1) for t, p in garbage[i : i + 50])
                    )
                async for message in client.messages:  # replay 150 real messages later
                    if not _genuine(bytes(message.payload)):  # type: ignore[arg-type]
                        continue  # our own garbage comes back too
                    replays.append((str(message.topic), bytes(message.payload)))  # type: ignore[arg-type]
                    if len(replays) == 60:
                        break
                for topic, payload in replays:
                    await client.publish(topic, payload, qos=1)

        injector = asyncio.create_task(capture_and_inject())
        result = await run_scenario(
            s, RunOptions(broker=mosquitto.url, db_path=tmp / "f.db", run_id=run_id)
        )
        await asyncio.wait_for(injector, 30)
        return result

    result = asyncio.run(fuzzed())
    assert outcomes_by_trial(result) == outcomes_by_trial(clean)
    assert result.outcomes["bus_fault"] == 0
    conn = sqlite3.connect(tmp / "f.db")
    stored = Counter(
        dict(
            conn.execute(
                "SELECT reason, COUNT(*) FROM rejects WHERE run_id = ? GROUP BY reason", (run_id,)
            )
        )
    )
    non_dup = {k: v for k, v in stored.items() if k != "duplicate"}
    # every bad message counted and stored once, with its reason
    assert sum(non_dup.values()) == 950, stored
    assert stored["too_large"] == 50 and stored["unknown_sender"] == 150
    assert stored["duplicate"] >= 60  # the replays (plus any resends)
    raw_ok = conn.execute(
        "SELECT COUNT(*) FROM rejects WHERE run_id = ? AND length(raw) > 0", (run_id,)
    ).fetchone()[0]
    assert raw_ok == sum(stored.values())


def _genuine(raw: bytes) -> bool:
    try:
        env = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return False
    return (
        isinstance(env, dict)
        and env.get("v") == 1
        and env.get("sender") in ("runner", "researcher", "writer")
        and len(raw) < MAX_MESSAGE_BYTES
    )


def _is_json(blob: bytes) -> bool:
    try:
        json.loads(blob)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


# -- the broker dies in the middle of a run ---------------------------------------------


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_broker_killed_and_restarted_mid_run(tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path)
    broker.start()
    s = apply(slow(trials=60), {"max_in_flight": 2})
    try:
        clean = await run_scenario(s, RunOptions(broker=broker.url, db_path=tmp_path / "c.db"))

        async def outage() -> None:
            await asyncio.sleep(0.8)
            broker.stop()
            await asyncio.sleep(1.5)
            broker.start()

        chaos = asyncio.create_task(outage())
        result = await run_scenario(
            s, RunOptions(broker=broker.url, db_path=tmp_path / "k.db", trial_timeout_s=40)
        )
        await chaos
    finally:
        broker.stop()
    assert len(result.scores) == 60  # every trial accounted for
    for trial, outcome in outcomes_by_trial(result).items():
        if outcome == Outcome.BUS_FAULT.value:
            assert next(sc for sc in result.scores if sc.trial == trial).reason
        else:
            assert outcome == outcomes_by_trial(clean)[trial]  # never silently wrong
    conn = sqlite3.connect(tmp_path / "k.db")
    assert conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 60
    finals = conn.execute(
        "SELECT COUNT(*) FROM messages WHERE recipient = 'runner' AND kind = 'result'"
    ).fetchone()[0]
    assert finals == 60 - result.outcomes["bus_fault"]


# -- SIGKILL the runner, then --resume ---------------------------------------------------


@pytest.mark.slow
def test_sigkill_then_resume(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    path = tmp_path / "slow.yaml"
    s = slow(trials=40)
    path.write_text(json.dumps(s.model_dump(mode="json", exclude_none=True)))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "errorflow",
            "run",
            str(path),
            "--db",
            str(db),
            "--run-id",
            "killed-run",
            "-q",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    done = 0
    while time.monotonic() < deadline and done < 8:
        time.sleep(0.2)
        if db.exists():
            try:
                with sqlite3.connect(db) as c:
                    done = c.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
            except sqlite3.OperationalError:
                pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert 8 <= done < 40, done

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    events = conn.execute("SELECT envelope FROM events").fetchall()
    assert events and all(json.loads(e)["run_id"] == "killed-run" for (e,) in events)
    conn.close()
    runs = subprocess.run(
        [sys.executable, "-m", "errorflow", "runs", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(runs.stdout)[0]["status"] == "interrupted"

    # The scenario holds a (fake) key, so the store has it redacted: resuming asks for
    # the original file and checks that it is the same experiment (alone, `--resume`
    # tries the bundled scenario of the stored name, which is not this experiment).
    cli = [sys.executable, "-m", "errorflow", "run"]
    ask = subprocess.run(
        [*cli, "--resume", "killed-run", "--db", str(db)], capture_output=True, text=True
    )
    assert ask.returncode == 2 and "expected its file" in ask.stderr
    other = subprocess.run(
        [
            *cli,
            str(path),
            "--set",
            "agents.writer.model.profile=frontier",
            "--resume",
            "killed-run",
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
    )
    assert other.returncode == 2 and "not the scenario" in other.stderr
    resume = subprocess.run(
        [*cli, str(path), "--resume", "killed-run", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resume.returncode == 0, resume.stderr
    data = json.loads(resume.stdout)
    assert data["run_id"] == "killed-run" and sum(data["outcomes"].values()) == 40
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(DISTINCT trial) FROM trials").fetchone()[0] == 40
        assert c.execute("SELECT status FROM runs").fetchone() == ("finished",)
    # the resumed trials are the trials an uninterrupted run would have had
    whole = asyncio.run(run_scenario(s, RunOptions(db_path=tmp_path / "w.db")))
    assert data["outcomes"] == whole.to_json()["outcomes"]
    again = subprocess.run(
        [sys.executable, "-m", "errorflow", "run", "--resume", "killed-run", "--db", str(db)],
        capture_output=True,
        text=True,
    )
    assert again.returncode == 2 and "finished" in again.stderr


# -- crashes inside a tool, a model backend and an agent ----------------------------------


async def test_crashes_become_structured_errors(tmp_path: Path, monkeypatch: Any) -> None:
    from errorflow.agents.kit import AgentKit
    from errorflow.bus.transport import InProcessBus
    from errorflow.models.simulated import SimulatedModel
    from errorflow.world.tool_client import ToolClient

    real_invoke = ToolClient.invoke
    real_complete = SimulatedModel.complete
    real_task_turn = AgentKit.task_turn

    def invoke(self: ToolClient, tool: str, *a: Any, **k: Any) -> Any:
        if self.trial == 1:
            raise RuntimeError("tool bug: /srv/secret/path exploded")
        return real_invoke(self, tool, *a, **k)

    async def complete(self: SimulatedModel, request: Any) -> Any:
        if request.agent == "writer" and request.turns[0].prompt.endswith("!"):
            raise ValueError("model backend bug")
        return await real_complete(self, request)

    def task_turn(self: Any, trial: int) -> Any:
        turn = real_task_turn(self, trial)
        if trial == 2:
            raise KeyError("agent bug")
        if trial == 3:
            return type(turn)(turn.prompt + "!", turn.needs)
        return turn

    monkeypatch.setattr(ToolClient, "invoke", invoke)
    monkeypatch.setattr(SimulatedModel, "complete", complete)
    monkeypatch.setattr(AgentKit, "task_turn", task_turn)
    s = scenario("contamination", trials=5, propagation="explicit")
    s = apply(s, {"tools.search_papers.faults": []})
    result = await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=tmp_path / "x.db"))
    by_trial = {sc.trial: sc for sc in result.scores}
    assert len(by_trial) == 5 and result.outcomes["bus_fault"] == 0
    assert by_trial[0].outcome is Outcome.SUCCESS and by_trial[4].outcome is Outcome.SUCCESS
    # a crashed agent reports it (contained); a tool crash is an error like any other,
    # which the writer may still write around (p_heed_upstream)
    assert by_trial[2].outcome is Outcome.CONTAINED and by_trial[3].outcome is Outcome.CONTAINED
    assert by_trial[1].outcome in (Outcome.CONTAINED, Outcome.CONTAMINATED)
    codes = {t: {e.code.value for m in result.messages[t] for e in m.errors} for t in (1, 2, 3)}
    assert "internal_error" in codes[1] and "internal_error" in codes[2]
    assert "internal_error" in codes[3]
    dumped = "\n".join(sqlite3.connect(tmp_path / "x.db").iterdump())
    assert "/srv/secret/path" not in dumped
