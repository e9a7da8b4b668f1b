"""What a trial cost, on the two axes the reference articles separate (backend calls:
quota; model calls and tokens: spend), plus retries and simulated time.

One type for the agent that spends, the result payload that carries it, the scorer that
sums it, the summary that averages it and the reports that print it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Self


@dataclass(frozen=True)
class Costs:
    backend_calls: float = 0.0
    model_calls: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    retries: float = 0.0
    sim_seconds: float = 0.0

    def to_wire(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_wire(cls, raw: object) -> Self:
        """Lenient on input from the bus: unknown keys and non-numbers are ignored."""
        if not isinstance(raw, dict):
            return cls()
        known = {
            k: float(v)
            for k, v in raw.items()
            if k in COST_KEYS and isinstance(v, int | float) and not isinstance(v, bool)
        }
        return cls(**known)

    def __add__(self, other: Costs) -> Costs:
        return Costs(**{k: getattr(self, k) + getattr(other, k) for k in COST_KEYS})

    @classmethod
    def total(cls, items: Iterable[Costs]) -> Costs:
        out = Costs()
        for c in items:
            out = out + c
        return out

    @classmethod
    def mean(cls, items: Iterable[Costs]) -> Costs:
        items = list(items)
        if not items:
            return Costs()
        total = cls.total(items)
        return Costs(**{k: getattr(total, k) / len(items) for k in COST_KEYS})


#: The cost fields, in the order reports print them.
COST_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Costs))
