"""The terminal tables, on summaries built from hand-made trial scores."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from rich.console import Console, RenderableType

from errorflow.core.costs import Costs
from errorflow.reports.tables import (
    cost_line,
    outcome_table,
    paired_table,
    policy_title,
    print_run,
    sweep_tables,
)
from errorflow.runtime.experiment import ArmJson, SweepJson
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.summary import (
    Amplification,
    RunJson,
    paired_outcomes,
    summarize,
)


def run_json(outcomes: list[Outcome], backend: float = 1.0, model: float = 2.0) -> RunJson:
    costs = Costs(backend_calls=backend, model_calls=model, input_tokens=300, output_tokens=50)
    scores = [
        TrialScore(i, o, 2 if o is Outcome.CONTAMINATED else 0, costs=costs)
        for i, o in enumerate(outcomes)
    ]
    summary = summarize(scores)
    return {
        "run_id": "r-1",
        "scenario": "contamination",
        "seed": 3,
        "trials": summary["trials"],
        "propagation": "explicit",
        "broker": "embedded",
        "outcomes": summary["outcomes"],
        "metrics": summary["metrics"],
        "rejects": {},
    }


def arm_json(label: str, outcomes: list[Outcome], backend: float = 1.0) -> ArmJson:
    amplification: Amplification = {"backend_calls": backend / 0.8, "model_calls": 1.0}
    return {
        **run_json(outcomes, backend),
        "label": label,
        "baseline_per_trial": {"backend_calls": 0.8, "model_calls": 2.0},
        "amplification": amplification,
    }


def text(renderable: RenderableType) -> str:
    console = Console(record=True, width=160)
    console.print(renderable)
    return console.export_text()


EXPLICIT = [Outcome.SUCCESS, Outcome.CONTAINED, Outcome.CONTAINED, Outcome.CONTAMINATED]
IMPLICIT = [Outcome.SUCCESS, Outcome.CONTAMINATED, Outcome.CONTAMINATED, Outcome.CONTAMINATED]


def test_print_run_shows_outcomes_costs_and_depth() -> None:
    console = Console(record=True, width=160)
    data = run_json(EXPLICIT)
    data["rejects"] = {"bad_version": 2}
    print_run(console, data, wall=1.5)
    out = console.export_text()
    assert "contamination  run r-1  seed 3  trials 4  propagation explicit" in out
    assert "│ contained    │      2 │  50% │" in out
    assert "bus_fault" not in out  # none happened: no row
    assert "per trial (95% CI): backend calls 1.00, model calls 2.00, tokens 350," in out
    assert "amplification" not in out  # no baseline
    assert "contamination depth: mean 2.00, max 2 hops" in out
    assert "rejected messages: {'bad_version': 2}" in out
    assert "wall time 1.50s" in out


def test_a_bus_fault_gets_a_row_and_no_depth_line_without_contamination() -> None:
    console = Console(record=True, width=160)
    print_run(console, run_json([Outcome.SUCCESS, Outcome.BUS_FAULT]))
    out = console.export_text()
    assert "│ bus_fault    │      1 │  50% │" in out
    assert "contamination depth" not in out and "wall time" not in out


def test_cost_line_with_amplification() -> None:
    line = cost_line(arm_json("blind-retry", EXPLICIT, backend=1.2))
    assert line.endswith("amplification vs fault-free baseline: backend 1.50×, model 1.00×")


def test_cost_line_without_model_calls_in_the_baseline() -> None:
    """A system of Python agents makes no model calls: no model ratio, and no crash."""
    data = arm_json("blind-retry", EXPLICIT, backend=1.2)
    data["amplification"] = {"backend_calls": 1.5, "model_calls": None}
    assert cost_line(data).endswith("amplification vs fault-free baseline: backend 1.50×, model –")


def test_costs_are_n_a_when_no_trials_results_arrived() -> None:
    """Costs travel with the results: a run whose every trial a bus fault ended knows
    none (not a mean of 0.00)."""
    data = run_json([Outcome.BUS_FAULT, Outcome.BUS_FAULT, Outcome.INFRA_FAULT])
    assert cost_line(data) == (
        "per trial: costs n/a (they are counted from results, and no trial's arrived)"
    )
    assert "0.00" in cost_line(run_json([Outcome.BUS_FAULT, Outcome.SUCCESS], backend=0.0))


def test_paired_table() -> None:
    arms = {"explicit": arm_json("explicit", EXPLICIT), "implicit": arm_json("implicit", IMPLICIT)}
    paired = paired_outcomes(EXPLICIT, IMPLICIT)
    out = text(paired_table(arms, paired))
    assert "│ contaminated        │  1 (25%, 5%–70%) │ 3 (75%, 30%–95%) │" in out
    assert "│ backend calls/trial │             1.00 │             1.00 │" in out
    assert "│ mean depth          │             2.00 │             2.00 │" in out
    assert "bus_fault" not in out
    assert (  # 2 discordant trials of 4 cannot rule out no difference (Wald said it did)
        "contaminated: explicit − implicit = -50% (95% CI -79% to +14%; discordant trials "
        "0 vs 2 of 4; McNemar exact p = 0.5)" in out
    )


def sweep(axes: list[tuple[str, list[str]]], with_reference: bool) -> SweepJson:
    labels = ["/".join(p) for p in _product([values for _, values in axes])]
    return {
        "group_id": "g",
        "scenario": "amplification",
        "seed": 0,
        "trials": 4,
        "axes": [{"name": name, "values": values} for name, values in axes],
        "cells": {label: arm_json(label, EXPLICIT) for label in labels},
        "reference": {
            "source": "seed 000 §4",
            "note": "",
            "cells": {labels[0]: {"success": "19/20", "backend_amplification": 1.5}},
        }
        if with_reference
        else None,
        "wall_seconds": 0.5,
    }


def _product(lists: list[list[str]]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [()]
    for values in lists:
        out = [(*p, v) for p in out for v in values]
    return out


def test_one_axis_sweep_prints_published_rows() -> None:
    out = text(sweep_tables(sweep([("strategy", ["blind-retry", "classify"])], True)))
    assert "│ blind-retry │     1/4 │     1/4 │ 1.00/2.00 │   1.25/1.00 │" in out
    assert "│   published │   19/20 │         │           │       1.5/? │" in out
    assert "published: seed 000 §4" in out


def test_two_axis_sweep_is_a_matrix_per_metric() -> None:
    data = sweep([("class", ["transient", "fatal"]), ("strategy", ["a", "b"])], False)
    out = text(sweep_tables(data))
    assert "amplification: success" in out and "amplification: contaminated" in out
    assert "│ fatal            │ 1/4 │ 1/4 │" in out
    assert "published" not in out


def test_three_axis_sweep_is_one_table_with_a_column_per_axis() -> None:
    axes = [("topology", ["single", "linear"]), ("rate", ["0", "0.2"]), ("defence", ["none"])]
    out = text(sweep_tables(sweep(axes, True)))
    assert "amplification: topology × rate × defence" in out
    assert "│ linear      │ 0.2  │ none    │     1/4 │     1/4 │ 1.00/2.00 │   1.25/1.00 │" in out
    # The published row is under its cell (single/0/none), in the first axis's column.
    assert "│   published │      │         │   19/20 │         │           │       1.5/? │" in out
    assert out.index("│ single      │ 0    │") < out.index("published") < out.index("│ 0.2  │")


def test_a_reference_cell_with_measure_figures_only_gets_no_blank_row() -> None:
    data = sweep([("strategy", ["blind-retry", "classify"])], True)
    assert data["reference"] is not None
    data["reference"]["cells"] = {"classify": {"drop": "23.7 %"}}
    assert "  published" not in text(sweep_tables(data))


def test_infra_faults_get_a_row_without_a_rate_and_a_warning() -> None:
    console = Console(record=True, width=200)
    print_run(console, run_json([Outcome.SUCCESS, Outcome.CONTAMINATED, Outcome.INFRA_FAULT]))
    out = console.export_text()
    assert "│ infra_fault  │      1 │    – │ not scored │" in out
    assert "│ success      │      1 │  50% │" in out  # over the 2 trials that measured
    assert "infrastructure faults: 1 of 3 trials measured nothing" in out
    assert "every rate is over the other 2" in out


def test_the_policy_table_says_the_trials_it_sums_over_when_infra_faults_left_some_out() -> None:
    data = run_json([Outcome.SUCCESS, Outcome.CONTAMINATED, Outcome.INFRA_FAULT])
    assert policy_title(data) == "Policy decisions (over the 2 measured trials of 3)"
    assert policy_title(data, "explicit") == (
        "Policy decisions (explicit, over the 2 measured trials of 3)"
    )
    data = run_json([Outcome.SUCCESS, Outcome.BUS_FAULT, Outcome.INFRA_FAULT])
    assert policy_title(data) == "Policy decisions (over the 1 trials whose results arrived, of 3)"
    data = run_json(EXPLICIT)
    assert (policy_title(data), policy_title(data, "implicit")) == (
        "Policy decisions",
        "Policy decisions (implicit)",
    )


def test_no_infra_row_or_warning_without_infra_faults() -> None:
    console = Console(record=True, width=200)
    print_run(console, run_json(EXPLICIT))
    out = console.export_text()
    assert "infra" not in out


def test_paired_table_and_sweep_show_infra_faults_and_measure_without_them() -> None:
    with_infra = [*EXPLICIT, Outcome.INFRA_FAULT]
    arms = {
        "explicit": arm_json("explicit", with_infra),
        "implicit": arm_json("implicit", IMPLICIT),
    }
    out = text(paired_table(arms, paired_outcomes(with_infra, [*IMPLICIT, Outcome.SUCCESS])))
    assert "│ infra_fault         │   1 (not scored) │                0 │" in out
    assert "│ contaminated        │  1 (25%, 5%–70%) │ 3 (75%, 30%–95%) │" in out
    assert "0 vs 2 of 4;" in out  # the pair with an infra fault is left out
    data = sweep([("strategy", ["blind-retry", "classify"])], False)
    data["cells"]["classify"] = arm_json("classify", with_infra)
    out = text(sweep_tables(data))
    assert "│ classify    │     1/4 │     1/4 │" in out
    assert "infrastructure faults (not scored, out of the counts): classify 1" in out


# -- strings from outside ------------------------------------------------------------------

#: A sweep value, a scenario name, a run id as another process or a user could set them.
HOSTILE_LABEL = "\x1b]0;PWNED\x07[red]x[/]\x9b2J\u202e"
SHOWN_LABEL = "\\x1b]0;PWNED\\x07[red]x[/]\\x9b2J\\u202e"


def terminal(print_to: RenderableType | Callable[[Console], None]) -> str:
    """Everything a console sends its terminal (no colours: any ESC is the input's)."""
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None, force_terminal=False)
    if callable(print_to):  # a printing function
        print_to(console)
    else:
        console.print(print_to)
    return buf.getvalue()


