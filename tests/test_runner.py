"""End to end: a researcher → writer run over each transport, recorded, scored."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from errorflow.bus.endpoint import Endpoint
from errorflow.bus.transport import InProcessBus
from errorflow.bus.url import BrokerURL
from errorflow.core.costs import Costs
from errorflow.protocol import topics
from errorflow.protocol.control import RollCall, parse_control
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.protocol.events import LabelEvent, TrialOutcomeEvent, parse_event
from errorflow.runtime import run_driver
from errorflow.runtime.recorder import Recorder
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.scoring.score import TrialScore
from tests.conftest import Mosquitto, free_port, scenario


def normalised(result: RunResult) -> dict[int, list[tuple[Any, ...]]]:
    """Per trial, every task/result message minus ids, seq and wall-clock time."""
    out: dict[int, list[tuple[Any, ...]]] = {}
    for trial, messages in result.messages.items():
        rows = [
            (
                m.sender,
                m.recipient,
                m.kind.value,
                m.status.value,
                m.confidence,
                json.dumps([e.model_dump(mode="json") for e in m.errors], sort_keys=True),
                json.dumps(m.payload, sort_keys=True),
            )
            for m in messages
        ]
        out[trial] = sorted(rows)
    return out


def events_by_trial(db: Path, run_id: str) -> dict[tuple[int, str], list[str]]:
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT trial, sender, envelope FROM events WHERE run_id = ? ORDER BY sender, seq",
        (run_id,),
    ).fetchall()
    out: dict[tuple[int, str], list[str]] = {}
    for trial, sender, text in rows:
        payload = json.loads(text)["payload"]
        payload.pop("message_id", None)  # ids aside
        out.setdefault((trial, sender), []).append(json.dumps(payload, sort_keys=True))
    return out


async def test_run_on_embedded_broker_is_recorded_and_scored(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    s = scenario("contamination", trials=12, propagation="implicit")
    result = await run_scenario(s, RunOptions(broker=embedded, db_path=db))
    assert sum(result.outcomes.values()) == 12
    assert result.outcomes["bus_fault"] == 0
    # implicit propagation of the expired key: the writer's report is contaminated
    assert result.outcomes["contaminated"] == 12
    conn = sqlite3.connect(db)
    kinds = dict(
        conn.execute(
            "SELECT kind, COUNT(*) FROM messages WHERE run_id = ? GROUP BY kind", (result.run_id,)
        ).fetchall()
    )
    assert kinds["task"] == 12 and kinds["result"] == 24
    types = dict(
        conn.execute(
            "SELECT type, COUNT(*) FROM events WHERE run_id = ? GROUP BY type", (result.run_id,)
        ).fetchall()
    )
    assert types["tool_call"] == 12 and types["model_call"] == 24 and types["label"] == 24
    assert types["trial_outcome"] == 12
    status = conn.execute("SELECT status FROM runs WHERE run_id = ?", (result.run_id,)).fetchone()
    assert status == ("finished",)
    assert conn.execute(
        "SELECT COUNT(*) FROM trials WHERE run_id = ?", (result.run_id,)
    ).fetchone() == (12,)


@pytest.mark.mosquitto
async def test_run_on_mosquitto(mosquitto: Mosquitto, tmp_path: Path) -> None:
    s = scenario("contamination", trials=10, propagation="explicit")
    result = await run_scenario(s, RunOptions(broker=mosquitto.url, db_path=tmp_path / "m.db"))
    assert sum(result.outcomes.values()) == 10
    assert result.outcomes["contaminated"] + result.outcomes["contained"] == 10
    assert result.outcomes["contained"] >= 6


async def test_same_seed_same_messages_and_outcomes(embedded: BrokerURL, tmp_path: Path) -> None:
    s = scenario("contamination", trials=15, propagation="explicit")
    first = await run_scenario(s, RunOptions(broker=embedded, db_path=tmp_path / "a.db"))
    second = await run_scenario(s, RunOptions(broker=embedded, db_path=tmp_path / "b.db"))
    assert first.run_id != second.run_id
    assert normalised(first) == normalised(second)
    assert [sc.outcome for sc in first.scores] == [sc.outcome for sc in second.scores]
    ev1 = events_by_trial(tmp_path / "a.db", first.run_id)
    ev2 = events_by_trial(tmp_path / "b.db", second.run_id)
    assert ev1 == ev2 and len(ev1) > 0
    # and a different seed changes something
    other = await run_scenario(
        s.model_copy(update={"seed": s.seed + 1}),
        RunOptions(bus=InProcessBus(), db_path=tmp_path / "c.db"),
    )
    assert normalised(other) != normalised(first)


async def test_in_process_bus_gives_the_same_outcomes_as_mqtt(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    """And the same store: every message and event (the in-process recorder hears all
    the runner does, so the runner does not write its copies again), the same causes."""
    s = scenario("contamination", trials=10)
    mqtt = await run_scenario(s, RunOptions(broker=embedded, db_path=tmp_path / "a.db"))
    local = await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=tmp_path / "b.db"))
    assert normalised(mqtt) == normalised(local)
    assert events_by_trial(tmp_path / "a.db", mqtt.run_id) == events_by_trial(
        tmp_path / "b.db", local.run_id
    )
    stored = [_stored_counts(tmp_path / "a.db", mqtt.run_id)]
    stored.append(_stored_counts(tmp_path / "b.db", local.run_id))
    assert stored[0] == stored[1] and stored[0][2]


def _stored_counts(db: Path, run_id: str) -> list[list[tuple[Any, ...]]]:
    """Tasks and results by trial, acks, and the root causes of a stored run (the
    presence messages differ: a broker's session has a roll call of its own)."""
    conn = sqlite3.connect(db)
    queries = [
        "SELECT trial, kind, COUNT(*) FROM messages WHERE run_id = ? "
        "AND kind IN ('task', 'result') GROUP BY trial, kind",
        """SELECT COUNT(*) FROM messages WHERE run_id = ? AND envelope LIKE '%"action":"ack"%'""",
        "SELECT trial, kind, agent, tool, code, depth FROM root_causes WHERE run_id = ? "
        "ORDER BY trial",
    ]
    return [conn.execute(q, (run_id,)).fetchall() for q in queries]


async def test_what_the_runner_publishes_parses_as_typed_contracts(tmp_path: Path) -> None:
    """Every control message and every event of a run is one of the typed models, and
    the runner's labels and outcomes agree with its scores."""
    db = tmp_path / "t.db"
    s = scenario("contamination", trials=6, propagation="explicit")
    result = await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=db))
    conn = sqlite3.connect(db)
    controls = [
        parse_control(json.loads(text)["payload"])
        for (text,) in conn.execute(
            "SELECT envelope FROM messages WHERE run_id = ? AND kind = 'control'",
            (result.run_id,),
        )
    ]
    assert None not in controls
    kinds = Counter(type(c).__name__ for c in controls)
    assert kinds["Stop"] == 1 and kinds["End"] == 1 and kinds["RollCall"] >= 1
    assert kinds["Hello"] >= len(s.agents) and kinds["Bye"] == len(s.agents)
    roll_call = next(c for c in controls if isinstance(c, RollCall))
    assert roll_call.scenario["name"] == s.name
    events = [
        (trial, parse_event(json.loads(text)["payload"]))
        for trial, text in conn.execute(
            "SELECT trial, envelope FROM events WHERE run_id = ? AND sender = 'runner'",
            (result.run_id,),
        )
    ]
    outcomes = {t: e.outcome for t, e in events if isinstance(e, TrialOutcomeEvent)}
    assert outcomes == {sc.trial: sc.outcome.value for sc in result.scores}
    labels = {e.message_id: e.label for _, e in events if isinstance(e, LabelEvent)}
    assert labels == {lb.message_id: lb.label.value for sc in result.scores for lb in sc.labels}
    stored = dict(
        conn.execute(
            "SELECT trial, costs_json FROM trials WHERE run_id = ?", (result.run_id,)
        ).fetchall()
    )
    assert {t: Costs.from_wire(json.loads(c)) for t, c in stored.items()} == {
        sc.trial: sc.costs for sc in result.scores
    }


