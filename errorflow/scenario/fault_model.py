"""Injected faults: what can go wrong with a tool call, and when it fires."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from errorflow.scenario.world_model import Strict

Probability = Annotated[float, Field(ge=0.0, le=1.0)]

FaultKind = Literal[
    "transient",
    "timeout",
    "rate_limit",
    "bad_args",
    "permission",
    "not_found",
    "business_rule",
    "empty",
    "partial",
    "malformed_call",
]


class FaultSpec(Strict):
    """One injected fault. It fires on the first `first_n` calls, or with probability
    `p` per call, or on every call when neither is given."""

    kind: FaultKind
    first_n: int | None = Field(default=None, ge=0, le=1_000_000)
    p: Probability | None = None
    status: int | None = Field(default=None, ge=100, le=599)
    retry_after_s: float | None = Field(default=None, ge=0, le=86_400)
    duration_s: float | None = Field(default=None, ge=0, le=86_400)
    reason: str | None = Field(default=None, max_length=500)
    mode: Literal["missing_field", "wrong_type", "extra_field", "truncated_json"] | None = None
    item_p: Probability | None = Field(default=None, description="partial: per-item failure p")
    error_text: str | None = Field(default=None, max_length=2000, description="raw error text")

    @model_validator(mode="after")
    def _one_trigger(self) -> FaultSpec:
        if self.first_n is not None and self.p is not None:
            raise ValueError("give either first_n or p, not both")
        return self
