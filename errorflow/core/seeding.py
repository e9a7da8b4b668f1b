"""Every random choice comes from the scenario seed through a named stream.

A stream is a `random.Random` seeded from (seed, trial, owner, purpose...). Named
streams keep draws independent: adding a fault to one tool never changes the draws
of another, and an agent in another process derives the same stream from the same
names (Python seeds str-seeded generators through SHA-512, stable across runs).
"""

from __future__ import annotations

import random


def stream(seed: int, *names: object) -> random.Random:
    return random.Random(":".join([str(seed), *(str(n) for n in names)]))


class LazyStream:
    """`stream(seed, *names)`, seeded at its first draw: a retry's jitter stream is made
    for every gate of every trial and drawn from in few (seeding one costs microseconds).
    The same draws as the stream itself, whenever they come."""

    def __init__(self, seed: int, *names: object) -> None:
        self._seed, self._names = seed, names
        self._rng: random.Random | None = None

    @property
    def rng(self) -> random.Random:
        if self._rng is None:
            self._rng = stream(self._seed, *self._names)
        return self._rng

    def uniform(self, a: float, b: float) -> float:
        return self.rng.uniform(a, b)
