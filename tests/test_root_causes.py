"""Root causes stored with the trials: written when a run ends, computed again from the
rows when they are missing, and, on every bundled scenario, equal to where the
injected faults fired (the agents' local traces say where; faults that never fired,
or were retried away, are no origins)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from errorflow.bus.transport import InProcessBus
from errorflow.runtime.runner import RunOptions, run_plan
from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import load
from errorflow.scenario.run_plan import RunPlan
from errorflow.scoring.genealogy_types import Genealogy
from errorflow.scoring.root_cause import RootCause
from errorflow.store import root_causes
from errorflow.store.opening import connect_ro
from errorflow.store.trial_store import read_range, run_meta, trace_of
from tests.trace_runs import LocalTraces, run_stored

#: Trials per arm: enough for each scenario's faults to fire (the outage starts at
#: 60 s of run time, a trial arriving every 2 s).
TRIALS = {"outage": 45}
DEFAULT_TRIALS = 40


def test_a_finished_run_stores_one_root_cause_per_failed_trial(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    result, _ = run_stored("contamination", db, trials=12, propagation="implicit")
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT trial, kind, agent, tool, step, call_id, code, depth, dropped"
            " FROM root_causes WHERE run_id = ? ORDER BY trial",
            (result.run_id,),
        ).fetchall()
    failed = [s.trial for s in result.scores if s.outcome.value in ("contained", "contaminated")]
    assert [r[0] for r in rows] == failed and len(rows) == 12
    _, kind, agent, tool, step, call_id, code, depth, dropped = rows[0]
    assert (kind, agent, tool, step, call_id) == (
        "tool",
        "researcher",
        "search_papers",
        1,
        "papers#0",
    )
    assert code in ("permission_denied", "invalid_args") and depth == 2
    assert dropped == "researcher:swallowed,writer:silent"


def test_missing_root_causes_are_computed_from_the_rows(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    result, _ = run_stored("partial-success", db, trials=10, propagation="explicit")
    stored = root_causes.load(db, result.run_id)
    with sqlite3.connect(db) as conn:  # as a killed run, or an older store, leaves it
        conn.execute("DROP TABLE root_causes")
    assert root_causes.load(db, result.run_id) == stored
    assert stored  # partial-success fails most trials


def _calls(db: Path, run_id: str) -> dict[tuple[int, str], list[list[dict[str, Any]]]]:
    """Each (trial, agent)'s tool-call events, one list per invocation, in order."""
    out: dict[tuple[int, str], list[list[dict[str, Any]]]] = defaultdict(list)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT trial, sender, envelope FROM events WHERE run_id = ? ORDER BY sender, seq",
            (run_id,),
        ).fetchall()
    for trial, sender, text in rows:
        payload = json.loads(text)["payload"]
        if payload["type"] == "agent_start":
            out[(trial, sender)].append([])
        elif payload["type"] == "tool_call" and out[(trial, sender)]:
            out[(trial, sender)][-1].append(payload)
    return out


def _need(call_id: str) -> str:
    return call_id.rsplit("#", 1)[0]


def _live(entries: list[Any], calls: list[dict[str, Any]]) -> list[Any]:
    """The local-trace entries whose call failed for good: its event is no clean
    success, and no later clean call of the tool did the same need."""
    clean = [(i, c) for i, c in enumerate(calls) if c["ok"] and c["code"] is None]
    index = {c["call_id"]: i for i, c in enumerate(calls)}
    live = []
    for e in entries:
        i = index.get(e.call_id)
        if i is None or any(c["call_id"] == e.call_id for _, c in clean):
            continue  # retried until it answered
        redone = any(
            j > i and c["tool"] == e.tool and _need(c["call_id"]) == _need(e.call_id)
            for j, c in clean
        )
        if not redone:
            live.append(e)
    return live


def _ancestors(g: Genealogy, index: int) -> set[int]:
    """The invocations whose messages `index` worked from, transitively."""
    nodes = g.by_id()
    out, todo = set(), list(g.invocations[index].inputs)
    while todo:
        node = nodes.get(todo.pop())
        if node is not None and node.invocation is not None:
            out.add(node.invocation)
            todo.extend(g.invocations[node.invocation].inputs)
    return out


def _check_run(db: Path, run_id: str, local: LocalTraces) -> int:
    """Assert every failed trial's origins are where its faults fired; the number of
    failed trials checked."""
    causes = root_causes.load(db, run_id)
    calls = _calls(db, run_id)
    with connect_ro(db) as conn:
        meta = run_meta(conn, run_id)
        rows = read_range(conn, run_id, 0, 10**6)
    assert meta is not None
    for trial, cause in causes.items():
        g = trace_of(meta, rows[trial]).genealogy
        assert trace_of(meta, rows[trial]).root_cause == cause  # stored = computed
        nodes = g.by_id()
        seen: dict[str, int] = defaultdict(int)
        fired: dict[int, Any] = {}
        for inv in g.invocations:
            k = seen[inv.agent]
            seen[inv.agent] += 1
            entries = (local.get((inv.agent, trial)) or [[]] * (k + 1))[k]
            invocation_calls = (calls.get((trial, inv.agent)) or [[]] * (k + 1))[k]
            live = _live(entries, invocation_calls)
            if live:
                own = nodes[inv.outputs[0]].own_failures
                fired[inv.index] = ([e for e in live if own and e.code == own[0]] or live)[0]

        expected = {
            (g.invocations[i].agent, e.tool, e.call_id)
            for i, e in fired.items()
            if not _ancestors(g, i) & set(fired)
        }
        got = {o.position for o in cause.origins if o.kind == "tool"}
        assert got == expected, f"{run_id} trial {trial}: {cause.origins}"
        assert cause.origins, f"{run_id} trial {trial} failed with no origin"
        for o in cause.origins:
            if o.kind == "policy":  # refused by the policy: no fault fired for that call
                ran = local.get((o.agent, trial)) or []
                assert not any(e.call_id == o.call_id for inv in ran for e in inv)
    return len(causes)