def test_tables_show_outside_strings_as_text_with_controls_made_visible() -> None:
    one = sweep([(HOSTILE_LABEL, [HOSTILE_LABEL, "[/]"])], True)
    one["scenario"] = HOSTILE_LABEL
    two = sweep([("a[b]", ["[bold]", "x"]), ("c", [HOSTILE_LABEL])], False)
    arms = {HOSTILE_LABEL: arm_json(HOSTILE_LABEL, EXPLICIT), "[/]": arm_json("i", IMPLICIT)}
    run = run_json(EXPLICIT)
    run["scenario"] = run["run_id"] = HOSTILE_LABEL
    run["broker"] = "[/]\x1b[?1049l"
    outputs = [
        terminal(sweep_tables(one)),
        terminal(sweep_tables(two)),
        terminal(paired_table(arms, paired_outcomes(EXPLICIT, IMPLICIT))),
        terminal(lambda console: print_run(console, run)),
    ]
    for out in outputs:
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
        assert "\u202e" not in out
    assert f"{SHOWN_LABEL}: {SHOWN_LABEL}" in outputs[0]  # the title: no markup read
    assert f"│ {SHOWN_LABEL} │" in outputs[0] and "│ [/]" in outputs[0]
    assert "│ [bold]" in outputs[1] and "a[b] \\ c" in outputs[1]
    assert SHOWN_LABEL in outputs[2] and "[/]" in outputs[2]
    assert f"{SHOWN_LABEL}  run {SHOWN_LABEL}" in outputs[3]
    assert "broker: [/]\\x1b[?1049l" in outputs[3]


