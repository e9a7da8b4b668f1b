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
from functools import reduce
from operator import add, itemgetter

from errorflow.scoring.stats import Z95

RESAMPLES = 1000
BOOTSTRAP_MAX_N = 2000
#: From this many trials the resamples are drawn with numpy (below, importing it costs
#: more than the loop), and this many per numpy call (memory stays n x 100 numbers).
_NUMPY_FROM_N = 128
_CHUNK = 100


def mean_interval(
    values: Sequence[float], resamples: int = RESAMPLES, max_n: int = BOOTSTRAP_MAX_N
) -> tuple[float, float]:
    """95 % interval of the mean of `values` (one value per trial)."""
    n = len(values)
    if n == 0:
        return (0.0, 0.0)
    if n > max_n:
        return _normal(values)
    return mean_intervals({"": values}, resamples, max_n)[""]


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
    means = _resampled_means(columns, n, resamples)
    out = {}
    for k, drawn in means.items():
        drawn.sort()
        out[k] = (_quantile(drawn, 0.025), _quantile(drawn, 0.975))
    return out


def _resampled_means(
    columns: Mapping[str, Sequence[float]], n: int, resamples: int
) -> dict[str, list[float]]:
    """Each column's mean over each resample: the trials `random.Random(n).choices(
    range(n), k=n)` picks, `resamples` times over, each column summed left to right
    (Python 3.11's `sum`; 3.12's compensates, and would differ by a rounding)."""
    if n >= _NUMPY_FROM_N:
        return _resampled_means_numpy(columns, n, resamples)
    rng = random.Random(n)
    trials = range(n)
    means: dict[str, list[float]] = {k: [] for k in columns}
    for _ in range(resamples):
        pick = itemgetter(*rng.choices(trials, k=n))
        for k, values in columns.items():
            picked = pick(values)
            means[k].append(reduce(add, picked if n > 1 else (picked,), 0) / n)
    return means


def _resampled_means_numpy(
    columns: Mapping[str, Sequence[float]], n: int, resamples: int
) -> dict[str, list[float]]:
    """`_resampled_means`, vectorised, the same numbers: numpy's legacy Mersenne
    Twister, given the state `random.Random(n)` starts from, makes the same doubles as
    its `random()` (53 bits of two 32-bit outputs, in the same way), `floor(u * n)` picks
    as `choices` does, and a running sum (`add.accumulate`) adds in the same order."""
    import numpy as np

    state = random.Random(n).getstate()[1]
    twister = np.random.RandomState()
    twister.set_state(("MT19937", np.array(state[:-1], dtype=np.uint32), state[-1], 0, 0.0))
    arrays = {k: np.asarray(values, dtype=np.float64) for k, values in columns.items()}
    means: dict[str, list[float]] = {k: [] for k in columns}
    for done in range(0, resamples, _CHUNK):
        rows = min(_CHUNK, resamples - done)
        picks = np.floor(twister.random_sample((rows, n)) * n).astype(np.intp)
        for k, values in arrays.items():
            sums = np.add.accumulate(values[picks], axis=1)[:, -1]
            means[k].extend((sums / n).tolist())
    return means


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
