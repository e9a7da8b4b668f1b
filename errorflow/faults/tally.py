"""Counting where configured faults fired over a run's trials, and where they never did.

A fault that did not fire in a trial is no evidence about it: a summary says in how many
trials each configured fault fired (and how often), and in how many it never did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict


class FaultCount(TypedDict):
    """One configured fault (or kind) over a run's trials."""

    fired: int  # trials in which it fired at least once
    never: int  # trials in which it never fired
    times: int  # what it struck (sends, calls, messages), over every trial


class ToolFaultCount(FaultCount):
    """One configured tool fault (by its place, `tools.kpi.faults[0]`) over a run's
    trials; `times` counts the calls it struck."""

    kind: str


def fault_counts(
    keys: Sequence[str], fired: Mapping[int, Mapping[str, int]], trials: int
) -> dict[str, FaultCount]:
    """Each configured fault: in how many of `trials` it fired, and how often (`fired`:
    the trials where any fault fired, by trial, times by key)."""
    out: dict[str, FaultCount] = {}
    for key in keys:
        hit = [f[key] for f in fired.values() if f.get(key)]
        out[key] = {"fired": len(hit), "never": trials - len(hit), "times": sum(hit)}
    return out


class Tally:
    """What fired in each trial of a run, by key, and how many trials were counted."""

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = list(keys)
        #: Faults fired per trial, by key (only trials where some fired).
        self.fired: dict[int, dict[str, int]] = {}
        self.trials = 0

    def add(self, trial: int, seen: Mapping[str, int]) -> None:
        self.trials += 1
        if seen:
            self.fired[trial] = dict(seen)

    def counts(self) -> dict[str, FaultCount] | None:
        return fault_counts(self.keys, self.fired, self.trials) if self.keys else None
