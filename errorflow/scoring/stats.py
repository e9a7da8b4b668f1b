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
    low: float  # 95 % interval of diff
    high: float
    only_a: int  # discordant trials (McNemar's counts)
    only_b: int
    n: int


def paired_difference(a: Sequence[bool], b: Sequence[bool], z: float = Z95) -> PairedDifference:
    """Difference of two paired proportions (same trials, two arms), with a 95 % interval
    (Wald on the paired differences) and the discordant counts McNemar's test uses."""
    if len(a) != len(b):
        raise ValueError("paired arms must have the same number of trials")
    n = len(a)
    if n == 0:
        return {"diff": 0.0, "low": 0.0, "high": 0.0, "only_a": 0, "only_b": 0, "n": 0}
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    diff = (only_a - only_b) / n
    var = ((only_a + only_b) / n - diff * diff) / n
    half = z * math.sqrt(max(var, 0.0))
    return {
        "diff": diff,
        "low": max(-1.0, diff - half),
        "high": min(1.0, diff + half),
        "only_a": only_a,
        "only_b": only_b,
        "n": n,
    }


def pass_at_k(outcomes: Sequence[bool], k: int) -> float:
    """pass^k: the share of consecutive groups of k trials in which all k succeed."""
    if k <= 0 or len(outcomes) < k:
        return float("nan")
    groups = [outcomes[i : i + k] for i in range(0, len(outcomes) - k + 1, k)]
    return sum(all(g) for g in groups) / len(groups)
