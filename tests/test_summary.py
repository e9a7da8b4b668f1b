"""Summaries over hand-made trial scores: the JSON shape stored and printed, the rates,
costs over delivered trials only, amplification and paired differences."""

from __future__ import annotations

import json

import pytest

from errorflow.core.costs import COST_KEYS, Costs
from errorflow.scoring.score import Outcome, TrialScore
from errorflow.scoring.summary import amplification, paired_outcomes, summarize


def trial(i: int, outcome: Outcome, depth: int = 0, **costs: float) -> TrialScore:
    return TrialScore(i, outcome, depth, costs=Costs(**costs))


SCORES = [
    trial(0, Outcome.SUCCESS, backend_calls=1, model_calls=2, sim_seconds=0.1),
    trial(1, Outcome.CONTAMINATED, 2, backend_calls=3, model_calls=2, retries=2),
    trial(2, Outcome.CONTAINED, backend_calls=2, model_calls=2, input_tokens=100),
    trial(3, Outcome.CONTAMINATED, 1, backend_calls=1, model_calls=1),
    trial(4, Outcome.BUS_FAULT),  # no messages arrived: no costs known
]


def test_the_json_shape_is_the_stored_one() -> None:
    summary = summarize(SCORES)
    assert list(summary) == ["trials", "outcomes", "metrics"]
    assert list(summary["metrics"]) == [
        "rates",
        "success_rate",
        "contamination_rate",
        "mean_depth",
        "max_depth",
        "per_trial",
        "pass^3",
        "per_trial_ci95",
        "recovered",
    ]
    assert list(summary["metrics"]["per_trial_ci95"]) == [
        "backend_calls",
        "model_calls",
        "tokens",
        "retries",
        "sim_seconds",
    ]
    assert list(summary["outcomes"]) == [o.value for o in Outcome]
    assert list(summary["metrics"]["per_trial"]) == list(COST_KEYS)
    assert json.loads(json.dumps(summary)) == summary


def test_counts_rates_and_depths() -> None:
    summary = summarize(SCORES)
    m = summary["metrics"]
    assert summary["trials"] == 5
    assert summary["outcomes"] == {
        "success": 1,
        "contained": 1,
        "contaminated": 2,
        "bus_fault": 1,
        "infra_fault": 0,
    }
    assert m["rates"]["contaminated"]["rate"] == m["contamination_rate"] == 0.4
    assert m["success_rate"] == 0.2
    low, high = m["rates"]["success"]["ci95"]
    assert low < 0.2 < high and round(low, 4) == low
    assert (m["mean_depth"], m["max_depth"]) == (1.5, 2)
    assert m["pass^3"] == 0.0  # one group of three; trial 1 failed


def test_costs_are_averaged_over_delivered_trials_only() -> None:
    per = summarize(SCORES)["metrics"]["per_trial"]
    # four trials delivered their messages; the bus fault would make each look cheaper
    assert per["backend_calls"] == 7 / 4
    assert per["model_calls"] == 7 / 4
    assert per["input_tokens"] == 25.0
    assert per["sim_seconds"] == round(0.1 / 4, 4)


def test_empty_and_short_runs() -> None:
    summary = summarize([])
    assert summary["trials"] == 0
    assert summary["metrics"]["rates"]["success"] == {"rate": None, "ci95": None}
    assert summary["metrics"]["success_rate"] is None
    assert summary["metrics"]["per_trial"] == {k: 0.0 for k in COST_KEYS}
    assert summary["metrics"]["pass^3"] is None
    only_faults = summarize([trial(0, Outcome.BUS_FAULT)])
    assert only_faults["metrics"]["per_trial"]["backend_calls"] == 0.0


def test_amplification_against_the_baseline() -> None:
    per = {"backend_calls": 3.0, "model_calls": 2.0}
    assert amplification(per, {"backend_calls": 2.0, "model_calls": 2.0}) == {
        "backend_calls": 1.5,
        "model_calls": 1.0,
    }
    assert amplification({"backend_calls": 1.0, "model_calls": 2.0}, {"backend_calls": 3.0})[
        "backend_calls"
    ] == pytest.approx(0.3333)
    # no baseline, or a baseline that spent nothing on an axis: no ratio
    assert amplification(per, None) == {"backend_calls": None, "model_calls": None}
    assert amplification(per, {"backend_calls": 0.0, "model_calls": 4.0}) == {
        "backend_calls": None,
        "model_calls": 0.5,
    }


