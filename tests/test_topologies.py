"""Topologies and the reviewer's send-back; partial success through the whole stack."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from errorflow.bus.transport import InProcessBus
from errorflow.runtime.experiment import propagation_arms, run_arms, sweep_arms
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scoring.score import Outcome
from tests.conftest import scenario


async def test_topologies_contain_contamination_differently(tmp_path: Path) -> None:
    s = scenario("topologies", trials=40)
    assert s.sweep is not None
    result = await run_arms(
        sweep_arms(s, [(a.name, a.values) for a in s.sweep.axes]),
        RunOptions(bus=InProcessBus(), db_path=tmp_path / "t.db"),
        baseline=False,
    )
    out = {a.label: a.result for a in result.arms}
    for topology in ("chain", "fan-in", "hierarchy"):
        explicit = out[f"{topology}/explicit"].outcomes["contaminated"]
        implicit = out[f"{topology}/implicit"].outcomes["contaminated"]
        assert explicit < implicit, topology
    # the reviewer catches part of what implicit propagation lets through
    assert (
        out["hierarchy/implicit"].outcomes["contaminated"]
        < out["chain/implicit"].outcomes["contaminated"]
    )
    # contamination travels further along the longer chain
    assert out["chain/implicit"].summary["metrics"]["max_depth"] >= 3


async def test_reviewer_sends_contradicted_claims_back_once(tmp_path: Path) -> None:
    s = scenario("topologies", trials=30, propagation="implicit")
    assert s.sweep is not None
    hierarchy = s.sweep.axes[0].values["hierarchy"]
    from errorflow.scenario.overrides import apply

    s = apply(s, hierarchy)
    result = await run_scenario(s, RunOptions(bus=InProcessBus(), db_path=tmp_path / "h.db"))
    sent_back = [
        m
        for ms in result.messages.values()
        for m in ms
        if m.kind.value == "task" and m.sender == "reviewer"
    ]
    assert sent_back, "no revision request in 30 trials"
    for req in sent_back:
        assert req.recipient == "writer" and req.payload["round"] == 1
        assert req.payload["answer"]["revise"]
        trial = result.messages[req.trial]
        revised = [m for m in trial if m.sender == "writer" and m.payload.get("round") == 1]
        assert len(revised) == 1 and req.id in revised[0].derived_from
        finals = [m for m in trial if m.recipient == "runner"]
        assert len(finals) == 1 and finals[0].payload["round"] == 1
    # no trial ended without its final message
    assert result.outcomes["bus_fault"] == 0
    conn = sqlite3.connect(tmp_path / "h.db")
    rounds = {
        json.loads(e)["payload"].get("round")
        for (e,) in conn.execute(
            "SELECT envelope FROM messages WHERE sender = 'reviewer' AND kind != 'control'"
        )
    }
    assert rounds == {0, 1}


async def test_partial_success_uses_the_subset_and_flags_the_rest(tmp_path: Path) -> None:
    s = scenario("partial-success", trials=40)
    result = await run_arms(
        propagation_arms(s),
        RunOptions(bus=InProcessBus(), db_path=tmp_path / "p.db"),
        baseline=False,
    )
    explicit, implicit = result.arm("explicit").result, result.arm("implicit").result
    assert explicit.outcomes["contaminated"] < implicit.outcomes["contaminated"]
    # in a trial where items failed, the explicit researcher claims what it got and
    # lists the rest as unresolved, with status partial_failure
    for messages in explicit.messages.values():
        researcher = next(m for m in messages if m.sender == "researcher")
        answer = researcher.payload["answer"]
        if answer["unresolved"]:
            assert researcher.status.value == "partial_failure"
            assert {e.code.value for e in researcher.errors} == {"partial_success"}
            claimed = {c["key"] for c in answer["claims"]}
            assert claimed and not claimed & set(answer["unresolved"])
            break
    else:
        raise AssertionError("no trial with failed items")
    # success only when nothing failed
    for sc in explicit.scores:
        if sc.outcome is Outcome.SUCCESS:
            assert sc.costs.backend_calls >= 1
