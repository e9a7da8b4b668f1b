"""What a failed call to a model server says, in the taxonomy's terms: a status's code,
a connection failure's cause, a 429's Retry-After. The same for every HTTP model API the
SDK backends speak (Anthropic Messages, OpenAI-compatible Chat Completions)."""

from __future__ import annotations

import logging
import math
import socket
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

from errorflow.core.taxonomy import ErrorCode

log = logging.getLogger(__name__)


#: Statuses of infrastructure that is wrong, named apart from the other refusals
#: (`refused_for_good`): the key refused, no such model. (429 and 529 are load.)
KEY_REFUSED = frozenset({401, 403})
NO_MODEL = 404

#: What a connection failure's cause says, in words (searched along the cause chain).
_CONNECTION_CAUSES: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (socket.gaierror, "host name not resolved"),
    (ConnectionAbortedError, "connection aborted"),
)


# --------------------------------------------------------------------------- errors


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP
    date); None when absent or unparseable."""
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            value = float(ms) / 1000.0
            if math.isfinite(value):
                return max(0.0, value)
    except (TypeError, ValueError):
        pass
    try:
        raw = headers.get("retry-after")
    except Exception:
        return None
    if raw is None:
        return None
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except (TypeError, ValueError):
        pass
    try:
        when = parsedate_to_datetime(str(raw))
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:  # pragma: no cover - older Pythons
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def connection_cause(exc: BaseException) -> str:
    """Why a connection failed, in words: the first known cause along the exception's
    chain (`ConnectionRefusedError` → "connection refused"), else the first cause's
    class name."""
    chain: list[BaseException] = []
    link = exc.__cause__ or exc.__context__
    while link is not None and link not in chain and len(chain) < 16:
        chain.append(link)
        link = link.__cause__ or link.__context__
    for cause in chain:
        for kind, words in _CONNECTION_CAUSES:
            if isinstance(cause, kind):
                return words
    return type(chain[0]).__name__ if chain else "unknown cause"


def server_address(host: str, port: int | None, scheme: str) -> str:
    """`host:port` of a model server (the scheme's default port when none is given)."""
    shown = f"[{host}]" if ":" in host else host  # an IPv6 literal
    return f"{shown}:{port or (443 if scheme == 'https' else 80)}"


def classify_status(status: int) -> ErrorCode:
    if status == 429:
        return ErrorCode.RATE_LIMIT
    if status == 408:
        return ErrorCode.TIMEOUT
    if status in (401, 402, 403):
        return ErrorCode.PERMISSION_DENIED
    if status == 409 or status >= 500:
        return ErrorCode.TRANSIENT  # 500, 502, 503, 504, 529 overloaded, 409 conflict
    return ErrorCode.MODEL_ERROR  # 400, 404, 413, 422 ...: the request itself is wrong
