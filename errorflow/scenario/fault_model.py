"""Injected faults: what can go wrong with a tool call, and when it fires.

Most kinds make the call fail (an exception, a refusal, an empty or partial answer).
Three make it succeed with a wrong answer the caller cannot tell from a right one
(`SILENT_KINDS`): a stale cache or index, the answer for another entity, a corrupted
but schema-valid payload. Only a check against a second source catches those.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator

from errorflow.scenario.spec.world_model import Extended

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
    "stale",
    "wrong_entity",
    "corrupt",
]

#: Kinds whose call succeeds (ok, no error) with a wrong answer.
SILENT_KINDS: frozenset[str] = frozenset({"stale", "wrong_entity", "corrupt"})
#: `mode` of a `malformed_call` fault: how the model's call is mangled.
MALFORMED_MODES = ("missing_field", "wrong_type", "extra_field", "truncated_json")
#: `mode` of a `corrupt` fault: how the answer is corrupted.
CORRUPT_MODES = ("unit", "digits", "truncate")
#: A stale answer's default drift (10 % lower) and the list elements it misses.
DEFAULT_DRIFT = -0.1
DEFAULT_DROP = 1


class FaultSpec(Extended):
    """One injected fault. It fires on the first `first_n` calls, or with probability
    `p` per call, or on every call when neither is given."""

    # Fields added with the silent kinds: left out of a dump while unset, so an older
    # scenario keeps its identity (errorflow.scenario.spec.identity).
    added_fields = frozenset({"drift", "drop", "value"})

    kind: FaultKind
    first_n: int | None = Field(default=None, ge=0, le=1_000_000)
    p: Probability | None = None
    status: int | None = Field(default=None, ge=100, le=599)
    retry_after_s: float | None = Field(default=None, ge=0, le=86_400)
    duration_s: float | None = Field(default=None, ge=0, le=86_400)
    reason: str | None = Field(default=None, max_length=500)
    mode: (
        Literal[
            "missing_field",
            "wrong_type",
            "extra_field",
            "truncated_json",
            "unit",
            "digits",
            "truncate",
        ]
        | None
    ) = None
    item_p: Probability | None = Field(default=None, description="partial: per-item failure p")
    error_text: str | None = Field(default=None, max_length=2000, description="raw error text")
    #: stale: how far numbers are off, as a share (-0.1: 10 % lower)
    drift: float | None = Field(default=None, gt=-1.0, le=100.0)
    #: stale: how many elements at the end of a list the stale answer misses
    drop: int | None = Field(default=None, ge=1, le=1000)
    #: stale: the out-of-date answer itself, instead of drift and drop
    value: JsonValue = None

    @model_validator(mode="after")
    def _one_trigger(self) -> FaultSpec:
        if self.first_n is not None and self.p is not None:
            raise ValueError("give either first_n or p, not both")
        return self
