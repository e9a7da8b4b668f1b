"""What the model sees of a tool call: short, stable, actionable; never the trace.

Two styles, chosen per agent:
- `raw`: the string the library threw, as many agents pass it on (redacted).
- `actionable`: what failed, why, the valid options and what to do next (seed 000's
  rewrite that took self-repair from 0/20 to 17/20).
A missing argument and a wrong argument read differently in both styles.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from errorflow.core.redact import redact, redact_obj
from errorflow.core.taxonomy import RETRYABLE, ErrorCode
from errorflow.policies.classify import ArgumentProblem, Failure

MAX_OPTIONS = 20

#: The argument facts of an invalid_args failure that has none (an HTTP 400/422): the
#: observation still names every argument key, with nothing in it.
_NO_DETAILS = ArgumentProblem()


class Observation(TypedDict, total=False):
    """Every key a model-facing observation may have (what the functions below return)."""

    ok: bool
    tool: str
    result: object
    error: str
    code: str
    message: str
    retryable: bool
    retry_after_s: float | None
    suggestion: str
    field: str | None
    constraint: str | None
    received: object
    options: list[str]
    failed_items: list[str]


_SUGGESTIONS: dict[ErrorCode, str] = {
    ErrorCode.TRANSIENT: "Temporary upstream failure; the call may succeed if retried later.",
    ErrorCode.TIMEOUT: "The tool did not answer in time; retry later or narrow the request.",
    ErrorCode.RATE_LIMIT: "Rate limited; wait retry_after_s seconds before calling again.",
    ErrorCode.PERMISSION_DENIED: "Credentials are not accepted; do not retry. Report that "
    "access failed so a person can re-authorise.",
    ErrorCode.NOT_FOUND: "The resource does not exist; do not retry the same request.",
    ErrorCode.BUSINESS_RULE: "The request was refused by a business rule; change the plan.",
    ErrorCode.EMPTY_RESULT: "The call worked but found nothing; rephrase or report no data.",
    ErrorCode.PARTIAL_SUCCESS: "Some items failed; use the successful ones and report the rest.",
    ErrorCode.UNKNOWN_TOOL: "Call one of the listed tools.",
    ErrorCode.CIRCUIT_OPEN: "This tool is failing repeatedly and is paused; use another "
    "route or report the failure.",
    ErrorCode.REPEATED_CALL_BLOCKED: "You made the same call several times with the same "
    "result; stop repeating it and report what you tried.",
    ErrorCode.CONSECUTIVE_FAILURES: "This tool keeps failing; stop calling it and report.",
    ErrorCode.RETRIES_EXHAUSTED: "Retried without success; report the failure.",
    ErrorCode.BUDGET_EXHAUSTED: "The budget for this task is spent; finish with what you have.",
}


def observe_success(
    tool: str,
    value: Any,
    soft: Failure | None = None,
    *,
    style: Literal["raw", "actionable"] = "raw",
    tell_class: bool = False,
) -> dict[str, Any]:
    """The observation for a call that answered. A `soft` failure (empty result, partial
    success) is flagged: failed batch items always, since they are data the model needs;
    the class when it is told classes; message and suggestion in the actionable style."""
    obs: Observation = {"ok": True, "tool": tool, "result": value}
    if soft is not None:
        if soft.code is ErrorCode.PARTIAL_SUCCESS or style == "actionable" or tell_class:
            obs["code"] = soft.code.value
        if soft.item_errors:
            obs["failed_items"] = sorted(soft.item_errors)
        if style == "actionable":
            obs["message"] = _message(soft)
            obs["suggestion"] = _suggestion(soft)
    return dict(redact_obj(obs))


def observe_failure(
    failure: Failure, style: Literal["raw", "actionable"], *, tell_class: bool
) -> dict[str, Any]:
    """The model-facing observation for a failure."""
    if style == "raw":
        text = failure.raw
        if failure.attempts > 1:
            text = f"tool failed after {failure.attempts} attempts: {text}"
        plain: Observation = {"ok": False, "tool": failure.tool, "error": text}
        if tell_class:
            plain["code"] = failure.code.value
            plain["retryable"] = failure.code in RETRYABLE
        return dict(redact_obj(plain))
    obs: Observation = {
        "ok": False,
        "tool": failure.tool,
        "code": failure.code.value,
        "message": _message(failure),
        "retryable": failure.code in RETRYABLE,
        "retry_after_s": failure.retry_after_s,
        "suggestion": _suggestion(failure),
    }
    if failure.code is ErrorCode.INVALID_ARGS:
        arg = failure.argument or _NO_DETAILS
        obs["field"] = arg.field
        obs["constraint"] = arg.constraint
        obs["received"] = None if arg.missing else arg.received
        if failure.options:
            obs["options"] = list(failure.options[:MAX_OPTIONS])
    elif failure.code is ErrorCode.UNKNOWN_TOOL and failure.options:
        obs["options"] = list(failure.options[:MAX_OPTIONS])  # the tools there are
    elif failure.code is ErrorCode.NOT_FOUND and failure.argument is not None:
        # A key with no record (a declared lookup): which argument, and the keys there are.
        obs["field"] = failure.argument.field
        obs["received"] = failure.argument.received
        if failure.options:
            obs["options"] = list(failure.options[:MAX_OPTIONS])
    if failure.item_errors:
        obs["failed_items"] = sorted(failure.item_errors)
    # Everything model-facing is redacted, options and suggestions included.
    return dict(redact_obj(obs))


def _message(f: Failure) -> str:
    if f.code is ErrorCode.INVALID_ARGS:
        arg = f.argument or _NO_DETAILS
        if arg.missing:
            return f"Required argument '{arg.field}' is missing from the call to {f.tool}."
        if arg.unexpected:
            return f"'{arg.field}' is not an argument of {f.tool}."
        received = redact(str(arg.received))[:80]
        return f"Argument '{arg.field}' of {f.tool} is not valid: received '{received}'."
    if f.code is ErrorCode.NOT_FOUND and f.argument is not None:
        received = redact(str(f.argument.received))[:80]
        return f"{f.tool} has no record for '{f.argument.field}' = '{received}'."
    if f.code is ErrorCode.PARTIAL_SUCCESS:
        return f"{f.tool}: {len(f.item_errors)} item(s) failed; the others succeeded."
    if f.code is ErrorCode.BUSINESS_RULE:
        return f"{f.tool} refused the request: {redact(f.reason or 'business rule')}."
    if f.code is ErrorCode.EMPTY_RESULT:
        return f"{f.tool} answered, but the result is empty."
    attempts = f" after {f.attempts} attempts" if f.attempts > 1 else ""
    return f"{f.tool} failed ({f.code.value}){attempts}."


def _suggestion(f: Failure) -> str:
    if f.code is ErrorCode.INVALID_ARGS:
        arg = f.argument or _NO_DETAILS
        if arg.missing:
            return f"Call {f.tool} again and include '{arg.field}'."
        if arg.unexpected:
            allowed = ", ".join(f.options)
            return f"Call {f.tool} again without '{arg.field}'; its arguments are: {allowed}."
        if f.options:
            shown = ", ".join(f.options[:MAX_OPTIONS])
            return f"Call {f.tool} again with '{arg.field}' set to one of: {shown}."
        return f"Call {f.tool} again with a valid '{arg.field}' ({arg.constraint})."
    if f.code is ErrorCode.NOT_FOUND and f.argument is not None and f.options:
        shown = ", ".join(f.options[:MAX_OPTIONS])
        return f"Call {f.tool} again with '{f.argument.field}' set to one of: {shown}."
    return _SUGGESTIONS.get(f.code, "Report the failure.")
