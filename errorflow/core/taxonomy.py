"""The error taxonomy: one stable code per failure class, and what each class allows.

Classification happens once, at the tool edge, from structured facts (the injected
fault, the HTTP status, the exception type); nothing downstream matches on message
text. Codes are part of the bus protocol: add, never rename.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    # Failures a tool (or the world behind it) produces.
    INVALID_ARGS = "invalid_args"
    TRANSIENT = "transient"
    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    BUSINESS_RULE = "business_rule"
    EMPTY_RESULT = "empty_result"
    PARTIAL_SUCCESS = "partial_success"
    UNKNOWN_TOOL = "unknown_tool"
    # Failures the policy layer produces.
    REPEATED_CALL_BLOCKED = "repeated_call_blocked"
    CIRCUIT_OPEN = "circuit_open"
    RETRIES_EXHAUSTED = "retries_exhausted"
    BUDGET_EXHAUSTED = "budget_exhausted"
    STEP_LIMIT = "step_limit"
    NO_PROGRESS = "no_progress"
    CONSECUTIVE_FAILURES = "consecutive_failures"
    # Failures of the machinery around the agent.
    MODEL_ERROR = "model_error"
    UPSTREAM_FAILURE = "upstream_failure"
    INTERNAL_ERROR = "internal_error"
    BUS_FAULT = "bus_fault"
    #: errorflow's own infrastructure failed (a real model server unreachable, a key it
    #: refuses, a model it does not have): the trial measured nothing and is not scored.
    INFRA_FAULT = "infra_fault"


#: Classes that a retry can cure: the same call may succeed later.
RETRYABLE: frozenset[ErrorCode] = frozenset(
    {ErrorCode.TRANSIENT, ErrorCode.TIMEOUT, ErrorCode.RATE_LIMIT}
)

#: Classes no amount of retrying or re-arguing fixes within one task; a `classify`
#: agent ends its loop at once on these (seed 000: 403 → stop, one model call saved).
UNRECOVERABLE: frozenset[ErrorCode] = frozenset({ErrorCode.PERMISSION_DENIED})

#: Classes that are not failures of the call but still deserve a flag downstream.
SOFT: frozenset[ErrorCode] = frozenset({ErrorCode.EMPTY_RESULT, ErrorCode.PARTIAL_SUCCESS})


def is_retryable(code: ErrorCode) -> bool:
    return code in RETRYABLE


def classify_http(status: int) -> ErrorCode | None:
    """Map an HTTP status to a class; None for 2xx (the body decides those)."""
    if 200 <= status < 300:
        return None
    if status in (401, 403):
        return ErrorCode.PERMISSION_DENIED
    if status == 404:
        return ErrorCode.NOT_FOUND
    if status in (400, 422):
        return ErrorCode.INVALID_ARGS
    if status == 429:
        return ErrorCode.RATE_LIMIT
    if status in (408, 504):
        return ErrorCode.TIMEOUT
    if status == 501:
        return ErrorCode.BUSINESS_RULE  # not implemented: retrying never helps
    if status >= 500:
        return ErrorCode.TRANSIENT
    return ErrorCode.INVALID_ARGS