def test_the_cost_line_shows_an_interval_where_trials_differ() -> None:
    data: Any = {
        "metrics": {
            "per_trial": {
                "backend_calls": 1.375,
                "model_calls": 3.0,
                "input_tokens": 1000.0,
                "output_tokens": 424.0,
                "retries": 0.42,
                "sim_seconds": 1.48,
            },
            "per_trial_ci95": {
                "backend_calls": [1.15, 1.6],
                "model_calls": [3.0, 3.0],
                "tokens": [1422.0, 1427.0],
                "retries": [0.23, 0.62],
                "sim_seconds": [1.23, 1.71],
            },
        },
        "outcomes": {"success": 8},
    }
    assert cost_line(data) == (
        "per trial (95% CI): backend calls 1.38 (1.15–1.60), model calls 3.00, "
        "tokens 1424 (1422–1427), retries 0.42 (0.23–0.62), simulated time 1.48s (1.23–1.71)"
    )


def test_no_rate_is_given_when_no_trial_measured_anything() -> None:
    data = run_json([Outcome.INFRA_FAULT, Outcome.INFRA_FAULT])
    console = Console(width=120, record=True)
    console.print(outcome_table(data))
    text = console.export_text()
    assert "0%" not in text and text.count("n/a") == 3 and "no trial measured" in text
