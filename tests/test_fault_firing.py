"""Which injected faults fired in each trial, and which trials a configured fault never
touched (a fault that did not fire is not evidence)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from errorflow import api
from errorflow.protocol.events import (
    AgentCrashed,
    ModelCall,
    ModelFaultFired,
    ToolCallEvent,
)
from errorflow.scenario.overrides import apply
from errorflow.scoring.fault_firing import (
    ConfiguredFault,
    configured_faults,
    fired_faults,
    trial_firing,
    unfired_trials,
)
from tests.conftest import scenario

OVERLOAD = "agents.writer.model.faults[0]"
CRASH = "agents.researcher.faults[0]"


def fired(path: str = OVERLOAD) -> ModelFaultFired:
    return ModelFaultFired(agent="writer", fault=path, kind="overloaded", call=0, attempt=1)


def test_the_configured_faults_are_tool_and_model_faults_and_the_announced_agent_faults() -> None:
    s = apply(
        scenario("contamination"),
        {
            "agents.writer.model.faults": [{"kind": "overloaded", "p": 0.1}, {"kind": "timeout"}],
            "agents.researcher.faults": [{"kind": "crash", "trial": 3}],
        },
    )
    assert configured_faults(s) == [
        ConfiguredFault("tools.search_papers.faults[0]", "permission"),
        ConfiguredFault(CRASH, "crash", trial=3),
        ConfiguredFault(OVERLOAD, "overloaded"),
        ConfiguredFault("agents.writer.model.faults[1]", "timeout"),
    ]
    assert configured_faults(s, agent_kinds=()) == [
        f for f in configured_faults(s) if f.path != CRASH
    ]


def test_fired_faults_are_counted_from_typed_events_and_stored_payloads() -> None:
    crash = AgentCrashed(agent="researcher", fault=CRASH, call=0)
    events = [fired(), fired(), crash.to_payload(), ModelCall(
        agent="writer", input_tokens=1, output_tokens=1, calls=0, final=True
    )]  # fmt: skip
    assert fired_faults(events) == {OVERLOAD: 2, CRASH: 1}


def test_trials_where_a_configured_fault_never_fired_are_named() -> None:
    faults = [ConfiguredFault(OVERLOAD, "overloaded"), ConfiguredFault(CRASH, "crash", trial=1)]
    assert trial_firing(faults, 0, [fired()]).never == ()  # the crash cannot fire in trial 0
    assert trial_firing(faults, 1, [fired()]).never == (CRASH,)
    by_trial: dict[int, list[object]] = {0: [fired()], 1: [], 2: [fired(), fired()]}
    assert unfired_trials(faults, by_trial) == {OVERLOAD: [1], CRASH: [1]}


STALE = "tools.kpi.faults[1]"


def tool_call(*faults: str) -> ToolCallEvent:
    return ToolCallEvent(
        agent="a", tool="kpi", call_id="x#0", args={}, ok=True, attempts=1, faults=list(faults)
    )


def test_tool_faults_are_counted_from_the_tool_call_that_they_struck() -> None:
    events = [tool_call(STALE), tool_call().to_payload(), tool_call("tools.kpi.faults[0]", STALE)]
    assert fired_faults(events) == {STALE: 2, "tools.kpi.faults[0]": 1}
    assert fired_faults([tool_call(STALE).to_payload()]) == {STALE: 1}
    assert "faults" not in tool_call().to_payload()  # most calls: the wire as it was


SILENT = {
    "name": "silent",
    "seed": 6,
    "trials": 200,
    "world": {"metrics": {"m.a": 10, "m.b": 20, "m.c": 30}},
    "tools": {"kpi": {"kind": "metric_store", "faults": []}},
    "agents": {
        "a": {"role": "researcher", "tools": ["kpi"], "sends_to": ["b"]},
        "b": {"role": "writer"},
    },
    "task": {
        "prompt": "a",
        "needs": [{"id": "a", "tool": "kpi", "arg": "name", "wording": "a", "value": "m.a"}],
    },
}


def _silent_run(*faults: dict[str, object], propagation: str = "explicit") -> api.Result:
    data = {**SILENT, "propagation": propagation}
    data["tools"] = {"kpi": {"kind": "metric_store", "faults": list(faults)}}
    return api.run(api.load_scenario(data))


@pytest.mark.parametrize("kind", ["stale", "wrong_entity", "corrupt"])
def test_each_silent_kind_is_reported_fired_or_never_at_its_rate(kind: str) -> None:
    res = _silent_run({"kind": "transient", "first_n": 0}, {"kind": kind, "p": 0.3})
    counts = res.raw.summary["tool_faults"]
    never_fires, silent = counts["tools.kpi.faults[0]"], counts[STALE]
    assert never_fires == {"fired": 0, "never": 200, "times": 0, "kind": "transient"}
    assert silent["kind"] == kind and silent["fired"] + silent["never"] == 200
    assert silent["times"] == silent["fired"]  # one call a trial
    assert abs(silent["fired"] - 60) <= 3 * (200 * 0.3 * 0.7) ** 0.5
    assert res.raw.to_json()["tool_faults"] == counts
    line = " ".join(res.report().split())  # the run's "faults fired" line, unwrapped
    assert "tool faults: tools.kpi.faults[0] transient fired in 0 of 200 trials (0 calls)," in line
    assert f"{STALE} {kind} fired in {silent['fired']} of 200 trials" in line


def test_a_silent_fault_contaminates_whatever_the_propagation() -> None:
    explicit = _silent_run({"kind": "stale", "p": 0.3})
    implicit = _silent_run({"kind": "stale", "p": 0.3}, propagation="implicit")
    fired = explicit.raw.summary["tool_faults"][STALE.replace("[1]", "[0]")]["fired"]
    for res in (explicit, implicit):
        # the model is never told: every struck trial ends contaminated, none contained
        assert res.outcomes["contaminated"] >= fired - 12 and res.outcomes["contained"] <= 12
    assert abs(explicit.outcomes["contaminated"] - implicit.outcomes["contaminated"]) <= 12


def test_a_bad_args_fault_fires_per_trial_and_is_counted_from_the_scenario() -> None:
    res = _silent_run({"kind": "bad_args", "p": 0.5})
    counts = res.raw.summary["tool_faults"]["tools.kpi.faults[0]"]
    assert counts["kind"] == "bad_args" and counts["fired"] + counts["never"] == 200
    assert abs(counts["fired"] - 100) <= 3 * (200 * 0.25) ** 0.5


def test_faults_of_trials_a_bus_fault_ended_are_not_known_not_never(tmp_path: Path) -> None:
    """The counts travel with the results: a trial whose results were lost is counted
    apart, as its costs and policy decisions are, and every other is counted whole
    (the events stored of those trials say the same)."""
    text = """\
