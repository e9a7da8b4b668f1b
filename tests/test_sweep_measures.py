"""Derived sweep measures from fabricated cell counts: drop, recovered, amplification,
their intervals, the n/a cases and the published figures matched to cells."""

from __future__ import annotations

import pytest

from errorflow.reports.sweep_measure_table import measure_text
from errorflow.scenario.spec.sweep_model import SweepMeasures
from errorflow.scoring.sweep_measures import (
    BASELINE,
    drop,
    other_cell,
    published,
    ratio_ci,
    success_counts,
    sweep_measures,
)

AXES = [("topology", ["single", "linear"]), ("rate", ["0", "0.2"]), ("defence", ["none", "ch"])]
MEASURES = SweepMeasures.model_validate(
    {
        "drop": {"against": {"axis": "rate", "value": "0"}},
        "recovered": {"against": {"axis": "defence", "value": "none"}},
        "amplification": {"against": {"axis": "topology", "value": "single"}},
    }
)
#: [success, measured] per cell: faults cost linear 50 % without a defence, 10 % with it.
COUNTS = {
    "single/0/none": (40, 40),
    "single/0/ch": (40, 40),
    "single/0.2/none": (30, 40),
    "single/0.2/ch": (36, 40),
    "linear/0/none": (40, 40),
    "linear/0/ch": (40, 40),
    "linear/0.2/none": (20, 40),
    "linear/0.2/ch": (36, 40),
}


def test_other_cell_changes_one_axis_only() -> None:
    ref = MEASURES.declared()["recovered"]
    assert other_cell("linear/0.2/ch", AXES, ref) == "linear/0.2/none"


def test_drop_is_the_relative_loss_against_the_baseline_with_its_counts() -> None:
    m = sweep_measures(AXES, MEASURES, COUNTS)["cells"]["linear/0.2/none"]["drop"]
    assert m["value"] == pytest.approx(0.5)
    assert m["against"] == "linear/0/none"
    assert m["counts"] == {"linear/0.2/none": [20, 40], "linear/0/none": [40, 40]}
    assert m["ci95"] is not None
    low, high = m["ci95"]
    assert low < 0.5 < high <= 1


def test_recovered_is_the_share_of_the_undefended_drop_won_back() -> None:
    cells = sweep_measures(AXES, MEASURES, COUNTS)["cells"]
    m = cells["linear/0.2/ch"]["recovered"]
    assert m["value"] == pytest.approx((0.5 - 0.1) / 0.5)
    assert m["against"] == "linear/0.2/none"
    assert set(m["counts"]) == {"linear/0.2/ch", "linear/0/ch", "linear/0.2/none", "linear/0/none"}
    assert m["ci95"] is None  # a ratio of ratios: counts only


def test_amplification_is_the_error_rate_over_the_single_agents() -> None:
    cells = sweep_measures(AXES, MEASURES, COUNTS)["cells"]
    m = cells["linear/0.2/none"]["amplification"]
    assert m["value"] == pytest.approx((20 / 40) / (10 / 40))
    assert m["against"] == "single/0.2/none"
    assert m["ci95"] is not None and m["ci95"][0] < 2 < m["ci95"][1]


def test_cells_measured_against_themselves_say_baseline() -> None:
    cells = sweep_measures(AXES, MEASURES, COUNTS)["cells"]
    assert cells["linear/0/ch"]["drop"]["note"] == BASELINE
    assert cells["linear/0/ch"]["recovered"]["note"] == BASELINE  # no fault: nothing to recover
    assert cells["linear/0.2/none"]["recovered"]["note"] == BASELINE
    assert cells["single/0.2/ch"]["amplification"]["note"] == BASELINE
    assert cells["single/0.2/ch"]["amplification"]["value"] is None


def test_n_a_when_the_undefended_cell_did_not_drop() -> None:
    counts = {**COUNTS, "linear/0.2/none": (40, 40)}  # no drop without the defence
    m = sweep_measures(AXES, MEASURES, counts)["cells"]["linear/0.2/ch"]["recovered"]
    assert m["value"] is None
    assert m["note"] == "n/a: no drop without the defence"


def test_n_a_when_the_single_agent_never_erred() -> None:
    m = sweep_measures(AXES, MEASURES, COUNTS)["cells"]["linear/0.2/none"]["amplification"]
    assert m["value"] is not None
    counts = {**COUNTS, "single/0.2/none": (40, 40)}
    m = sweep_measures(AXES, MEASURES, counts)["cells"]["linear/0.2/none"]["amplification"]
    assert m["value"] is None and m["note"] == "n/a: the single agent never erred"


def test_drop_is_n_a_when_the_baseline_never_succeeded_or_nothing_was_measured() -> None:
    assert (
        drop("a", "b", {"a": (0, 10), "b": (0, 10)})["note"] == "n/a: the baseline never succeeded"
    )
    assert drop("a", "b", {"a": (0, 0), "b": (5, 10)})["note"] == "no measured trials"
    assert drop("a", "b", {"a": (5, 10)})["note"] == "n/a: b did not run"


def test_a_negative_drop_when_the_cell_did_better() -> None:
    m = drop("a", "b", {"a": (10, 10), "b": (5, 10)})
    assert m["value"] == pytest.approx(-1.0)


def test_a_cell_that_never_succeeded_drops_all_with_an_upper_bound_of_one() -> None:
    m = drop("a", "b", {"a": (0, 20), "b": (20, 20)})
    assert m["value"] == pytest.approx(1.0)
    assert m["ci95"] is not None and m["ci95"][1] == 1.0 and m["ci95"][0] < 1.0


