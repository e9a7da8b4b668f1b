"""Classification at the tool edge: exception type and HTTP status → one error code.

Never string matching on messages: the same code must come out whatever the wording.
errorflow's own tool exceptions (errorflow.core.tool_errors) are classified here; the
exceptions of real client libraries a Python tool raises, in foreign_errors.
A 2xx body with `success: false` is a failure (business_rule); an empty body and a
batch with failed items are soft failures the agent must still see.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass

from errorflow.core.taxonomy import ErrorCode, classify_http
from errorflow.core.tool_errors import (
    CallTimeout,
    ConnectTimeout,
    HTTPStatusError,
    JsonRpcError,
    SchemaViolation,
    ToolException,
    ToolResultError,
    ToolServerDown,
    UnknownKey,
    UnknownTool,
    UnknownValue,
)
from errorflow.policies.foreign_errors import classify_foreign
from errorflow.policies.rpc_errors import classify_rpc


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """What was wrong with one argument of a call (invalid_args): the facts the
    actionable message and suggestion are built from."""

    field: str | None = None
    constraint: str | None = None
    received: object = None
    missing: bool = False  # a required argument is absent
    unexpected: bool = False  # `field` is not a parameter of the tool


@dataclass(frozen=True)
class Failure:
    """A classified failure: the facts the observation and the trace are built from.

    Frozen: the gate that retried the call builds the final one with
    `dataclasses.replace(failure, attempts=n)`."""

    code: ErrorCode
    tool: str
    raw: str  # the library's own text (unredacted: trace only)
    http_status: int | None = None
    _: KW_ONLY
    exc_type: str | None = None
    retry_after_s: float | None = None
    argument: ArgumentProblem | None = None  # invalid_args raised before the tool ran
    #: The valid choices for what was wrong: values of the argument, parameter names
    #: (an unexpected argument) or tool names (an unknown tool).
    options: tuple[str, ...] = ()
    reason: str | None = None  # business_rule: the refusal's reason
    item_errors: Mapping[str, str] = dataclasses.field(default_factory=dict)
    attempts: int = 1


def classify_exception(tool: str, exc: BaseException) -> Failure:
    """errorflow's own tool exceptions by their structured facts; any other exception
    (a Python tool's httpx, requests, aiohttp or builtin error) by its type and status
    (errorflow.policies.foreign_errors); what neither knows is `internal_error`."""
    name = type(exc).__name__
    if isinstance(exc, ToolException):
        own = _classify_own(tool, exc)
        if own is not None:
            return own
    raw = exc.raw if isinstance(exc, ToolException) else f"{name}: {exc}"
    foreign = classify_foreign(exc)
    if foreign is None:
        return Failure(ErrorCode.INTERNAL_ERROR, tool, raw, exc_type=name)
    return Failure(
        foreign.code,
        tool,
        raw,
        foreign.http_status,
        exc_type=name,
        retry_after_s=foreign.retry_after_s,
    )


def _classify_own(tool: str, exc: ToolException) -> Failure | None:
    name, raw = type(exc).__name__, exc.raw
    if isinstance(exc, HTTPStatusError):
        code = classify_http(exc.status) or ErrorCode.INTERNAL_ERROR
        return Failure(code, tool, raw, exc.status, exc_type=name, retry_after_s=exc.retry_after_s)
    if isinstance(exc, ConnectTimeout):
        return Failure(ErrorCode.TRANSIENT, tool, raw, exc_type=name)
    if isinstance(exc, CallTimeout):
        return Failure(ErrorCode.TIMEOUT, tool, raw, exc_type=name)
    if isinstance(exc, SchemaViolation):
        problem = ArgumentProblem(
            exc.field, exc.constraint, exc.received, exc.missing, unexpected=exc.unexpected
        )
        return Failure(
            ErrorCode.INVALID_ARGS,
            tool,
            raw,
            exc_type=name,
            argument=problem,
            options=tuple(exc.options or ()),
        )
    if isinstance(exc, UnknownValue):
        problem = ArgumentProblem(exc.field, "must be one of the known values", exc.received)
        return Failure(
            ErrorCode.INVALID_ARGS,
            tool,
            raw,
            exc_type=name,
            argument=problem,
            options=tuple(exc.options),
        )
    if isinstance(exc, UnknownKey):
        problem = ArgumentProblem(exc.field, "must name an existing record", exc.received)
        return Failure(
            ErrorCode.NOT_FOUND,
            tool,
            raw,
            404,
            exc_type=name,
            argument=problem,
            options=tuple(exc.options),
        )
    if isinstance(exc, UnknownTool):
        return Failure(ErrorCode.UNKNOWN_TOOL, tool, raw, exc_type=name, options=tuple(exc.options))
    return _classify_remote(tool, exc)


def _classify_remote(tool: str, exc: ToolException) -> Failure | None:
    """A tool server's answers (an MCP server's): its error responses by their code, a
    result that says it failed as a refusal, a server gone as the infrastructure's."""
    name, raw = type(exc).__name__, exc.raw
    if isinstance(exc, JsonRpcError):
        return Failure(classify_rpc(exc.code), tool, raw, exc_type=name)
    if isinstance(exc, ToolResultError):
        return Failure(ErrorCode.BUSINESS_RULE, tool, raw, exc_type=name, reason=raw)
    if isinstance(exc, ToolServerDown):
        return Failure(ErrorCode.INFRA_FAULT, tool, raw, exc_type=name)
    return None


def classify_body(
    tool: str, *, business_error: str | None, empty: bool, item_errors: Mapping[str, str]
) -> Failure | None:
    """A tool that answered 2xx can still have failed."""
    if business_error is not None:
        return Failure(
            ErrorCode.BUSINESS_RULE,
            tool,
            json.dumps({"success": False, "reason": business_error}, ensure_ascii=False),
            200,
            reason=business_error,
        )
    if item_errors:
        return Failure(
            ErrorCode.PARTIAL_SUCCESS,
            tool,
            f"{len(item_errors)} item(s) failed",
            200,
            item_errors=dict(item_errors),
        )
    if empty:
        return Failure(ErrorCode.EMPTY_RESULT, tool, "(empty result)", 200)
    return None
