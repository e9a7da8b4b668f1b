import itertools
import math
import random
from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from errorflow.scoring.stats import (
    mcnemar_exact,
    newcombe_unpaired,
    paired_difference,
    pass_at_k,
    wilson,
)


def test_wilson_known_values() -> None:
    # 17/20: the textbook Wilson interval
    low, high = wilson(17, 20)
    assert low == pytest.approx(0.6396, abs=1e-3) and high == pytest.approx(0.9476, abs=1e-3)
    assert wilson(0, 20)[0] == 0.0 and wilson(0, 20)[1] == pytest.approx(0.1611, abs=1e-3)
    assert wilson(20, 20)[1] == 1.0
    assert wilson(0, 0) == (0.0, 1.0)


@given(st.integers(0, 500), st.integers(1, 500))
def test_wilson_contains_the_estimate(k: int, n: int) -> None:
    k = min(k, n)
    low, high = wilson(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0


def test_paired_difference_counts_discordant_pairs() -> None:
    a = [True, True, False, True, False]
    b = [False, True, False, False, True]
    d = paired_difference(a, b)
    assert (d["only_a"], d["only_b"], d["n"]) == (2, 1, 5)
    assert d["diff"] == pytest.approx(0.2)
    assert d["low"] <= d["diff"] <= d["high"]
    with pytest.raises(ValueError):
        paired_difference([True], [True, False])


def test_pass_at_k_is_tau_bench_s_unbiased_estimator() -> None:
    """C(c, k) / C(n, k): the share of all k-subsets of the trials that all succeed,
    whatever the trials' order (consecutive groups depended on it)."""
    assert pass_at_k([True] * 6, 3) == 1.0
    run = [True, True, False, True, True, True]
    assert pass_at_k(run, 3) == pytest.approx(comb(5, 3) / comb(6, 3))  # 0.5 by groups
    assert pass_at_k(run, 3) == pass_at_k(run[::-1], 3) == pass_at_k(sorted(run), 3)
    assert math.isnan(pass_at_k([True], 3))


@given(st.lists(st.booleans(), min_size=1, max_size=9), st.integers(1, 4))
def test_pass_at_k_is_the_mean_over_every_k_subset(outcomes: list[bool], k: int) -> None:
    if k > len(outcomes):
        return
    subsets = list(itertools.combinations(outcomes, k))
    assert pass_at_k(outcomes, k) == pytest.approx(sum(all(s) for s in subsets) / len(subsets))


#: (only a, only b) discordant counts of a 2x2 table, with its concordant cells:
#: none discordant, all discordant, one-sided, balanced, small, large.
TABLES = [(0, 0, 20, 30), (25, 25, 0, 0), (0, 47, 3, 0), (5, 5, 10, 10), (1, 0, 4, 5),
          (3, 10, 30, 57), (40, 2, 5, 3), (0, 1, 0, 0), (49000, 51000, 0, 0)]  # fmt: skip


@pytest.mark.parametrize(("only_a", "only_b", "both", "neither"), TABLES)
def test_mcnemar_exact_p_is_statsmodels(only_a: int, only_b: int, both: int, neither: int) -> None:
    table = [[both, only_a], [only_b, neither]]
    expected = mcnemar(table, exact=True).pvalue
    assert mcnemar_exact(only_a, only_b) == pytest.approx(expected, rel=1e-9, abs=1e-15)
    if only_a + only_b:
        test = binomtest(min(only_a, only_b), only_a + only_b, 0.5)
        assert mcnemar_exact(only_a, only_b) == pytest.approx(test.pvalue, rel=1e-9)


@pytest.mark.parametrize(("only_a", "only_b", "both", "neither"), TABLES)
def test_newcombe_uses_statsmodels_wilson_and_never_collapses(
    only_a: int, only_b: int, both: int, neither: int
) -> None:
    """The interval is built on each arm's Wilson interval (statsmodels' own); it holds
    the estimate, stays in [-1, 1] and keeps a width where Wald's is a point (no or all
    discordant trials)."""
    n = only_a + only_b + both + neither
    for k in (both + only_a, both + only_b):
        assert wilson(k, n) == pytest.approx(proportion_confint(k, n, method="wilson"), abs=1e-12)
    a = [True] * both + [True] * only_a + [False] * only_b + [False] * neither
    b = [True] * both + [False] * only_a + [True] * only_b + [False] * neither
    d = paired_difference(a, b)
    assert d["diff"] == pytest.approx((only_a - only_b) / n)
    assert -1.0 <= d["low"] <= d["diff"] <= d["high"] <= 1.0
    assert d["high"] - d["low"] > 0.01


def test_newcombe_covers_the_true_difference_about_95_percent_of_the_time() -> None:
    """Coverage over paired trials drawn with a known difference (Wald undercovers
    here: near 0 discordance its interval collapses)."""
    rng = random.Random(7)
    covered = total = 0
    for p_both, p_a, p_b in [(0.3, 0.1, 0.05), (0.05, 0.02, 0.0), (0.6, 0.2, 0.2), (0.0, 0.5, 0.1)]:
        truth = p_a - p_b
        for _ in range(400):
            a, b = [], []
            for _ in range(50):
                u = rng.random()
                a.append(u < p_both + p_a)
                b.append(u < p_both or p_both + p_a <= u < p_both + p_a + p_b)
            d = paired_difference(a, b)
            covered += d["low"] <= truth <= d["high"]
            total += 1
    assert covered / total >= 0.93, covered / total


@pytest.mark.parametrize(
    ("k1", "n1", "k2", "n2"),
    [
        (0, 20, 0, 20),
        (20, 20, 0, 20),
        (78, 100, 32, 40),
        (46, 60, 53, 60),
        (0, 100, 19, 20),
        (5, 7, 1, 9),
    ],
)
def test_newcombe_unpaired_is_statsmodels(k1: int, n1: int, k2: int, n2: int) -> None:
    expected = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff")
    assert newcombe_unpaired(k1, n1, k2, n2) == pytest.approx(expected, abs=1e-9)
