"""Intervals on per-trial costs: the percentile bootstrap over trials.

A cost per trial (calls, tokens, simulated seconds) is a mean over trials whose spread is
anything but normal at 20 trials (a retry storm is a long tail), so its interval comes
from resampling the trials themselves. The resamples are seeded by the trial count: the
same trials give the same interval, run after run. Above `BOOTSTRAP_MAX_N` trials the
normal interval of the mean is used instead: there the two agree closely, and the
bootstrap's cost grows with trials x resamples.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from operator import itemgetter

from errorflow.scoring.stats import Z95

RESAMPLES = 1000
BOOTSTRAP_MAX_N = 2000


def mean_interval(
    values: Sequence[float], resamples: int = RESAMPLES, max_n: int = BOOTSTRAP_MAX_N
) -> tuple[float, float]:
    """95 % interval of the mean of `values` (one value per trial)."""
    n = len(values)
    if n == 0:
        return (0.0, 0.0)
    if n > max_n:
        return _normal(values)
    rng = random.Random(n)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    return (_quantile(means, 0.025), _quantile(means, 0.975))


def mean_intervals(
    columns: Mapping[str, Sequence[float]],
    resamples: int = RESAMPLES,
    max_n: int = BOOTSTRAP_MAX_N,
) -> dict[str, tuple[float, float]]:
    """`mean_interval` of each column (one value per trial, every column as long): the
    same intervals, drawn once for all of them. The resamples are seeded by the trial
    count alone, so every column picks the same trials; they are drawn once (as indices:
    `choices(range(n))` makes exactly the draws `choices(values)` makes) and each column
    summed over them in the same order, so each interval is the one `mean_interval` gives."""
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1:
        return {k: mean_interval(v, resamples, max_n) for k, v in columns.items()}
    (n,) = lengths
    if n == 0 or n > max_n:
        return {k: mean_interval(v, resamples, max_n) for k, v in columns.items()}
    rng = random.Random(n)
    trials = range(n)
    means: dict[str, list[float]] = {k: [] for k in columns}
    for _ in range(resamples):
        pick = itemgetter(*rng.choices(trials, k=n))
        for k, values in columns.items():
            picked = pick(values)
            means[k].append(sum(picked if n > 1 else (picked,)) / n)
    out = {}
    for k, drawn in means.items():
        drawn.sort()
        out[k] = (_quantile(drawn, 0.025), _quantile(drawn, 0.975))
    return out


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def _normal(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return (mean - half, mean + half)
