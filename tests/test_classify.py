"""Classification at the tool edge: exception type and status decide, wording never does."""

from __future__ import annotations

import dataclasses
import json

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from errorflow.core.taxonomy import ErrorCode
from errorflow.core.tool_errors import (
    CallTimeout,
    ConnectTimeout,
    HTTPStatusError,
    SchemaViolation,
    UnknownTool,
    UnknownValue,
)
from errorflow.policies.classify import (
    ArgumentProblem,
    Failure,
    classify_body,
    classify_exception,
)

STATUS_CODES = {
    401: ErrorCode.PERMISSION_DENIED,
    403: ErrorCode.PERMISSION_DENIED,
    404: ErrorCode.NOT_FOUND,
    400: ErrorCode.INVALID_ARGS,
    422: ErrorCode.INVALID_ARGS,
    429: ErrorCode.RATE_LIMIT,
    408: ErrorCode.TIMEOUT,
    504: ErrorCode.TIMEOUT,
    500: ErrorCode.TRANSIENT,
    502: ErrorCode.TRANSIENT,
    503: ErrorCode.TRANSIENT,
    501: ErrorCode.BUSINESS_RULE,
    200: ErrorCode.INTERNAL_ERROR,  # a 2xx is not an exception a client raises
}


@pytest.mark.parametrize(("status", "code"), sorted(STATUS_CODES.items()))
def test_http_status_decides(status: int, code: ErrorCode) -> None:
    f = classify_exception("t", HTTPStatusError(status, f"HTTP {status}"))
    assert f.code is code and f.http_status == status and f.exc_type == "HTTPStatusError"
    assert f.tool == "t" and f.raw == f"HTTP {status}"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("permission denied", ErrorCode.TRANSIENT),
        ("403 Forbidden: invalid API key", ErrorCode.TRANSIENT),
        ("rate limit exceeded, Retry-After: 60", ErrorCode.TRANSIENT),
        ("timeout", ErrorCode.TRANSIENT),
        ("not found", ErrorCode.TRANSIENT),
    ],
)
def test_misleading_text_does_not_change_the_class(text: str, code: ErrorCode) -> None:
    assert classify_exception("t", HTTPStatusError(503, text)).code is code


@given(
    st.sampled_from(sorted(STATUS_CODES)),
    st.text(max_size=200),
    st.text(max_size=200),
)
def test_wording_never_matters(status: int, a: str, b: str) -> None:
    assert (
        classify_exception("t", HTTPStatusError(status, a)).code
        is classify_exception("t", HTTPStatusError(status, b)).code
    )
    for make in (ConnectTimeout, lambda t: CallTimeout(t, waited_s=1.0)):
        assert classify_exception("t", make(a)).code is classify_exception("t", make(b)).code


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (ConnectTimeout("Error: connect ETIMEDOUT 10.0.0.1:443"), ErrorCode.TRANSIENT),
        (ConnectTimeout("403 forbidden"), ErrorCode.TRANSIENT),
        (ConnectionResetError("reset"), ErrorCode.TRANSIENT),
        (CallTimeout("permission denied", waited_s=3), ErrorCode.TIMEOUT),
        (TimeoutError(), ErrorCode.TIMEOUT),
        (PermissionError("timeout"), ErrorCode.PERMISSION_DENIED),
        (FileNotFoundError("rate limit"), ErrorCode.NOT_FOUND),
        (KeyError("x"), ErrorCode.NOT_FOUND),
        (ValueError("HTTP 503 Service Unavailable"), ErrorCode.INTERNAL_ERROR),
        (RuntimeError("transient"), ErrorCode.INTERNAL_ERROR),
    ],
)
def test_exception_type_decides(exc: BaseException, code: ErrorCode) -> None:
    f = classify_exception("t", exc)
    assert f.code is code and f.exc_type == type(exc).__name__


def test_rate_limit_keeps_retry_after() -> None:
    f = classify_exception("t", HTTPStatusError(429, "slow down", 7.5))
    assert f.code is ErrorCode.RATE_LIMIT and f.retry_after_s == 7.5


