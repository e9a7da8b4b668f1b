"""Where the simulated model's random choices come from.

`sequential` (the default): one stream per conversation (seed, trial, agent), drawn in
the order the model meets its decisions. Two runs that differ in one setting part
after their first different observation: every later draw answers another question.

`paired`: each decision draws from a stream of its own, keyed by what is decided
(the decision, the need or claim it is about, and how many times this conversation
has made that decision for it). The explicit and implicit arms of the same trial then
answer the same question with the same number (common random numbers), so a
difference between the arms is the propagation's, not the draws'. Decisions that are
the same choice reached by another path share a name: a writer inventing a value for a
need draws `fabricate` whether upstream sent nothing or an empty "nothing found", so
the arm with the lower probability invents only where the other does too.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Literal

from errorflow.core.seeding import stream

DrawsMode = Literal["sequential", "paired"]


class Draws:
    """The random source of one simulated conversation (one agent, one trial)."""

    def __init__(
        self, shared: random.Random | None, seed: int = 0, names: tuple[object, ...] = ()
    ) -> None:
        """`shared`: the conversation's one stream (sequential); None: a stream per
        decision under `seed` and `names` (paired)."""
        self._shared = shared
        self._seed = seed
        self._names = names
        self._made: Counter[tuple[str, str]] = Counter()

    @classmethod
    def of_conversation(cls, seed: int, trial: int, owner: str, mode: DrawsMode) -> Draws:
        names = (trial, owner, "model")
        return cls(stream(seed, *names) if mode == "sequential" else None, seed, names)

    def of(self, decision: str, about: str = "") -> random.Random:
        """The stream a decision draws from: the conversation's own (sequential), or
        one for this decision about `about`, its n-th time (paired)."""
        if self._shared is not None:
            return self._shared
        n = self._made[(decision, about)]
        self._made[(decision, about)] += 1
        return stream(self._seed, *self._names, decision, about, n)

    def chance(self, decision: str, about: str, p: float) -> bool:
        """Whether a decision of probability `p` happens (one draw)."""
        return self.of(decision, about).random() < p
