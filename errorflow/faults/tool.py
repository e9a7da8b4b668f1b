"""Tool faults (`tools.NAME.faults`): what can go wrong with a tool call, one class per
kind, and the table of kinds.

Most kinds make the call fail (an exception, a refusal, an empty or partial answer).
Three make it succeed with a wrong answer the caller cannot tell from a right one
(`silent`): a stale cache or index, the answer for another entity, a corrupted but
schema-valid payload. Only a check against a second source catches those.

A kind is its fields and what it does (the handler methods of
errorflow.faults.tool_base.ToolFaultBase); adding one is a class here and its line in
`ToolFault`, plus its row in scenarios/FORMAT.md.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, JsonValue, ValidationInfo, field_validator

from errorflow.core.seeding import stream
from errorflow.core.shapes import Probability
from errorflow.core.tool_errors import CallTimeout, ConnectTimeout, HTTPStatusError
from errorflow.faults import tool_answers
from errorflow.faults.tool_base import (
    OWNERS,
    Answered,
    Before,
    Call,
    Failure,
    Instead,
    ToolFaultBase,
    ToolFit,
)
from errorflow.faults.trigger import Trigger

Status = Annotated[int, Field(ge=100, le=599)]
Seconds = Annotated[float, Field(ge=0, le=86_400)]
ErrorText = Annotated[str, Field(max_length=2000, description="raw error text")]
#: A stale answer's default drift (10 % lower) and the list elements it misses.
DEFAULT_DRIFT = -0.1
DEFAULT_DROP = 1
#: `mode` of a `malformed_call` fault: how the model's call is mangled.
MALFORMED_MODES = ("missing_field", "wrong_type", "extra_field", "truncated_json")
#: `mode` of a `corrupt` fault: how the answer is corrupted.
CORRUPT_MODES = ("unit", "digits", "truncate")


def _host(tool: str) -> str:
    return f"{tool.replace('_', '-')}.internal"


class TransientFault(ToolFaultBase):
    """connect ETIMEDOUT, or HTTP `status`."""

    kind: Literal["transient"]
    status: Status | None = None
    error_text: ErrorText | None = None

    def before(self, call: Call) -> Before:
        if self.status:
            return Failure(HTTPStatusError(self.status, self.error_text or f"HTTP {self.status}"))
        text = f"Error: connect ETIMEDOUT {_host(call.tool)}:443 (upstream did not answer)"
        return Failure(ConnectTimeout(self.error_text or text))


class TimeoutFault(ToolFaultBase):
    """The tool hangs for `duration_s` (forever when not given); the client gives up at
    its per-call timeout, so that is the (simulated) time the call cost. Shorter than
    the timeout: only slow."""

    kind: Literal["timeout"]
    duration_s: Seconds | None = None
    error_text: ErrorText | None = None

    def before(self, call: Call) -> Before:
        if self.duration_s is not None and self.duration_s < call.timeout_s:
            return Answered(self.duration_s)
        text = f"TimeoutError: {call.tool} did not answer within {call.timeout_s:g}s"
        # The client gave up, the server did not: a send went out, and a retry without
        # an idempotency key sends it a second time.
        return Failure(CallTimeout(self.error_text or text, waited_s=call.timeout_s), served=True)


class RateLimitFault(ToolFaultBase):
    """HTTP 429 with Retry-After."""

    kind: Literal["rate_limit"]
    retry_after_s: Seconds | None = None
    error_text: ErrorText | None = None

    def before(self, call: Call) -> Before:
        ra = self.retry_after_s if self.retry_after_s is not None else 1.0
        text = f"HTTP 429 Too Many Requests (Retry-After: {ra:g})"
        return Failure(HTTPStatusError(429, self.error_text or text, ra))


class BadArgsFault(ToolFaultBase):
    """The task gives only the human wording of a need on this tool, not its identifier
    (seed 000: '2024年营收' for `fin.rev.2024`): per trial, the first `first_n` trials
    or a share `p` of them."""

    kind: Literal["bad_args"]
    stage = "trial"

    def withholds(self, seed: int, trial: int, need: str) -> bool:
        return self.fires(trial, lambda: stream(seed, trial, "world", need, "bad_args").random())


class PermissionFault(ToolFaultBase):
    """HTTP 401/403 (`status`, default 403)."""

    kind: Literal["permission"]
    status: Status | None = None
    error_text: ErrorText | None = None

    def before(self, call: Call) -> Before:
        status = self.status or 403
        text = "Unauthorized" if status == 401 else "Forbidden"
        return Failure(HTTPStatusError(status, self.error_text or f"HTTP {status} {text}"))


class NotFoundFault(ToolFaultBase):
    """HTTP 404."""

    kind: Literal["not_found"]
    error_text: ErrorText | None = None

    def before(self, call: Call) -> Before:
        return Failure(HTTPStatusError(404, self.error_text or "HTTP 404 Not Found"))


class BusinessRuleFault(ToolFaultBase):
    """HTTP 200 with `success: false` and a `reason`."""

    kind: Literal["business_rule"]
    reason: str | None = Field(default=None, max_length=500)

    def before(self, call: Call) -> Before:
        reason = self.reason or "request rejected by business rule"
        return Instead({"success": False, "reason": reason}, business_error=reason)


def empty_of(kind: str) -> Any:
    """The empty answer of a tool kind."""
    return {"metric_store": None, "paper_search": [], "batch_fetch": {}, "search": []}.get(kind)


class EmptyFault(ToolFaultBase):
    """An empty result (`null`, `[]`, `{}`)."""

    kind: Literal["empty"]

    def before(self, call: Call) -> Before:
        return Instead(empty_of(call.tool_kind), empty=True)


class PartialFault(ToolFaultBase):
    """Some items of a batch fail (each with `item_p`); only on a batch tool."""

    kind: Literal["partial"]
    item_p: Probability | None = Field(default=None, description="partial: per-item failure p")

    @property
    def item_failure_p(self) -> float | None:
        return self.item_p if self.item_p is not None else 0.5

    def misfit(self, tool: ToolFit) -> str | None:
        if tool.batch:
            return None
        return (
            f"fault 'partial' cannot apply to tool {tool.name!r}: expected a batch tool "
            "(kind batch_fetch, or a lookup whose key argument is an array), "
            f"found kind {tool.kind!r}"
        )


class MalformedCallFault(ToolFaultBase):
    """The model's call arrives mangled (`mode`, default truncated_json)."""

    kind: Literal["malformed_call"]
    stage = "args"
    mode: Literal["missing_field", "wrong_type", "extra_field", "truncated_json"] | None = None

    def mangle(
        self, args: Mapping[str, object], required: Sequence[str]
    ) -> dict[str, object] | str:
        return tool_answers.mangled(args, self.mode, required)