def test_argument_errors_keep_their_details() -> None:
    f = classify_exception(
        "t",
        SchemaViolation("boom", field="name", constraint="required", received=None, missing=True),
    )
    assert f.argument is not None
    assert (f.code, f.argument.field, f.argument.constraint) == (
        ErrorCode.INVALID_ARGS,
        "name",
        "required",
    )
    assert f.argument.missing and not f.argument.unexpected and f.options == ()
    x = classify_exception(
        "t",
        SchemaViolation(
            "boom", field="v", constraint="c", received=True, options=["name"], unexpected=True
        ),
    )
    assert x.argument is not None and x.argument.unexpected and x.argument.received is True
    assert x.options == ("name",)
    u = classify_exception(
        "t", UnknownValue("ENOENT", field="name", received="rev", options=["a", "b"])
    )
    assert u.code is ErrorCode.INVALID_ARGS and u.options == ("a", "b")
    assert u.argument == ArgumentProblem("name", "must be one of the known values", "rev")
    assert not u.argument.missing
    t = classify_exception("t", UnknownTool("no tool", options=["x"]))
    assert t.code is ErrorCode.UNKNOWN_TOOL and t.options == ("x",) and t.argument is None


def test_body_classification() -> None:
    ok = classify_body("t", business_error=None, empty=False, item_errors={})
    assert ok is None
    br = classify_body("t", business_error='quota "Q3" closed', empty=False, item_errors={})
    assert br is not None and br.code is ErrorCode.BUSINESS_RULE and br.http_status == 200
    assert json.loads(br.raw) == {"success": False, "reason": 'quota "Q3" closed'}
    empty = classify_body("t", business_error=None, empty=True, item_errors={})
    assert empty is not None and empty.code is ErrorCode.EMPTY_RESULT
    part = classify_body("t", business_error=None, empty=False, item_errors={"d2": "HTTP 503"})
    assert part is not None and part.code is ErrorCode.PARTIAL_SUCCESS
    assert part.item_errors == {"d2": "HTTP 503"}
    # A refusal outranks everything else about the body.
    both = classify_body("t", business_error="no", empty=True, item_errors={"d": "x"})
    assert both is not None and both.code is ErrorCode.BUSINESS_RULE


def test_failure_is_frozen_and_counts_attempts_by_replace() -> None:
    f = classify_exception("t", HTTPStatusError(503, "HTTP 503"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.attempts = 3  # type: ignore[misc]
    again = dataclasses.replace(f, attempts=3)
    assert (f.attempts, again.attempts) == (1, 3) and again.code is f.code


def test_failure_keeps_the_positional_constructor() -> None:
    f = Failure(ErrorCode.TRANSIENT, "model", "boom", 529)
    assert (f.code, f.tool, f.raw, f.http_status) == (ErrorCode.TRANSIENT, "model", "boom", 529)
    assert f.argument is None and f.options == () and f.item_errors == {} and f.attempts == 1
    assert Failure(ErrorCode.RATE_LIMIT, "model", "x", http_status=429).http_status == 429


# -- exceptions that are not errorflow's own (a Python tool's libraries) --------------
def test_a_library_http_error_is_classified_by_its_status() -> None:
    request = httpx.Request("GET", "http://svc.test/")
    response = httpx.Response(429, request=request, headers={"Retry-After": "3"})
    exc = httpx.HTTPStatusError("slow down", request=request, response=response)
    f = classify_exception("api", exc)
    assert (f.code, f.http_status, f.retry_after_s) == (ErrorCode.RATE_LIMIT, 429, 3.0)
    assert (f.exc_type, f.raw) == ("HTTPStatusError", "HTTPStatusError: slow down")
    assert f.argument is None and f.options == ()


def test_own_connect_timeout_stays_transient_while_a_librarys_is_a_timeout() -> None:
    assert classify_exception("t", ConnectTimeout("ETIMEDOUT")).code is ErrorCode.TRANSIENT
    assert classify_exception("t", httpx.ConnectTimeout("timed out")).code is ErrorCode.TIMEOUT


@pytest.mark.parametrize(
    "exc",
    [
        TypeError("unsupported operand type(s)"),
        ValueError("quantity must be positive"),
        OSError(28, "No space left on device"),
        RuntimeError("503"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_tools_own_bug_is_internal_error(exc: BaseException) -> None:
    f = classify_exception("t", exc)
    assert (f.code, f.http_status, f.retry_after_s) == (ErrorCode.INTERNAL_ERROR, None, None)
    assert f.raw == f"{type(exc).__name__}: {exc}"
