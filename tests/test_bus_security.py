"""Hostile clients on a live run's broker (issue #21): a client we did not write
(`mosquitto_pub`) publishes forged results, a forged stop, forged tasks, deeply nested
JSON on every topic and replays of an earlier run's valid envelopes. Outcomes must equal
the clean run of the same seed, every hostile message must be rejected with its reason,
and every receive loop (agents, runner, recorder, an attached TUI) must keep running."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from errorflow.protocol import signing
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scoring.score import TrialScore
from errorflow.tui.sources import Attach, BusHolder
from errorflow.tui.state import RunModel
from tests.conftest import IN_CI, Mosquitto, scenario
from tests.test_agent_process import KEY, spawn_agent

pytestmark = [pytest.mark.mosquitto, pytest.mark.slow]

TRIALS = 200
DEEP = b"[" * 100_000 + b"]" * 100_000  # ~200 KB: under the 256 KiB limit
TOPICS = ["inbox/researcher", "inbox/writer", "inbox/runner", "control/runner", "events/x"]


def mosquitto_pub() -> str:
    binary = shutil.which("mosquitto_pub")
    if binary is None:
        if IN_CI:
            pytest.fail(
                "CI is set but mosquitto_pub is missing (apt-get install mosquitto-clients)"
            )
        pytest.skip("mosquitto_pub not installed")
    return binary


def publish(broker: Mosquitto, topic: str, payloads: list[bytes]) -> None:
    """Publish with Mosquitto's own client, one message a line (QoS 1, waits for acks)."""
    assert all(b"\n" not in p for p in payloads)
    subprocess.run(
        [mosquitto_pub(), "-h", "127.0.0.1", "-p", str(broker.port), "-q", "1", "-t", topic, "-l"],
        input=b"\n".join(payloads) + b"\n",
        check=True,
        timeout=30,
    )


def by_trial(result: RunResult) -> dict[int, str]:
    return {sc.trial: sc.outcome.value for sc in result.scores}


async def capture(broker: Mosquitto, run_id: str, into: list[tuple[str, bytes]]) -> None:
    async with aiomqtt.Client("127.0.0.1", broker.port, identifier="spy") as client:
        await client.subscribe(f"errorflow/{run_id}/#", qos=1)
        async for msg in client.messages:
            into.append((str(msg.topic), bytes(msg.payload)))  # type: ignore[arg-type]


def forged(template: Envelope, run_id: str, **update: Any) -> Envelope:
    return template.model_copy(update={"run_id": run_id, "sig": None, **update})


def attack(broker: Mosquitto, run_id: str, earlier: list[tuple[str, bytes]]) -> Counter[str]:
    """Every hostile message of the issue, published now; the reasons they must get."""
    expect: Counter[str] = Counter()
    envs = [Envelope.model_validate_json(raw) for _, raw in earlier]
    result = next(e for e in envs if e.kind is Kind.RESULT and e.recipient == "runner")
    task = next(e for e in envs if e.kind is Kind.TASK)
    other_key = signing.new_key()

    def send(topic: str, reason: str, payloads: list[bytes]) -> None:
        publish(broker, f"errorflow/{run_id}/{topic}", payloads)
        expect[reason] += len(payloads)

    # Forged results "from the writer": ok and certain (would turn trials into
    # successes), unsigned and signed with a key that is not the run's.
    ok = [forged(result, run_id, trial=t, seq=10_000 + t, id=f"f{t}") for t in range(90)]
    send("inbox/runner", "unsigned", [e.encode() for e in ok])
    send("inbox/runner", "bad_signature", [e.encode(other_key) for e in ok])
    # Forged stop on the control topic, forged tasks to the researcher.
    stop = forged(task, run_id, kind=Kind.CONTROL, recipient="all", payload={"action": "stop"})
    send("control/runner", "unsigned", [stop.model_copy(update={"id": f"s{i}"}).encode()
                                        for i in range(20)])  # fmt: skip
    tasks = [forged(task, run_id, trial=t, seq=20_000 + t, id=f"t{t}") for t in range(50)]
    send("inbox/researcher", "unsigned", [e.encode() for e in tasks])
    # Nested 100,000 deep on every topic a participant reads.
    for topic in [*TOPICS, "ack/researcher", "ack/runner"]:
        send(topic, "bad_json", [DEEP])
    # Replays of an earlier run's valid envelopes: as they were, and moved to this run.
    replay = [(t, raw) for t, raw in earlier if b'"kind":"result"' in raw][:40]
    for topic, raw in replay:
        tail = topic.split("/", 2)[2]
        send(tail, "wrong_run", [raw])
        moved = raw.replace(json.dumps(envs[0].run_id).encode(), json.dumps(run_id).encode())
        send(tail, "bad_signature", [moved])
    return expect


