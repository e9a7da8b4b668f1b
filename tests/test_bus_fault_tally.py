"""Bus faults in whole runs: every trial is accounted for, either recovered by the
acks and resends (its outcome the fault-free run's, same seed) or a `bus_fault` with
its reason; partitions act in run time; where a configured fault never fired is
reported as such; in process and over Mosquitto."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console

from errorflow.bus.transport import InProcessBus
from errorflow.faults.bus import BusFaultSpec
from errorflow.faults.tally import fault_counts
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.reports.tables import print_run
from errorflow.runtime.bus_fault_tally import BusFaultTally
from errorflow.runtime.runner import RunOptions, RunResult, run_scenario
from errorflow.runtime.trial_tracker import TrialTracker
from errorflow.scenario.overrides import apply
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Outcome
from errorflow.scoring.summary import bus_fault_line
from tests.conftest import Mosquitto, scenario
from tests.test_bus_faults import within_3_sigma

EDGE = r"(runner|researcher|writer)→(runner|researcher|writer)"


async def _run(s: Scenario, db: Path, **options: object) -> RunResult:
    if "broker" not in options:
        options["bus"] = InProcessBus()
    return await run_scenario(s, RunOptions(db_path=db, keep_messages=False, **options))  # type: ignore[arg-type]


def _with_bus(s: Scenario, bus: dict[str, object]) -> Scenario:
    return apply(s, {"bus": bus})


def _accounted(base: RunResult, faulty: RunResult, reason: str) -> Counter[str]:
    """Each trial: the fault-free outcome (recovered) or a bus fault whose reason matches."""
    tally: Counter[str] = Counter()
    assert [s.trial for s in faulty.scores] == [s.trial for s in base.scores]
    for clean, hit in zip(base.scores, faulty.scores, strict=True):
        if hit.outcome is Outcome.BUS_FAULT:
            assert re.fullmatch(reason, hit.reason), hit.reason
            tally["bus_fault"] += 1
        else:
            assert (hit.outcome, hit.depth, hit.reason) == (
                clean.outcome,
                clean.depth,
                clean.reason,
            )
            assert hit.costs == clean.costs
            tally["recovered" if hit.trial in faulty.bus_faults else "untouched"] += 1
    return tally


async def test_200_trials_with_5_percent_drop_and_duplication_are_all_accounted_for(
    tmp_path: Path,
) -> None:
    base_s = scenario("contamination", trials=200)
    base = await _run(base_s, tmp_path / "base.db")
    faults = {"drop": {"p": 0.05}, "duplicate": {"p": 0.05}, "ack_timeout_s": 0.2}
    run = await _run(_with_bus(base_s, faults), tmp_path / "bus.db")
    tally = _accounted(base, run, "(?!)")  # 6 resends: nothing is lost for good
    assert tally["recovered"] >= 40 and tally["bus_fault"] == 0
    counts = run.summary["bus_faults"]
    fired = Counter(k for f in run.bus_faults.values() for k in f)
    assert {k: c["fired"] for k, c in counts.items()} == {
        "drop": fired["drop"],
        "duplicate": fired["duplicate"],
    }
    for c in counts.values():
        assert c["fired"] > 0 and c["never"] > 0 and c["fired"] + c["never"] == 200
    # 3 messages a trial, and a resend for each drop: every send drawn at 5 %, within 3σ
    sends = 600 + counts["drop"]["times"]
    for kind in ("drop", "duplicate"):
        assert within_3_sigma(counts[kind]["times"], sends, 0.05), counts
    assert run.rejects.get("duplicate", 0) >= counts["duplicate"]["times"]  # dropped by id
    assert run.to_json()["bus_faults"] == counts


async def test_without_resends_each_drop_ends_its_trial_as_a_bus_fault_with_why(
    tmp_path: Path,
) -> None:
    base_s = scenario("contamination", trials=200)
    base = await _run(base_s, tmp_path / "base.db")
    # a second for an ack: a send that was not dropped is acknowledged in time even on a
    # loaded machine (at 0.1 s, a late ack was counted "unacknowledged" under load)
    faults = {"drop": {"p": 0.05}, "duplicate": {"p": 0.05}, "ack_timeout_s": 1.0, "max_resends": 0}
    run = await _run(_with_bus(base_s, faults), tmp_path / "bus.db")
    tally = _accounted(base, run, f"{EDGE}: dropped 1 of 1 sends")
    dropped = {t for t, f in run.bus_faults.items() if f.get("drop")}
    assert tally["bus_fault"] == len(dropped) > 0
    assert {s.trial for s in run.scores if s.outcome is Outcome.BUS_FAULT} == dropped
    assert tally["recovered"] > 0  # duplicates only: dropped by id, outcome unchanged


async def test_a_partition_that_outlasts_the_resends_ends_every_trial(tmp_path: Path) -> None:
    base_s = scenario("contamination", trials=10)
    long = {
        "partitions": [{"between": ["researcher", "writer"], "from_s": 0, "to_s": 1000}],
        "ack_timeout_s": 0.05,
        "max_resends": 3,
    }
    run = await _run(_with_bus(base_s, long), tmp_path / "long.db")
    assert {s.reason for s in run.scores} == {
        "researcher→writer: cut off by a partition 4 of 4 sends"
    }
    assert run.outcomes["bus_fault"] == 10
    assert run.summary["bus_faults"] == {"partition": {"fired": 10, "never": 0, "times": 40}}


async def test_a_short_partition_is_recovered_by_the_resends(tmp_path: Path) -> None:
    base_s = scenario("contamination", trials=10)
    base = await _run(base_s, tmp_path / "base.db")
    # the researcher sends at 0.05 s of trial time: attempts at 0.05, 0.15 cut; 0.35 passes
    short = {
        "partitions": [{"between": ["writer", "researcher"], "from_s": 0, "to_s": 0.2}],
        "ack_timeout_s": 0.1,
    }
    run = await _run(_with_bus(base_s, short), tmp_path / "short.db")
    assert _accounted(base, run, "(?!)") == {"recovered": 10}
    assert run.summary["bus_faults"] == {"partition": {"fired": 10, "never": 0, "times": 20}}


async def test_partitions_act_in_run_time_when_trials_share_a_clock(tmp_path: Path) -> None:
    base_s = apply(
        scenario("contamination", trials=14), {"arrivals": {"process": "uniform", "rate_per_s": 1}}
    )
    base = await _run(base_s, tmp_path / "base.db")
    window = {
        "partitions": [{"between": ["researcher", "writer"], "from_s": 5, "to_s": 10}],
        "ack_timeout_s": 0.1,
        "max_resends": 0,
    }
    run = await _run(_with_bus(base_s, window), tmp_path / "bus.db")
    _accounted(base, run, "researcher→writer: cut off by a partition 1 of 1 sends")
    # trial t arrives at t s and its researcher sends at t + 0.05 s
    assert [s.trial for s in run.scores if s.outcome is Outcome.BUS_FAULT] == [5, 6, 7, 8, 9]


async def test_a_configured_fault_that_never_fired_is_reported_as_such(tmp_path: Path) -> None:
    s = _with_bus(
        scenario("contamination", trials=20),
        {
            "drop": {"p": 0.02},
            "partitions": [{"between": ["runner", "researcher"], "from_s": 100, "to_s": 200}],
            "ack_timeout_s": 0.1,
        },
    )
    run = await _run(s, tmp_path / "bus.db")
    counts = run.summary["bus_faults"]
    assert counts["partition"] == {"fired": 0, "never": 20, "times": 0}
    assert counts["drop"]["fired"] + counts["drop"]["never"] == 20
    console = Console(record=True, width=200)
    print_run(console, run.to_json())
    assert "partition fired in 0 of 20 trials (0 sends), never in 20" in console.export_text()


async def test_a_scenario_without_a_bus_block_runs_as_before(tmp_path: Path) -> None:
    s = scenario("contamination", trials=10)
    run = await _run(s, tmp_path / "a.db")
    again = await _run(apply(s, {"bus": {}}), tmp_path / "b.db")
    assert "bus_faults" not in run.summary and "bus_faults" not in run.to_json()
    assert [(x.outcome, x.reason, x.costs) for x in run.scores] == [
        (x.outcome, x.reason, x.costs) for x in again.scores
    ]
    with sqlite3.connect(tmp_path / "a.db") as db:
        assert db.execute("select count(*) from events where type like 'bus%'").fetchone() == (0,)


async def test_bus_faults_over_mosquitto_are_recovered_and_stored(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    base_s = scenario("contamination", trials=30)
    base = await _run(base_s, tmp_path / "base.db")
    faults = {
        "drop": {"p": 0.1},
        "duplicate": {"p": 0.1},
        "reorder": {"p": 0.1},
        "ack_timeout_s": 0.3,
    }
    db = tmp_path / "mqtt.db"
    run = await _run(_with_bus(base_s, faults), db, broker=mosquitto.url)
    assert run.broker != "in-process"
    tally = _accounted(base, run, "(?!)")
    assert tally["recovered"] > 0
    with sqlite3.connect(db) as conn:
        rows = conn.execute("select envelope from events where type = 'bus_fault'").fetchall()
    stored = Counter(json.loads(r[0])["payload"]["kind"] for r in rows)
    per_trial: Counter[str] = Counter()
    for f in run.bus_faults.values():
        per_trial.update(f)
    assert (
        stored["drop"] >= per_trial["drop"] > 0
        and stored["duplicate"] >= per_trial["duplicate"] > 0
    )


# -- the tally on its own -----------------------------------------------------------------


def _event(trial: int, payload: dict[str, object]) -> Envelope:
    return Envelope(
        run_id="r", trial=trial, seq=1, sender="writer", recipient="observers", kind=Kind.EVENT,
        trace_id="t", payload=payload,
    )  # fmt: skip


def test_the_tally_files_faults_per_open_trial_and_ends_a_trial_that_cannot_finish() -> None:
    tracker = TrialTracker(["writer"])
    plan = BusFaultSpec.model_validate({"drop": {"p": 0.1}}).plan(seed=1, time_scale=0)
    tally = BusFaultTally(plan, tracker)
    fired = {"type": "bus_fault", "sender": "writer", "recipient": "runner", "kind": "drop",
             "message_id": "m", "attempt": 1, "at": 0.0}  # fmt: skip
    gone = {"type": "bus_undelivered", "sender": "writer", "recipient": "runner",
            "message_id": "m", "sends": 1, "reason": "writer→runner: dropped 1 of 1 sends",
            "at": 0.0}  # fmt: skip
    assert tally.file(_event(2, fired)) is None
    assert (
        tally.timeout_reason(2, "no final result") == "no final result (bus faults fired: drop 1)"
    )
    assert tally.file(_event(2, gone)) == 2
    score = tally.score(2)
    assert score is not None and score.outcome is Outcome.BUS_FAULT
    assert score.reason == "writer→runner: dropped 1 of 1 sends"
    tally.finish(2, tracker.close(2))
    tally.finish(3, tracker.close(3))
    assert tally.file(_event(2, gone)) is None  # closed: a late event changes nothing
    assert tally.counts() == {"drop": {"fired": 1, "never": 1, "times": 1}}


def test_counts_and_the_line_say_where_a_kind_never_fired() -> None:
    counts = fault_counts(["drop", "reorder"], {0: {"drop": 2}, 5: {"drop": 1}}, 200)
    assert counts == {
        "drop": {"fired": 2, "never": 198, "times": 3},
        "reorder": {"fired": 0, "never": 200, "times": 0},
    }
    assert bus_fault_line(counts) == (
        "bus faults: drop fired in 2 of 200 trials (3 sends), never in 198; "
        "reorder fired in 0 of 200 trials (0 sends), never in 200"
    )


def test_a_tool_fault_line_counts_calls_and_a_withheld_identifier_tasks() -> None:
    """`bad_args` fires on the task (its identifier withheld), not on a call: a trial
    whose agent never calls the tool still met it, and no call is claimed."""
    counts: dict[str, Any] = {
        "tools.fare.faults[0]": {"fired": 5, "never": 0, "times": 5, "kind": "bad_args"},
        "tools.fare.faults[1]": {"fired": 2, "never": 3, "times": 4, "kind": "transient"},
    }
    assert bus_fault_line(counts, "tool faults", "calls") == (
        "tool faults: tools.fare.faults[0] bad_args fired in 5 of 5 trials (an identifier "
        "withheld from 5 tasks), never in 0; tools.fare.faults[1] transient fired in 2 of "
        "5 trials (4 calls), never in 3"
    )


def test_recovery_counts_the_struck_trials_by_how_they_ended() -> None:
    from errorflow.runtime.bus_fault_tally import bus_recovery
    from errorflow.scoring.score import Outcome, TrialScore

    scores = {
        0: TrialScore(0, Outcome.SUCCESS, 0),
        1: TrialScore(1, Outcome.BUS_FAULT, 0, reason="a→b: dropped 3 of 3 sends"),
        2: TrialScore(2, Outcome.CONTAINED, 0),
        3: TrialScore(3, Outcome.SUCCESS, 0),
    }
    fired = {0: {"drop": 1}, 1: {"drop": 3}, 2: {"duplicate": 1}}
    assert bus_recovery(fired, scores) == {"struck": 3, "recovered": 2, "lost": 1}
