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
