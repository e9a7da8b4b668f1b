"""Deterministic Python tools the scenario generator (tests/scenario_generator.py) uses."""

from __future__ import annotations


def scale(x: float) -> float:
    """A value derived from another need's answer."""
    return round(float(x) * 2.5, 2)


def total(daily: dict[str, float]) -> float:
    """A sum over a batch need's whole answer."""
    return round(sum(float(v) for v in daily.values()), 2)


def convert(amount: float, rate: float) -> float:
    """A value derived from two other needs' answers (an amount at an exchange rate)."""
    return round(float(amount) * float(rate), 2)


def code_of(name: str) -> str:
    """An identifier looked up by name."""
    codes = {"alpha": "A-1", "beta": "B-2", "gamma": "G-3"}
    if name not in codes:
        raise KeyError(name)
    return codes[name]
