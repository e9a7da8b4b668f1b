"""Cost intervals against scipy's bootstrap (scipy.stats.bootstrap, percentile method)."""

from __future__ import annotations

import itertools
import math
import random
from functools import reduce
from operator import add

import numpy as np
import pytest
from scipy import stats

from errorflow.scoring import bootstrap
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


def _sequential_reference(values: list[float], resamples: int = 1000) -> tuple[float, float]:
    """The interval as first written: `random.Random(n).choices` resample by resample,
    each summed left to right in plain Python."""
    n = len(values)
    rng = random.Random(n)
    means = sorted(reduce(add, rng.choices(values, k=n), 0) / n for _ in range(resamples))

    def quantile(q: float) -> float:
        at = q * (n_means - 1)
        low = math.floor(at)
        high = min(low + 1, n_means - 1)
        return means[low] + (means[high] - means[low]) * (at - low)

    n_means = len(means)
    return quantile(0.025), quantile(0.975)


@pytest.mark.parametrize("n", [1, 5, 127, 128, 129, 700, BOOTSTRAP_MAX_N])
def test_the_vectorised_resamples_are_the_loops_own_numbers(n: int) -> None:
    rnd = random.Random(n + 1)
    columns: dict[str, list[float]] = {
        "floats": [rnd.lognormvariate(5, 1.2) for _ in range(n)],
        "ints": [rnd.randint(0, 40) for _ in range(n)],
        "mixed": [rnd.choice([0, 1, 2.5, rnd.random() * 1e4]) for _ in range(n)],
    }
    drawn = mean_intervals(columns)
    for k, values in columns.items():
        assert drawn[k] == _sequential_reference(values), k
        assert mean_interval(values) == drawn[k]


def test_numpy_and_the_loop_make_the_same_means(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(9)
    columns = {k: [rnd.expovariate(0.1) for _ in range(300)] for k in "ab"}
    vectorised = bootstrap._resampled_means(columns, 300, 250)
    monkeypatch.setattr(bootstrap, "_NUMPY_FROM_N", 10**9)
    assert bootstrap._resampled_means(columns, 300, 250) == vectorised
