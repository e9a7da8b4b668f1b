"""The reference experiments: seed 000's mechanics, reproduced through the whole stack."""

from __future__ import annotations

import json
from pathlib import Path

from errorflow.bus.transport import InProcessBus
from errorflow.core.costs import Costs
from errorflow.runtime.experiment import (
    ArmResult,
    ExperimentResult,
    propagation_arms,
    run_arms,
    sweep_arms,
)
from errorflow.runtime.runner import RunOptions, RunResult
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.summary import summarize
from tests.conftest import scenario


def axes_of(name: str) -> tuple[object, list[tuple[str, dict[str, dict[str, object]]]]]:
    s = scenario(name)
    assert s.sweep is not None
    return s, [(a.name, a.values) for a in s.sweep.axes]


async def test_strategy_matrix_reproduces_the_mechanism_cells(tmp_path: Path) -> None:
    s, axes = axes_of("strategy-matrix")
    result = await run_arms(
        sweep_arms(s, axes),  # type: ignore[arg-type]
        RunOptions(bus=InProcessBus(), db_path=tmp_path / "m.db"),
    )
    cells = {a.label: a for a in result.arms}
    expected = {  # (successes out of 20, backend calls, model calls) per trial: seed 000 §2
        "transient/blind-retry": (20, 3, 2),
        "transient/tell-model": (0, 1, 2),
        "transient/classify": (20, 3, 2),
        "bad-args/blind-retry": (0, 3, 2),
        "bad-args/tell-model": (0, 1, 2),
        "bad-args/classify": (0, 1, 2),
        "fatal/blind-retry": (0, 3, 2),
        "fatal/tell-model": (0, 1, 2),
        "fatal/classify": (0, 1, 1),
    }
    for label, (success, backend, model) in expected.items():
        arm = cells[label]
        per = arm.result.summary["metrics"]["per_trial"]
        assert arm.result.outcomes["success"] == success, label
        assert per["backend_calls"] == backend, label
        assert per["model_calls"] == model, label
        # every trial, not only the mean
        assert {sc.costs.backend_calls for sc in arm.result.scores} == {backend}, label
    # classify on fatal is one model call cheaper than the others
    assert cells["fatal/classify"].amplification["model_calls"] == 0.5


async def test_error_message_rewrite_repairs_only_with_options(tmp_path: Path) -> None:
    s, axes = axes_of("message-rewrite")
    result = await run_arms(
        sweep_arms(s, axes),  # type: ignore[arg-type]
        RunOptions(bus=InProcessBus(), db_path=tmp_path / "r.db"),
        baseline=False,
    )
    raw, actionable = result.arm("raw").result, result.arm("actionable").result
    assert raw.trials == actionable.trials == 100
    assert raw.outcomes["success"] == 0  # no options in the message: never repaired
    k = actionable.outcomes["success"]
    # p_repair_with_options is 0.8 (32/40 in seed 000); dropped arguments cost a little
    assert 0.65 <= k / 100 <= 0.9, k


async def test_amplification_is_measured_against_a_fault_free_baseline(tmp_path: Path) -> None:
    s, axes = axes_of("amplification")
    result = await run_arms(
        sweep_arms(s, axes),  # type: ignore[arg-type]
        RunOptions(bus=InProcessBus(), db_path=tmp_path / "a.db"),
    )
    blind = result.arm("blind-retry")
    tell = result.arm("tell-model")
    assert blind.baseline is not None and blind.baseline["model_calls"] == 2.0
    # retrying in the tool layer costs backend calls, never model calls
    assert blind.amplification["backend_calls"] > 1.1
    assert blind.amplification["model_calls"] == 1.0
    # the small-local model never retries by itself: no extra cost, lower success
    assert tell.amplification["backend_calls"] == 1.0
    assert tell.result.outcomes["success"] < blind.result.outcomes["success"]


async def test_propagation_arms_are_paired_on_the_same_seeds(tmp_path: Path) -> None:
    s = scenario("contamination", trials=30)
    result = await run_arms(
        propagation_arms(s),
        RunOptions(bus=InProcessBus(), db_path=tmp_path / "p.db"),
        baseline=False,
    )
    explicit, implicit = result.arm("explicit").result, result.arm("implicit").result
    assert implicit.outcomes["contaminated"] == 30
    assert explicit.outcomes["contained"] > 20
    paired = result.paired("explicit", "implicit")
    assert paired["contaminated"]["diff"] < -0.6
    assert paired["contaminated"]["only_a"] == 0  # explicit never worse on the same trial


def test_sweep_json_is_the_document_sweep_prints() -> None:
    s = scenario("amplification")
    assert s.sweep is not None and s.reference is not None
    axes = [(a.name, a.values) for a in s.sweep.axes]
    scores = [TrialScore(0, Outcome.SUCCESS, 0, costs=Costs(backend_calls=3, model_calls=2))]
    run = RunResult("r", "amplification", 0, 1, "explicit", "embedded", scores, summarize(scores))
    baseline = {"backend_calls": 2.0, "model_calls": 2.0}
    result = ExperimentResult("g", [ArmResult("blind-retry", run, baseline)])
    doc = result.sweep_json(s, axes, 1.23456)
    assert list(doc) == [
        "group_id",
        "scenario",
        "seed",
        "trials",
        "axes",
        "cells",
        "reference",
        "wall_seconds",
    ]
    assert doc["wall_seconds"] == 1.235
    assert doc["axes"] == [{"name": "strategy", "values": list(s.sweep.axes[0].values)}]
    assert doc["axes"][0]["values"][0] == "blind-retry"
    arm = doc["cells"]["blind-retry"]
    assert list(arm) == [
        *run.to_json(),
        "label",
        "baseline_per_trial",
        "baseline_outcomes",
        "amplification",
    ]
    assert arm["amplification"] == {"backend_calls": 1.5, "model_calls": 1.0}
    assert doc["reference"] == s.reference.model_dump()
    assert json.loads(json.dumps(doc)) == doc
    no_reference = s.model_copy(update={"reference": None})
    assert result.sweep_json(no_reference, axes, 0.0)["reference"] is None


def test_cells_with_long_labels_get_distinct_run_ids() -> None:
    from errorflow.runtime.experiment import _slug

    assert _slug("transient/blind-retry") == "transient_blind-retry"  # short: as before
    a = _slug("hierarchical-with-inspector/0.2/challenger-a")
    b = _slug("hierarchical-with-inspector/0.2/challenger-b")
    assert a != b and len(a) == len(b) == 40


def test_cell_run_ids_leave_room_for_the_trace_ids_the_bus_derives() -> None:
    from errorflow.runtime.experiment import MAX_CELL_RUN_ID, cell_run_id

    group = "resilience-topologies-a4b2c9"
    long_a = cell_run_id(group, "hierarchical/0.2/challenger", "-baseline")
    long_b = cell_run_id(group, "hierarchical/0.4/challenger", "-baseline")
    assert len(long_a) <= MAX_CELL_RUN_ID and long_a != long_b
    assert cell_run_id("g-1", "transient/blind-retry") == "g-1-transient_blind-retry"