def test_ratio_interval_narrows_with_more_trials() -> None:
    small, large = ratio_ci(5, 10, 8, 10), ratio_ci(500, 1000, 800, 1000)
    assert small is not None and large is not None
    assert small[0] < large[0] < 0.625 < large[1] < small[1]
    assert ratio_ci(1, 0, 1, 1) is None


def test_success_counts_leave_infra_faults_out() -> None:
    assert success_counts({"success": 3, "infra_fault": 2, "contaminated": 5}, 10) == (3, 8)


def test_published_figures_match_by_values_most_specific_first() -> None:
    ref = {
        "linear": {"drop": "23.7 %", "amplification": "17.2×"},
        "linear/ch": {"drop": "1.0 %"},
        "flat": {"drop": "10.5 %"},
        "0.2/linear": {"drop": "out of axis order: never matches"},
    }
    kinds = ["drop", "amplification"]
    assert published("linear/0.2/none", AXES, ref, kinds) == {
        "drop": "23.7 %",
        "amplification": "17.2×",
    }
    assert published("linear/0.2/ch", AXES, ref, kinds)["drop"] == "1.0 %"
    assert published("single/0.2/ch", AXES, ref, kinds) == {}


def test_the_document_lists_what_each_kind_is_against_and_the_published_cells() -> None:
    data = sweep_measures(AXES, MEASURES, COUNTS, {"linear/0.2": {"drop": "23.7 %"}})
    assert data["against"]["drop"] == {"axis": "rate", "value": "0"}
    assert set(data["published"]) == {"linear/0.2/none", "linear/0.2/ch"}
    assert set(data["cells"]) == set(COUNTS)


def test_the_interval_stays_open_when_both_cells_always_erred() -> None:
    """n/n against n/n: the ratio is 1, but six trials each cannot pin it to 1."""
    interval = ratio_ci(6, 6, 6, 6)
    assert interval is not None
    low, high = interval
    assert low < 0.7 and high > 1.4


def _outcomes(success: int, trials: int = 40, first: bool = True) -> list[str]:
    """`success` successes among `trials`, at the start (or the end) of the trials."""
    hits = ["success"] * success + ["contaminated"] * (trials - success)
    return hits if first else hits[::-1]


def test_cells_that_share_seeds_carry_the_paired_difference_and_mcnemars_test() -> None:
    outcomes = {label: _outcomes(k, n) for label, (k, n) in COUNTS.items()}
    data = sweep_measures(AXES, MEASURES, COUNTS, outcomes=outcomes)
    drop_m = data["cells"]["linear/0.2/none"]["drop"]
    paired = drop_m["paired"]
    # 20 of 40 succeeded against 40 of 40: 20 discordant trials, all one way.
    assert (paired["only_a"], paired["only_b"], paired["n"]) == (0, 20, 40)
    assert paired["diff"] == pytest.approx(-0.5)
    assert paired["p"] == pytest.approx(2 * 0.5**20)
    assert paired["low"] < -0.5 < paired["high"] < 0
    assert "paired" not in data["cells"]["linear/0/none"]["drop"]  # its own baseline


def test_the_paired_test_sees_what_the_counts_cannot() -> None:
    """Same counts, different trials: 30 of 40 each, but not the same 30."""
    counts = {"single/0/none": (30, 40), "single/0.2/none": (30, 40)}
    outcomes = {
        "single/0/none": _outcomes(30, first=True),
        "single/0.2/none": _outcomes(30, first=False),
    }
    axes = [("topology", ["single"]), ("rate", ["0", "0.2"]), ("defence", ["none"])]
    measures = SweepMeasures.model_validate({"drop": {"against": {"axis": "rate", "value": "0"}}})
    paired = sweep_measures(axes, measures, counts, outcomes=outcomes)["cells"]["single/0.2/none"][
        "drop"
    ]["paired"]
    assert paired["diff"] == 0 and (paired["only_a"], paired["only_b"]) == (10, 10)
    assert paired["p"] == pytest.approx(1.0)


def test_cells_of_different_trials_are_not_paired() -> None:
    outcomes = {label: _outcomes(k, n) for label, (k, n) in COUNTS.items()}
    outcomes["linear/0.2/none"] = outcomes["linear/0.2/none"][:30]
    data = sweep_measures(AXES, MEASURES, COUNTS, outcomes=outcomes)
    assert "paired" not in data["cells"]["linear/0.2/none"]["drop"]
    assert "paired" in data["cells"]["linear/0.2/ch"]["drop"]


def test_the_measure_cell_shows_the_paired_p_value() -> None:
    outcomes = {label: _outcomes(k, n) for label, (k, n) in COUNTS.items()}
    data = sweep_measures(AXES, MEASURES, COUNTS, outcomes=outcomes)
    assert measure_text("drop", data["cells"]["linear/0.2/none"]["drop"]).endswith(" p<0.001")
    no_pairs = sweep_measures(AXES, MEASURES, COUNTS)
    assert "p" not in measure_text("drop", no_pairs["cells"]["linear/0.2/none"]["drop"])


def test_recovered_is_computed_from_the_counts_not_the_rounded_drops() -> None:
    """Two drops of a few in 20,000 round to 0.0001 and 0.0001 (or 0.0002): the share
    won back is worked out from the counts, 1 of 3 lost trials."""
    counts = {**COUNTS, "linear/0/none": (20000, 20000), "linear/0/ch": (20000, 20000)}
    counts |= {"linear/0.2/none": (19997, 20000), "linear/0.2/ch": (19998, 20000)}
    m = sweep_measures(AXES, MEASURES, counts)["cells"]["linear/0.2/ch"]["recovered"]
    assert m["value"] == pytest.approx(1 / 3, abs=1e-4)
