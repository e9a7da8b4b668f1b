"""Exceptions raised by real client libraries (httpx, requests, aiohttp, the builtins) →
one error code, an HTTP status and a Retry-After when the exception carries them.

A user's Python tool wraps real code, so its failures arrive as that code's own
exceptions. They are classified by TYPE, never by message text: the classes of the
exception (`type(exc).__mro__`) are looked up by (top-level package, class name), most
specific first, so no library is imported here (policies stay pure, and a library that
is not installed simply never matches). HTTP errors read their status from the
attributes the library sets (`.response.status_code`, aiohttp's `.status`) and the
code comes from `classify_http`, exactly as for errorflow's own simulated tools.

Decisions worth knowing:

- `ValueError` and `TypeError` stay `internal_error`. A Python tool's arguments are
  validated against its schema before it runs, so whatever the agent could get wrong
  is already reported as `invalid_args` with the field at fault; an exception after
  that is the tool's own (TypeError: a bug; ValueError includes JSONDecodeError and
  UnicodeDecodeError from a bad response, which re-arguing cannot cure). A tool that
  refuses a value should declare it in its schema (enum, range) or return a business
  failure (`{"ok": false, "reason": ...}`).
- A connect timeout of httpx or requests is `timeout` (the library says so), while
  errorflow's own simulated `ConnectTimeout` stays `transient` (errorflow.policies.classify).
- An `OSError` that is none of the builtin subclasses counts as `transient` only when its
  errno says the network is at fault (unreachable, down, reset); anything else (disk
  full, a bad file descriptor) is `internal_error`. DNS failures (`socket.gaierror`)
  are `transient`.
- Retry-After is honoured in its delta-seconds form only: the HTTP-date form needs a
  clock, which a pure policy does not have.
- An exception none of the rules knows is classified by an integer `status_code`
  attribute if it has one (SDKs such as anthropic's and openai's set it), and
  otherwise by its explicit cause (`raise ToolError(...) from httpx_error`).
"""

from __future__ import annotations

import errno
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from errorflow.core.taxonomy import ErrorCode, classify_http

#: A rule: a code, or "http" (read the status the exception carries), or "errno"
#: (a plain OSError: decide by its errno).
_Rule = ErrorCode | Literal["http", "errno"]

_T, _TO = ErrorCode.TRANSIENT, ErrorCode.TIMEOUT
#: Keyed by (top-level package, class name). The first class of the MRO found here
#: decides, so a subclass listed here overrides its base (requests' ConnectTimeout is
#: both a ConnectionError and a Timeout: it is listed itself).
_RULES: Final[Mapping[tuple[str, str], _Rule]] = {
    # httpx: TimeoutException covers ConnectTimeout, ReadTimeout, WriteTimeout, PoolTimeout;
    # NetworkError covers ConnectError, ReadError, WriteError, CloseError.
    ("httpx", "HTTPStatusError"): "http",
    ("httpx", "TimeoutException"): _TO,
    ("httpx", "NetworkError"): _T,
    ("httpx", "RemoteProtocolError"): _T,
    ("httpx", "ProxyError"): _T,
    # requests (its exceptions are OSErrors, so they must win over the builtin rules)
    ("requests", "HTTPError"): "http",
    ("requests", "ConnectTimeout"): _TO,
    ("requests", "Timeout"): _TO,
    ("requests", "ConnectionError"): _T,
    ("requests", "ChunkedEncodingError"): _T,  # the connection broke mid-body
    # aiohttp: ServerTimeoutError is also a ClientConnectionError (listed first in its MRO)
    ("aiohttp", "ClientResponseError"): "http",
    ("aiohttp", "ServerTimeoutError"): _TO,
    ("aiohttp", "ClientConnectionError"): _T,
    ("aiohttp", "ClientPayloadError"): _T,
    # the standard library (asyncio.TimeoutError is builtins.TimeoutError since 3.11)
    ("socket", "gaierror"): _T,
    ("builtins", "ConnectionError"): _T,
    ("builtins", "TimeoutError"): _TO,
    ("builtins", "PermissionError"): ErrorCode.PERMISSION_DENIED,
    ("builtins", "FileNotFoundError"): ErrorCode.NOT_FOUND,
    ("builtins", "LookupError"): ErrorCode.NOT_FOUND,  # KeyError, IndexError
    ("builtins", "OSError"): "errno",
}

