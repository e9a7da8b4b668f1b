"""Computations a scenario's derived needs run as Python tools: a sum over a batch
need's rows, an amount converted at a rate (FORMAT.md, "derived needs").

Deterministic, no I/O: a derived need's ground truth is the same function applied to
the correct answers of the needs it is derived from.
"""

from __future__ import annotations

from collections.abc import Mapping


def total(daily: Mapping[str, float]) -> float:
    """The sum of a batch's values (`{mon: 100, tue: 250}` -> 350.0)."""
    return round(sum(float(v) for v in daily.values()), 2)


def convert(amount: float, rate: float) -> float:
    """`amount` at exchange `rate`, to the cent."""
    return round(float(amount) * float(rate), 2)
