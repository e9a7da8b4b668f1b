import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from errorflow.scoring.stats import paired_difference, pass_at_k, wilson


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


def test_pass_at_k() -> None:
    assert pass_at_k([True] * 6, 3) == 1.0
    assert pass_at_k([True, True, False, True, True, True], 3) == 0.5
    assert math.isnan(pass_at_k([True], 3))