async def test_a_broker_that_is_down_fails_before_the_run_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "down.db"
    down = BrokerURL("127.0.0.1", free_port())  # nothing listens there
    with pytest.raises(ConnectionError, match="cannot connect to MQTT broker"):
        await run_scenario(scenario("contamination", trials=2), RunOptions(broker=down, db_path=db))
    assert not db.exists()  # no run row, so no `interrupted` run either


async def test_no_trial_starts_while_the_recorder_is_far_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Back-pressure from the store: with the recorder more than RECORDER_LAG_LIMIT
    messages behind, the lanes wait (a 20-trial run is over in a quarter of a second
    otherwise); once it catches up, every trial runs."""
    behind = run_driver.RECORDER_LAG_LIMIT + 1
    monkeypatch.setattr(Recorder, "backlog", lambda self: behind)
    done: list[TrialScore] = []
    options = RunOptions(bus=InProcessBus(), db_path=tmp_path / "r.db", on_trial=done.append)
    run = asyncio.create_task(run_scenario(scenario("contamination", trials=20), options))
    await asyncio.sleep(1.5)
    assert done == [] and not run.done()
    behind = run_driver.RECORDER_LAG_LIMIT
    result = await asyncio.wait_for(run, 30)
    assert len(done) == 20 and len(result.scores) == 20


async def test_a_trial_whose_results_are_filed_before_its_task_is_scored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's send of a task returns (on MQTT: on its PUBACK) only after the
    trial's final result has been filed from the receive loop; filing the task then is
    what completes the trial, which is scored, not timed out as a bus fault."""
    filed: dict[int, asyncio.Event] = {}
    file, send = run_driver.RunDriver._file, Endpoint.send

    def file_and_tell(self: Any, env: Envelope) -> None:
        file(self, env)
        if env.kind is Kind.RESULT and env.recipient == topics.RUNNER:
            filed.setdefault(env.trial, asyncio.Event()).set()

    async def send_acked_late(self: Endpoint, **kw: Any) -> Envelope:
        env = await send(self, **kw)
        if self.name == topics.RUNNER and env.kind is Kind.TASK:
            await asyncio.wait_for(filed.setdefault(env.trial, asyncio.Event()).wait(), 30)
        return env

    monkeypatch.setattr(run_driver.RunDriver, "_file", file_and_tell)
    monkeypatch.setattr(Endpoint, "send", send_acked_late)
    s = scenario("contamination", trials=4, propagation="implicit")
    options = RunOptions(bus=InProcessBus(), db_path=tmp_path / "o.db", trial_timeout_s=3)
    result = await asyncio.wait_for(run_scenario(s, options), 60)
    assert set(result.messages) == set(range(4))
    for messages in result.messages.values():  # the order this test is about
        assert (messages[-1].sender, messages[-1].kind) == (topics.RUNNER, Kind.TASK)
    assert result.outcomes["bus_fault"] == 0
    assert result.outcomes["contaminated"] == 4