def when_first_scored(action: Callable[[], None]) -> Callable[[TrialScore], None]:
    fired = False

    def on_trial(_: TrialScore) -> None:
        nonlocal fired
        if not fired:  # blocks the loop while it publishes: every message is in before
            fired = True  # the run goes on, so the recorder sees all of them
            action()

    return on_trial


def test_hostile_clients_change_no_outcome(mosquitto: Mosquitto, tmp_path: Path) -> None:
    s = scenario("contamination", trials=TRIALS)

    async def clean() -> tuple[RunResult, list[tuple[str, bytes]]]:
        seen: list[tuple[str, bytes]] = []
        spy = asyncio.create_task(capture(mosquitto, "clean-run", seen))
        await asyncio.sleep(0.3)
        opts = RunOptions(broker=mosquitto.url, db_path=tmp_path / "c.db", run_id="clean-run")
        result = await run_scenario(s, opts)
        for _ in range(100):  # a fast run (gmqtt) can end before the spy has caught up
            if sum(b'"kind":"result"' in raw for _, raw in seen) >= 40:
                break
            await asyncio.sleep(0.05)
        spy.cancel()
        return result, seen

    baseline, earlier = asyncio.run(clean())
    expect: Counter[str] = Counter()

    def hostile() -> None:
        expect.update(attack(mosquitto, "attacked-run", earlier))

    async def attacked() -> tuple[RunResult, RunModel]:
        key = signing.new_key()
        model = RunModel(run_id="attacked-run", scenario=s)
        holder = BusHolder(mosquitto.url)
        watcher = asyncio.create_task(Attach("attacked-run", holder, s, key=key).run(model.apply))
        await asyncio.sleep(0.3)
        opts = RunOptions(
            broker=mosquitto.url,
            db_path=tmp_path / "a.db",
            run_id="attacked-run",
            run_key=key,
            on_trial=when_first_scored(hostile),
        )
        result = await run_scenario(s, opts)
        await asyncio.wait_for(watcher, 10)  # the attached TUI saw the run to its end
        await holder.close()
        return result, model

    result, model = asyncio.run(attacked())
    assert by_trial(result) == by_trial(baseline)
    assert sum(expect.values()) == 180 + 20 + 50 + 7 + 80
    for reason, n in expect.items():
        assert result.rejects.get(reason, 0) >= n, (reason, result.rejects)
    assert {t: v.outcome.value for t, v in model.trials.items() if v.outcome} == by_trial(baseline)


def test_hostile_messages_do_not_stop_agent_processes(mosquitto: Mosquitto, tmp_path: Path) -> None:
    """The `errorflow agent` receive path: separate processes, the same attack."""
    s = scenario("contamination", trials=20)
    run_id = "hostile-split"
    url = f"mqtt://127.0.0.1:{mosquitto.port}"
    procs = [spawn_agent(name, run_id, url) for name in ("researcher", "writer")]
    task = Envelope(
        run_id=run_id, trial=3, seq=99, sender="runner", recipient="researcher",
        kind=Kind.TASK, trace_id=f"{run_id}-t3", payload={"prompt": "forged", "needs": []},
    )  # fmt: skip
    stop = task.model_copy(update={"kind": Kind.CONTROL, "payload": {"action": "stop"}})

    def hostile() -> None:
        for topic in ("inbox/researcher", "inbox/writer", "control/runner", "ack/writer"):
            publish(mosquitto, f"errorflow/{run_id}/{topic}", [DEEP])
        publish(mosquitto, f"errorflow/{run_id}/control/runner", [stop.encode()])
        publish(mosquitto, f"errorflow/{run_id}/inbox/researcher", [task.encode()])

    try:
        split = asyncio.run(
            run_scenario(
                s,
                RunOptions(
                    broker=mosquitto.url,
                    db_path=tmp_path / "a.db",
                    run_id=run_id,
                    external_agents=True,
                    run_key=KEY,
                    presence_timeout_s=60,
                    on_trial=when_first_scored(hostile),
                ),
            )
        )
        for p in procs:  # only the runner's real stop ends them, cleanly
            assert p.wait(timeout=30) == 0
            err = p.stderr.read().decode()  # type: ignore[union-attr]
            assert "Traceback" not in err and "exception was never retrieved" not in err, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    single = asyncio.run(
        run_scenario(s, RunOptions(broker=mosquitto.url, db_path=tmp_path / "b.db"))
    )
    assert by_trial(split) == by_trial(single)
    assert split.rejects.get("bad_json", 0) >= 4 and split.rejects.get("unsigned", 0) >= 2