name: lossy
seed: 21
trials: 30
world: {metrics: {rev.q3: 1000}}
tools: {kpi: {kind: metric_store, faults: [{kind: transient, p: 0.4}]}}
agents:
  sales: {role: researcher, tools: [kpi], sends_to: [writer]}
  writer: {role: writer}
bus: {drop: {p: 0.2}, max_resends: 0, ack_timeout_s: 0.05}
task:
  prompt: Q3 revenue.
  needs: [{id: revenue, tool: kpi, wording: Q3 revenue, value: rev.q3}]
"""
    db, path = tmp_path / "l.db", tmp_path / "l.yaml"
    path.write_text(text)
    result = api.run(api.load_scenario(path), db=db)
    summary = result.raw.summary
    lost = summary["outcomes"]["bus_fault"]
    [count] = summary["tool_faults"].values()
    assert 0 < lost < 30 and count.get("unknown") == lost
    assert count["fired"] + count["never"] + lost == 30
    with sqlite3.connect(db) as conn:
        arrived = "SELECT trial FROM trials WHERE outcome != 'bus_fault'"
        events = conn.execute(
            "SELECT count(DISTINCT trial), count(*) FROM events"
            f" WHERE type IN ('retry', 'retries_exhausted') AND trial IN ({arrived})"
        ).fetchone()
    assert (count["fired"], count["times"]) == events
    retries = summary["metrics"]["policy"]["sales"]["retries"]
    with sqlite3.connect(db) as conn:
        [(stored,)] = conn.execute(
            f"SELECT count(*) FROM events WHERE type = 'retry' AND trial IN ({arrived})"
        ).fetchall()
    assert retries == stored
    rows = result.records()
    assert {r["backend_calls"] is None for r in rows if r["outcome"] == "bus_fault"} == {True}
    assert all(r["backend_calls"] is not None for r in rows if r["outcome"] != "bus_fault")