class _SilentFault(ToolFaultBase):
    silent = True

    def misfit(self, tool: ToolFit) -> str | None:
        if tool.kind == "report_sink":
            return f"fault {self.kind!r} cannot apply to a report_sink (its answer is a receipt)"
        return None


class StaleFault(_SilentFault):
    """Succeeds with an out-of-date answer: `value` when given, else every number off by
    `drift` and every list missing its last `drop` elements."""

    kind: Literal["stale"]
    #: the out-of-date answer itself, instead of drift and drop
    value: JsonValue = None
    #: how far numbers are off, as a share (-0.1: 10 % lower)
    drift: float | None = Field(default=None, gt=-1.0, le=100.0)
    #: how many elements at the end of a list the stale answer misses
    drop: int | None = Field(default=None, ge=1, le=1000)

    @field_validator("drift", "drop")
    @classmethod
    def _offset(cls, offset: float | None, info: ValidationInfo) -> float | None:
        if offset is not None and info.data.get("value") is not None:
            name = info.field_name
            raise ValueError(f"give the stale answer (value) or how it is off ({name}), not both")
        if info.field_name == "drift" and offset == 0:
            raise ValueError("a drift of 0 leaves the answer right")
        return offset

    def after(self, value: JsonValue, rng: random.Random) -> JsonValue:
        if self.value is not None:
            return self.value
        drift = self.drift if self.drift is not None else DEFAULT_DRIFT
        drop = self.drop if self.drop is not None else DEFAULT_DROP
        return tool_answers.stale(value, drift, drop)


class WrongEntityFault(_SilentFault):
    """Succeeds with the answer for another entity (the tool client serves the call)."""

    kind: Literal["wrong_entity"]
    another_entity = True

    def misfit(self, tool: ToolFit) -> str | None:
        if tool.kind != "report_sink" and tool.no_other_entity is not None:
            return (
                f"fault 'wrong_entity' needs another entity to answer for: {tool.no_other_entity}"
            )
        return super().misfit(tool)


class CorruptAnswerFault(_SilentFault):
    """Succeeds with a corrupted but schema-valid answer (`mode`: unit, digits, truncate)."""

    kind: Literal["corrupt"]
    mode: Literal["unit", "digits", "truncate"] | None = None

    def after(self, value: JsonValue, rng: random.Random) -> JsonValue:
        return tool_answers.corrupt(value, self.mode, rng)


#: The table of tool fault kinds, in the order the scenario reference lists them.
ToolFault = Annotated[
    TransientFault
    | TimeoutFault
    | RateLimitFault
    | BadArgsFault
    | PermissionFault
    | NotFoundFault
    | BusinessRuleFault
    | EmptyFault
    | PartialFault
    | MalformedCallFault
    | StaleFault
    | WrongEntityFault
    | CorruptAnswerFault,
    Field(discriminator="kind"),
]


#: kind -> the class that is that kind (its fields and what it does).
KINDS: dict[str, type[ToolFaultBase]] = {c.kind_name(): c for c in get_args(get_args(ToolFault)[0])}
#: Kinds whose call succeeds (ok, no error) with a wrong answer.
SILENT_KINDS = frozenset(k for k, c in KINDS.items() if c.silent)
_OWNED = dict.fromkeys(
    f for c in KINDS.values() for f in c.model_fields if f not in Trigger.model_fields
)
OWNERS.update({f: [c for c in KINDS.values() if f in c.model_fields] for f in _OWNED})
