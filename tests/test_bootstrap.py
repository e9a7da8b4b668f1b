"""Cost intervals against scipy's bootstrap (scipy.stats.bootstrap, percentile method)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from scipy import stats

from errorflow.scoring.bootstrap import BOOTSTRAP_MAX_N, mean_interval, mean_intervals


def _scipy(values: list[float]) -> tuple[float, float]:
    result = stats.bootstrap(
        (np.array(values),), np.mean, method="percentile", n_resamples=20_000, random_state=7
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _cases() -> dict[str, list[float]]:
    rng = random.Random(3)
    return {
        "20 trials, a retry storm's long tail": [1.0] * 16 + [5.0, 6.0, 9.0, 12.0],
        "40 trials of 0/1": [float(rng.random() < 0.3) for _ in range(40)],
        "200 trials, skewed tokens": [rng.lognormvariate(7, 0.6) for _ in range(200)],
        "1,000 trials, normal": [rng.gauss(950, 40) for _ in range(1000)],
        f"{BOOTSTRAP_MAX_N + 500} trials (normal interval)": [
            rng.expovariate(1 / 3) for _ in range(BOOTSTRAP_MAX_N + 500)
        ],
        "3 trials": [1.0, 2.0, 4.0],
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_the_interval_agrees_with_scipy(case: str) -> None:
    values = _cases()[case]
    low, high = mean_interval(values)
    ref_low, ref_high = _scipy(values)
    # Monte Carlo error of 1,000 resamples: a few percent of the width, or one step of
    # the mean where the values are few (0/1 trials: the mean moves in steps of 1/n).
    distinct = sorted(set(values))
    step = min(b - a for a, b in itertools.pairwise(distinct)) / len(values)
    tolerance = max(0.08 * (ref_high - ref_low), step) + 1e-9
    assert abs(low - ref_low) <= tolerance, (low, ref_low)
    assert abs(high - ref_high) <= tolerance, (high, ref_high)
    assert low <= sum(values) / len(values) <= high


def test_no_spread_no_width_and_the_same_trials_the_same_interval() -> None:
    assert mean_interval([2.0] * 30) == (2.0, 2.0)
    assert mean_interval([]) == (0.0, 0.0)
    values = _cases()["200 trials, skewed tokens"]
    assert mean_interval(values) == mean_interval(list(values))


@pytest.mark.parametrize("n", [1, 2, 3, 20, 257])
def test_intervals_drawn_once_for_all_columns_are_each_columns_own(n: int) -> None:
    rnd = random.Random(n)
    columns = {
        k: [rnd.choice([0.0, 1.0, 2.5, rnd.random() * 100]) for _ in range(n)] for k in "abc"
    }
    assert mean_intervals(columns) == {k: mean_interval(v) for k, v in columns.items()}
    uneven = {"a": columns["a"], "b": columns["b"][:-1]}  # not one trial per value: each alone
    assert mean_intervals(uneven) == {k: mean_interval(v) for k, v in uneven.items()}
