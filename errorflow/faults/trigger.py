"""When a counted fault fires: on the first `first_n` calls, with probability `p` per
call, or on every call when neither is given (tool and model faults)."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field, model_validator

from errorflow.core.shapes import Probability, Strict


class Trigger(Strict):
    #: The fault's kind (each family narrows it to its own; first in a dump).
    kind: str
    first_n: int | None = Field(default=None, ge=0, le=1_000_000)
    p: Probability | None = None

    @model_validator(mode="after")
    def _one_trigger(self) -> Trigger:
        if self.first_n is not None and self.p is not None:
            raise ValueError("give either first_n or p, not both")
        return self

    def hits(self, index: int, draw: float) -> bool:
        """Whether it fires on call `index` (0: the first), given the call's draw."""
        if self.first_n is not None:
            return index < self.first_n
        return self.p is None or draw < self.p

    def fires(self, index: int, draw: Callable[[], float]) -> bool:
        """`hits`, with the draw made only when it decides (with p)."""
        return self.hits(index, draw() if self.first_n is None and self.p is not None else 0.0)
