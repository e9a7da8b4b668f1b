"""Every retry, backoff, breaker change and loop stop is an event on the bus and in the
store (issue: the policy layer must be fully observable)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

from errorflow.bus.url import BrokerURL
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.overrides import apply
from tests.conftest import scenario


async def test_policy_decisions_are_events(embedded: BrokerURL, tmp_path: Path) -> None:
    s = apply(
        scenario("strategy-matrix", trials=3),
        {
            "tools.query_metric.faults": [
                {"kind": "transient", "first_n": 2},
                {"kind": "permission", "status": 403, "p": 0.0},
            ],
            "agents.researcher.policy": {
                "strategy": "resilient",
                "breaker": {"failure_threshold": 1, "cooldown_s": 1000},
                "retry": {"max_attempts": 2},
            },
        },
    )
    result = await run_scenario(s, RunOptions(broker=embedded, db_path=tmp_path / "e.db"))
    conn = sqlite3.connect(tmp_path / "e.db")
    events = [
        json.loads(e)["payload"]
        for (e,) in conn.execute(
            "SELECT envelope FROM events WHERE run_id = ? ORDER BY trial, seq", (result.run_id,)
        )
    ]
    kinds = Counter(e["type"] for e in events)
    # per trial: attempt 1 fails, backoff, attempt 2 fails → retries exhausted → breaker
    # opens; the model's repaired call is refused at once (circuit_open)
    assert kinds["retry"] == 3 and kinds["retries_exhausted"] == 3
    retries = [e for e in events if e["type"] == "retry"]
    assert all(0.0 <= e["delay_s"] <= 0.5 for e in retries)  # full jitter, base 0.5 s
    opened = [e for e in events if e["type"] == "breaker" and e["to"] == "open"]
    assert len(opened) == 3 and all(e["reason"] == "failure_threshold" for e in opened)
    assert kinds["tool_call"] == 3


async def test_no_progress_and_repeated_calls_stop_the_loop(
    embedded: BrokerURL, tmp_path: Path
) -> None:
    # A model that retries by itself against a tool that always times out: the
    # identical-call guard blocks the repeat, progress-based stopping ends the loop.
    s = apply(
        scenario("strategy-matrix", trials=2),
        {
            "tools.query_metric.faults": [{"kind": "transient", "p": 1.0}],
            "agents.researcher.model.params": {
                "p_self_retry_transient": 1.0,
                "p_drop_required_arg": 0.0,
            },
            "agents.researcher.policy": {
                "strategy": "resilient",
                "retry": {"max_attempts": 1},
                "breaker": {"enabled": False},
                "guards": {"max_identical_calls": 2, "no_progress_steps": 3},
            },
        },
    )
    result = await run_scenario(s, RunOptions(broker=embedded, db_path=tmp_path / "n.db"))
    conn = sqlite3.connect(tmp_path / "n.db")
    events = [
        json.loads(e)["payload"]
        for (e,) in conn.execute(
            "SELECT envelope FROM events WHERE run_id = ? ORDER BY trial, seq", (result.run_id,)
        )
    ]
    stops = [e["code"] for e in events if e["type"] == "loop_stop"]
    guards = [e["code"] for e in events if e["type"] == "guard"]
    assert stops == ["no_progress", "no_progress"]
    assert guards == ["repeated_call_blocked", "repeated_call_blocked"]


async def test_unrecoverable_stop_is_an_event(embedded: BrokerURL, tmp_path: Path) -> None:
    s = scenario("strategy-matrix", trials=2)
    s = apply(s, {"tools.query_metric.faults": [{"kind": "permission", "status": 403}]})
    result = await run_scenario(s, RunOptions(broker=embedded, db_path=tmp_path / "u.db"))
    conn = sqlite3.connect(tmp_path / "u.db")
    stops = [
        json.loads(e)["payload"]
        for (e,) in conn.execute(
            "SELECT envelope FROM events WHERE run_id = ? AND type = 'loop_stop'", (result.run_id,)
        )
    ]
    assert [st["code"] for st in stops] == ["permission_denied"] * 2
    assert [st["stopped"] for st in stops] == ["unrecoverable:permission_denied"] * 2