@pytest.mark.slow
def test_origins_are_where_the_faults_fired_on_every_bundled_scenario(tmp_path: Path) -> None:
    db = tmp_path / "all.db"
    checked: dict[str, int] = {}
    for name, path in bundled().items():
        trials = TRIALS.get(name, min(DEFAULT_TRIALS, load(path).trials))
        for propagation in ("explicit", "implicit"):
            result, local = run_stored(name, db, trials=trials, propagation=propagation)
            checked[f"{name}/{propagation}"] = _check_run(db, result.run_id, local)
    assert len(bundled()) >= 9
    assert sum(checked.values()) >= 300, checked
    # every scenario that injects faults had failed trials to check
    assert sum(1 for n in checked.values() if n) >= 2 * (len(bundled()) - 1), checked


FAN_IN = """\
name: fan-in
seed: 11
trials: 3
world:
  metrics: {rev.q3: 1000}
  tables:
    stores: {rows: [{id: S-2, staff: 7}]}
tools:
  kpi: {kind: metric_store}
  store_db: {kind: lookup, table: stores, args: {id: {}, field: {}}, select: field}
agents:
  sales: {role: researcher, tools: [kpi], sends_to: [analyst]}
  ops: {role: researcher, tools: [store_db], sends_to: [analyst]}
  analyst: {role: analyst, behaviour: gather, sends_to: [writer], wait_s: 60}
  writer: {role: writer}
task:
  prompt: Q3 revenue and staff at S-2.
  needs:
    - {id: revenue, tool: kpi, wording: Q3 revenue, value: rev.q3}
    - {id: staff, tool: store_db, wording: staff at S-2, args: {id: S-2, field: staff}}
"""


def _causes(tmp_path: Path, text: str) -> dict[int, RootCause]:
    """The root causes of the scenario `text`, run explicit in one process."""
    path, db = tmp_path / "f.yaml", tmp_path / "f.db"
    path.write_text(text)
    plan = RunPlan.of(load(path), propagation="explicit")
    result = asyncio.run(run_plan(plan, RunOptions(bus=InProcessBus(), db_path=db)))
    return root_causes.load(db, result.run_id)


@pytest.mark.parametrize(
    ("agent", "fault", "origin", "code", "injected"),
    [
        ("ops", "{kind: drop, p: 1}", "ops", "timeout", "drop"),
        ("ops", "{kind: hang, p: 1}", "ops", "timeout", "hang"),
        ("ops", "{kind: slow, p: 1, delay_s: 100}", "ops", "timeout", "slow: 100 s late"),
        ("analyst", "{kind: crash, p: 1}", "analyst", "internal_error", "crash"),
    ],
)
def test_an_injected_agent_fault_is_the_origin_where_it_fired(
    tmp_path: Path, agent: str, fault: str, origin: str, code: str, injected: str
) -> None:
    """An input that never came is its sender's fault, a crash the crashed agent's: not
    a policy decision of the agent that went on without it."""
    causes = _causes(
        tmp_path, FAN_IN.replace(f"  {agent}: {{role", f"  {agent}: {{faults: [{fault}], role")
    )
    assert len(causes) == 3
    for cause in causes.values():
        primary = cause.primary
        assert primary is not None
        assert (primary.kind, primary.agent, primary.code) == ("agent_fault", origin, code)
        assert f"(injected {injected})" in primary.detail


def test_a_dropped_input_beside_a_failed_one_is_an_origin_of_its_own(tmp_path: Path) -> None:
    """sales's tool fails and ops's result is dropped: two independent origins at the
    analyst's inputs; the drop is no consequence of the tool failure."""
    text = FAN_IN.replace("  ops: {role", "  ops: {faults: [{kind: drop, p: 1}], role")
    text = text.replace(
        "kpi: {kind: metric_store}", "kpi: {kind: metric_store, faults: [{kind: not_found}]}"
    )
    for cause in _causes(tmp_path, text).values():
        kinds = {(o.agent, o.kind) for o in cause.origins}
        assert kinds == {("sales", "tool"), ("ops", "agent_fault")}, cause.origins
        assert not cause.secondary


def test_a_fault_on_the_message_is_not_blamed_for_the_agents_own_failure(tmp_path: Path) -> None:
    """A python agent's code raises; a slow fault of 10 ms also fired on its message:
    the origin is the agent's failure, not the fault."""
    (tmp_path / "bad_agent.py").write_text("async def boom(ctx):\n    raise RuntimeError('bug')\n")
    agent = (
        "  analyst: {role: analyst, behaviour: python, function: 'bad_agent:boom', "
        "faults: [{kind: slow, p: 1, delay_s: 0.01}], sends_to: [writer]}\n"
    )
    text = "".join(
        agent if ln.startswith("  analyst:") else ln + "\n" for ln in FAN_IN.splitlines()
    )
    for cause in _causes(tmp_path, text).values():
        primary = cause.primary
        assert primary is not None
        assert (primary.kind, primary.agent, primary.code) == (
            "policy",
            "analyst",
            "internal_error",
        )
