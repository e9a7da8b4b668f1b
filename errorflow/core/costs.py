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

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Self


@dataclass(frozen=True, slots=True)
class Costs:
    backend_calls: float = 0.0
    model_calls: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    retries: float = 0.0
    sim_seconds: float = 0.0
    cache_read_tokens: float = 0.0
    cache_write_tokens: float = 0.0

    # Plain attribute reads, not `dataclasses.asdict` or a comprehension over the field
    # names: costs are built, summed and sent several times per trial.
    def to_wire(self) -> dict[str, float]:
        out = {
            "backend_calls": self.backend_calls,
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "retries": self.retries,
            "sim_seconds": self.sim_seconds,
        }
        if self.cache_read_tokens:
            out["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
        return out

    @classmethod
    def from_wire(cls, raw: object) -> Self:
        """Lenient on input from the bus: unknown keys and non-numbers are ignored."""
        if not isinstance(raw, dict):
            return cls()
        known = {}
        for k, v in raw.items():
            if k in _KEY_SET and isinstance(v, int | float) and not isinstance(v, bool):
                known[k] = float(v)
        return cls(**known)

    def __add__(self, other: Costs) -> Costs:
        return Costs(
            self.backend_calls + other.backend_calls,
            self.model_calls + other.model_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.retries + other.retries,
            self.sim_seconds + other.sim_seconds,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @classmethod
    def total(cls, items: Iterable[Costs]) -> Costs:
        """The exact sum (`math.fsum`), whatever the order: a trial's messages arrive in
        the transport's order, and a sum taken in that order differed in its last bit
        (0.7 and 0.7000000000000001 simulated seconds) between runs of one seed."""
        items = list(items)
        if len(items) < 2:
            return items[0] if items else Costs()
        return Costs(*map(math.fsum, zip(*map(_row, items), strict=True)))

    @classmethod
    def mean(cls, items: Iterable[Costs]) -> Costs:
        items = list(items)
        if not items:
            return Costs()
        total = cls.total(items)
        return Costs(**{k: getattr(total, k) / len(items) for k in ALL_COST_KEYS})


#: Every cost field.
ALL_COST_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Costs))
#: Every field of a Costs, in field order (`Costs(*_row(c))` is `c`).
_row = attrgetter(*ALL_COST_KEYS)
_KEY_SET: frozenset[str] = frozenset(ALL_COST_KEYS)
#: The fields on the wire only when not zero (added after the wire format was fixed).
OPTIONAL_KEYS: frozenset[str] = frozenset({"cache_read_tokens", "cache_write_tokens"})
#: The cost fields every payload and summary has, in the order reports print them.
COST_KEYS: tuple[str, ...] = tuple(k for k in ALL_COST_KEYS if k not in OPTIONAL_KEYS)