async def test_a_lane_cancelled_as_its_trial_completes_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C cancels the lanes; one whose trial's final result is filed in the same
    step of the loop must stop too. (On Python 3.11 `asyncio.wait_for` returned the
    result and dropped the cancel: that lane ran every trial left, and the run never
    ended.) Here trial 2's lane is cancelled as its result is filed."""
    lanes: dict[int, asyncio.Task[Any]] = {}
    trial, resolve = run_driver.RunDriver._trial, run_driver.RunDriver._resolve

    async def noting_lane(self: Any, number: int) -> None:
        lanes[number] = asyncio.current_task()  # type: ignore[assignment]
        await trial(self, number)

    def resolve_and_cancel(self: Any, number: int | None) -> None:
        resolve(self, number)
        if number == 2 and number in lanes:
            lanes[number].cancel()

    monkeypatch.setattr(run_driver.RunDriver, "_trial", noting_lane)
    monkeypatch.setattr(run_driver.RunDriver, "_resolve", resolve_and_cancel)
    done: list[TrialScore] = []
    s = scenario("contamination", trials=200, max_in_flight=1)
    options = RunOptions(bus=InProcessBus(), db_path=tmp_path / "c.db", on_trial=done.append)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run_scenario(s, options), 60)
    assert len(done) == 2  # trials 0 and 1; trial 2's lane stopped before scoring it


@pytest.mark.parametrize("name", ["contamination", "support-pipeline"])
async def test_a_trial_leaves_no_reference_cycle_behind(name: str, tmp_path: Path) -> None:
    """What a trial makes is freed by reference counting as it ends: a cycle (a closure
    that calls itself, a raised error its frame still holds) would keep the trial's
    envelopes until the garbage collector ran, and make it run longer."""
    import gc

    async def unreachable_after(trials: int, db: str) -> int:
        gc.collect()
        gc.disable()
        try:
            s = scenario(name, trials=trials)
            await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=tmp_path / db))
            return gc.collect()  # what only a collection could free
        finally:
            gc.enable()

    await unreachable_after(2, "warm.db")  # what a first run builds once (schemas, caches)
    few, many = await unreachable_after(10, "few.db"), await unreachable_after(40, "many.db")
    assert many - few < 30 * 2, (few, many)  # < 2 objects a trial (before: ~185)


def test_a_run_says_once_that_a_true_answer_is_empty(tmp_path: Path) -> None:
    """What `validate` warns of, a run says too: once, though both arms register."""
    from tests.test_references import CHAIN

    path = tmp_path / "e.yaml"
    path.write_text(CHAIN.replace("- {id: KB-1, product: router}", "- {id: KB-1, product: modem}"))
    command = [sys.executable, "-m", "errorflow", "run", str(path), "--trials", "2"]
    command += ["--propagation", "both", "--db", str(tmp_path / "e.db")]
    for workers in ("1", "2"):  # a worker's shard leaves it to its parent
        command[-1] = str(tmp_path / f"e{workers}.db")
        done = subprocess.run(
            [*command, "--workers", workers], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        said = " ".join(done.stderr.split())
        assert said.count("need 'kb': its true answer is empty ([])") == 1, said
