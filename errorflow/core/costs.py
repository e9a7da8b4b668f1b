"""What a trial cost, on the two axes the reference articles separate (backend calls:
quota; model calls and tokens: spend), plus retries and simulated time.

One type for the agent that spends, the result payload that carries it, the scorer that
sums it, the summary that averages it and the reports that print it.

`input_tokens` counts every input token, cached or not; `cache_read_tokens` and
`cache_write_tokens` say how many of them a real model's prompt cache served or stored
(priced differently). They are on the wire only when not zero, so a simulated run's
payloads, summaries and reports are what they were before they existed.
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
    cache_read_tokens: float = 0.0
    cache_write_tokens: float = 0.0

    def to_wire(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if v or k not in OPTIONAL_KEYS}

    @classmethod
    def from_wire(cls, raw: object) -> Self:
        """Lenient on input from the bus: unknown keys and non-numbers are ignored."""
        if not isinstance(raw, dict):
            return cls()
        known = {
            k: float(v)
            for k, v in raw.items()
            if k in ALL_COST_KEYS and isinstance(v, int | float) and not isinstance(v, bool)
        }
        return cls(**known)

    def __add__(self, other: Costs) -> Costs:
        return Costs(**{k: getattr(self, k) + getattr(other, k) for k in ALL_COST_KEYS})

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
        return Costs(**{k: getattr(total, k) / len(items) for k in ALL_COST_KEYS})


#: Every cost field.
ALL_COST_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Costs))
#: The fields on the wire only when not zero (added after the wire format was fixed).
OPTIONAL_KEYS: frozenset[str] = frozenset({"cache_read_tokens", "cache_write_tokens"})
#: The cost fields every payload and summary has, in the order reports print them.
COST_KEYS: tuple[str, ...] = tuple(k for k in ALL_COST_KEYS if k not in OPTIONAL_KEYS)
