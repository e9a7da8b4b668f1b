"""Statistics over trials: Wilson intervals, paired differences, pass^k."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95 % Wilson score interval for a proportion (sane at 0 and n, unlike Wald)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)  # exact at the ends
    return (low, high)


class PairedDifference(TypedDict):
    diff: float  # share of trials where only a holds, minus where only b does
    low: float  # 95 % interval of diff (Newcombe's hybrid score interval)
    high: float
    only_a: int  # discordant trials (McNemar's counts)
    only_b: int
    n: int
    p: float  # exact McNemar test: two-sided p-value of only_a vs only_b


def paired_difference(a: Sequence[bool], b: Sequence[bool], z: float = Z95) -> PairedDifference:
    """Difference of two paired proportions (same trials, two arms): Newcombe's hybrid
    score interval for paired data (1998, method 10: the arms' Wilson intervals combined
    through the phi correlation of the 2x2 table; sane with no or all discordant trials,
    where Wald's collapses to a point) and the exact McNemar test on the discordant
    trials."""
    if len(a) != len(b):
        raise ValueError("paired arms must have the same number of trials")
    n = len(a)
    both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    if n == 0:
        return {"diff": 0.0, "low": -1.0, "high": 1.0, "only_a": 0, "only_b": 0, "n": 0, "p": 1.0}
    low, high = newcombe_paired(both, only_a, only_b, n - both - only_a - only_b, z)
    return {
        "diff": (only_a - only_b) / n,
        "low": low,
        "high": high,
        "only_a": only_a,
        "only_b": only_b,
        "n": n,
        "p": mcnemar_exact(only_a, only_b),
    }


def newcombe_unpaired(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's (1998, method 10) hybrid score interval for k1/n1 - k2/n2, two
    independent samples (a run of ours against a published count): the two Wilson
    intervals combined, sane at 0/n and n/n where Wald's collapses."""
    if n1 <= 0 or n2 <= 0:
        return (-1.0, 1.0)
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson(k1, n1, z), wilson(k2, n2, z)
    d = p1 - p2
    return max(-1.0, d - math.hypot(p1 - l1, u2 - p2)), min(1.0, d + math.hypot(u1 - p1, p2 - l2))


def newcombe_paired(
    both: int, only_a: int, only_b: int, neither: int, z: float = Z95
) -> tuple[float, float]:
    """Newcombe's (1998) hybrid score interval for p_a - p_b from a paired 2x2 table."""
    n = both + only_a + only_b + neither
    p1, p2 = (both + only_a) / n, (both + only_b) / n
    l1, u1 = wilson(both + only_a, n, z)
    l2, u2 = wilson(both + only_b, n, z)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    cross = both * neither - only_a * only_b
    # phi of the table, its numerator corrected as Newcombe does (0 below n/2)
    corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = corrected / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(
        max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    )
    return max(-1.0, low), min(1.0, high)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Exact (binomial) McNemar test: the two-sided p-value of seeing discordant counts
    this uneven if either arm were as likely as the other to hold alone."""
    m = only_a + only_b
    if m == 0:
        return 1.0
    return min(1.0, 2 * _half_binomial_cdf(min(only_a, only_b), m))


def _half_binomial_cdf(k: int, m: int) -> float:
    """P(X <= k) for X ~ Binomial(m, 1/2), k <= m / 2: the terms summed from the largest
    (at k) down, relative to it, until they no longer count (exact sums of binomial
    coefficients cost seconds at 100,000 trials)."""
    log_top = math.lgamma(m + 1) - math.lgamma(k + 1) - math.lgamma(m - k + 1) - m * math.log(2)
    total, term, i = 0.0, 1.0, k
    while i >= 0 and term > 1e-17 * total:
        total += term
        term *= i / (m - i + 1)
        i -= 1
    return math.exp(log_top) * total


def pass_at_k(outcomes: Sequence[bool], k: int) -> float:
    """pass^k, tau-bench's unbiased estimator: the chance that k trials drawn without
    replacement from these all succeed, C(c, k) / C(n, k) with c successes of n (it does
    not depend on the trials' order)."""
    return pass_hat_k(len(outcomes), sum(1 for o in outcomes if o), k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """`pass_at_k` from the counts alone: `c` successes of `n` trials."""
    if k <= 0 or n < k:
        return float("nan")
    return math.comb(c, k) / math.comb(n, k)


def p_value_text(p: float | None) -> str:
    """`McNemar exact p = 0.031`, `p < 0.001`; empty for a comparison stored without one."""
    if p is None:
        return ""
    return "McNemar exact p < 0.001" if p < 0.001 else f"McNemar exact p = {p:.3g}"
