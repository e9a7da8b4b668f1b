"""The bundled `silent-wrong` scenario, run in-process through the Python API: silent
wrong answers contaminate whatever the propagation, and only a check against a second
source (an inspector, a challenger) contains them, at a counted cost."""

from __future__ import annotations

import re
from pathlib import Path

from errorflow import api
from errorflow.scenario.overrides import apply
from errorflow.store.trial_store import load_trace

TRIALS = 60


def _run(**overrides: object) -> api.Result:
    scenario = api.override(api.load("silent-wrong"), {"trials": TRIALS})
    return api.run(apply(scenario, overrides))


def _calls(res: api.Result) -> tuple[float, float]:
    per = res.raw.summary["metrics"]["per_trial"]
    return float(per["backend_calls"]), float(per["model_calls"])


def test_explicit_propagation_does_not_contain_silent_wrong_answers() -> None:
    explicit, implicit = _run(propagation="explicit"), _run(propagation="implicit")
    assert explicit.outcomes["contaminated"] > TRIALS / 3
    assert abs(explicit.outcomes["contaminated"] - implicit.outcomes["contaminated"]) <= 4
    assert explicit.outcomes["contained"] <= 3  # nothing says anything went wrong
    faults = explicit.raw.summary["tool_faults"]
    assert faults["tools.kpi_cache.faults[0]"]["kind"] == "stale"
    assert faults["tools.account_index.faults[0]"]["fired"] > 0


def test_a_defence_on_the_second_source_contains_them_at_a_cost() -> None:
    none = _run()
    defences = {
        "inspector on origin": _run(
            **{"agents.writer.inspector": {"tools": ["kpi_origin", "account_origin"]}}
        ),
        "challenger on origin": _run(**{"agents.writer.challenge": 1.0}),
    }
    for defended in defences.values():
        assert defended.outcomes["contaminated"] <= 3
        assert defended.outcomes["success"] > none.outcomes["success"] + TRIALS / 3
        backend, model = _calls(defended)
        assert backend > _calls(none)[0] + 2 and model > _calls(none)[1]
    axes = api.load("silent-wrong").sweep
    assert axes is not None
    assert list(axes.axes[0].values) == ["none", *defences]


def test_the_trace_names_the_silent_fault_where_a_false_claim_started(tmp_path: Path) -> None:
    """Every contaminated trial of the undefended arm starts at a call a silent fault
    answered: its root cause names that fault's place, never an `answer` of the model's
    own."""
    db = tmp_path / "runs.db"
    result = api.run(apply(api.load("silent-wrong"), {"trials": 30}), propagation="explicit", db=db)
    bad = [s.trial for s in result.raw.scores if s.outcome.value == "contaminated"]
    assert len(bad) >= 5, result.outcomes
    for trial in bad:
        trace = load_trace(db, result.run_id, trial)
        assert trace is not None and trace.root_cause is not None
        kinds = {o.kind for o in trace.root_cause.origins}
        assert "silent_fault" in kinds, (trial, trace.root_cause.origins)
        silent = next(o for o in trace.root_cause.origins if o.kind == "silent_fault")
        assert re.search(r"tools\.\w+\.faults\[\d\] fired", silent.detail), silent.detail