#: errnos of a plain OSError that mean the network, not the tool, failed. (ECONNRESET,
#: ECONNREFUSED, EPIPE and ETIMEDOUT never get here: OSError() builds the
#: ConnectionError / TimeoutError subclasses for those itself.)
_NETWORK_ERRNOS: Final[frozenset[int]] = frozenset(
    getattr(errno, name)
    for name in (
        "ENETDOWN",
        "ENETUNREACH",
        "ENETRESET",
        "EHOSTDOWN",
        "EHOSTUNREACH",
        "ENOTCONN",
        "ESHUTDOWN",
        "EADDRNOTAVAIL",
    )
    if hasattr(errno, name)
)
_MAX_CAUSES = 8  # how far an explicit `raise ... from` chain is followed


@dataclass(frozen=True, slots=True)
class ForeignError:
    """What a library's exception says about the failure."""

    code: ErrorCode
    http_status: int | None = None
    retry_after_s: float | None = None


def classify_foreign(exc: BaseException) -> ForeignError | None:
    """The class of a library's exception; None when nothing about it is known (the
    caller reports `internal_error`)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_CAUSES:
        seen.add(id(current))
        found = _by_type(current)
        if found is None:
            found = _by_status_attribute(current)
        if found is not None:
            return found
        current = current.__cause__
    return None


def _by_type(exc: BaseException) -> ForeignError | None:
    for cls in type(exc).__mro__:
        rule = _RULES.get((cls.__module__.partition(".")[0], cls.__name__))
        if rule is None:
            continue
        if isinstance(rule, ErrorCode):
            return ForeignError(rule)
        found = _by_http(exc) if rule == "http" else _by_errno(exc)
        if found is not None:
            return found
        # An HTTP error without a status (built by hand) or an OSError whose errno says
        # nothing: the next, more general class may still know.
    return None


def _by_errno(exc: BaseException) -> ForeignError | None:
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code in _NETWORK_ERRNOS:
        return ForeignError(ErrorCode.TRANSIENT)
    return None


def _by_http(exc: BaseException) -> ForeignError | None:
    """httpx / requests: `.response.status_code` and `.response.headers`; aiohttp:
    `.status` and `.headers` on the exception itself."""
    response = _attr(exc, "response")
    status = _status(_attr(response, "status_code"))
    headers = _attr(response, "headers")
    if status is None:
        status = _status(_attr(exc, "status"))
        headers = _attr(exc, "headers")
    if status is None:
        return None
    code = classify_http(status) or ErrorCode.INTERNAL_ERROR  # a 2xx is not a failure class
    return ForeignError(code, status, retry_after_seconds(headers))


def _by_status_attribute(exc: BaseException) -> ForeignError | None:
    """An SDK's own error type carrying `status_code` (anthropic, openai, …)."""
    status = _status(_attr(exc, "status_code"))
    if status is None:
        status = _status(_attr(_attr(exc, "response"), "status_code"))
    if status is None:
        return None
    code = classify_http(status) or ErrorCode.INTERNAL_ERROR
    return ForeignError(code, status, retry_after_seconds(_attr(_attr(exc, "response"), "headers")))


def retry_after_seconds(headers: object) -> float | None:
    """A Retry-After header in seconds (delta-seconds form), from any mapping-like
    headers object (httpx.Headers, requests' CaseInsensitiveDict, aiohttp's CIMultiDict,
    a plain dict); None when absent or not a non-negative number."""
    get = _attr(headers, "get")
    if not callable(get):
        return None
    try:
        value = get("retry-after")
        if value is None:
            value = get("Retry-After")  # a plain, case-sensitive dict
    except Exception:  # a headers object that cannot be read says nothing
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # the HTTP-date form: no clock here to subtract from
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _status(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


def _attr(obj: object, name: str) -> object:
    """getattr that never raises: a property of a half-built exception may."""
    if obj is None:
        return None
    try:
        return getattr(obj, name, None)
    except Exception:
        return None