def test_paired_outcomes_take_enums_or_stored_strings() -> None:
    a = [Outcome.SUCCESS, Outcome.CONTAINED, Outcome.SUCCESS]
    b = ["contaminated", "contaminated", "success"]
    paired = paired_outcomes(a, b)
    assert list(paired) == ["success", "contaminated"]
    assert (paired["success"]["only_a"], paired["success"]["only_b"]) == (1, 0)
    assert (paired["contaminated"]["only_a"], paired["contaminated"]["only_b"]) == (0, 2)
    assert paired["contaminated"]["diff"] == pytest.approx(-2 / 3)
    assert paired == paired_outcomes([o.value for o in a], b)


# -- infrastructure faults: counted, never rated ---------------------------------------

INFRA = [
    trial(5, Outcome.INFRA_FAULT, backend_calls=9, model_calls=9),
    trial(6, Outcome.INFRA_FAULT),
]


def test_infra_faults_are_counted_and_left_out_of_every_rate_and_cost() -> None:
    plain, with_infra = summarize(SCORES), summarize(SCORES + INFRA)
    assert with_infra["trials"] == 7
    assert with_infra["outcomes"]["infra_fault"] == 2
    assert with_infra["outcomes"] == {**plain["outcomes"], "infra_fault": 2}
    # rates, intervals, depths, costs and pass^3 are the ones of the measured trials
    assert with_infra["metrics"] == plain["metrics"]
    assert "infra_fault" not in with_infra["metrics"]["rates"]
    assert sum(r["rate"] for r in with_infra["metrics"]["rates"].values()) == pytest.approx(1.0)


def test_infra_faults_shuffled_in_do_not_change_pass_at_k() -> None:
    ok = [trial(i, Outcome.SUCCESS) for i in range(3)]
    mixed = [ok[0], trial(9, Outcome.INFRA_FAULT), ok[1], ok[2]]
    assert summarize(mixed)["metrics"]["pass^3"] == summarize(ok)["metrics"]["pass^3"] == 1.0
    assert summarize([trial(0, Outcome.INFRA_FAULT)] * 3)["metrics"]["pass^3"] is None


def test_only_infra_faults_rate_nothing() -> None:
    summary = summarize(INFRA)
    assert summary["outcomes"]["infra_fault"] == 2
    rates = summary["metrics"]["rates"]
    assert rates["success"] == rates["contaminated"] == {"rate": None, "ci95": None}
    assert summary["metrics"]["contamination_rate"] is None
    assert summary["metrics"]["per_trial"]["model_calls"] == 0.0


def test_paired_outcomes_leave_out_pairs_with_an_infra_fault() -> None:
    a = ["success", "infra_fault", "success", "contaminated"]
    b = ["contaminated", "success", "infra_fault", "contaminated"]
    paired = paired_outcomes(a, b)
    assert paired == paired_outcomes(["success", "contaminated"], ["contaminated", "contaminated"])
    assert paired["success"]["n"] == 2
    with pytest.raises(ValueError, match="same number"):
        paired_outcomes(a, b[:3])


@pytest.mark.parametrize("trials", [1500, 2600])
def test_a_long_run_read_again_gives_the_intervals_a_single_pass_gives(trials: int) -> None:
    """Past the bootstrap's size, scores that can be read again are read a cost at a time
    instead of being copied: the same summary as from a one-pass iterator."""
    import random

    from errorflow.scoring.score_table import ScoreTable

    rng = random.Random(trials)
    outcomes = [Outcome.SUCCESS, Outcome.CONTAMINATED, Outcome.BUS_FAULT, Outcome.INFRA_FAULT]
    scores = [
        TrialScore(
            t,
            rng.choices(outcomes, [70, 20, 5, 5])[0],
            1,
            costs=Costs(
                backend_calls=rng.randint(1, 9),
                model_calls=rng.randint(2, 12),
                input_tokens=rng.randint(500, 4000),
                output_tokens=rng.randint(20, 400),
                retries=rng.randint(0, 3),
                sim_seconds=rng.random() * 30,
            ),
        )
        for t in range(trials)
    ]
    once = summarize(iter(scores))
    assert summarize(scores) == once
    assert summarize(ScoreTable(dict(enumerate(scores))).ordered()) == once
    assert "per_trial_ci95" in once["metrics"]
