"""OpenAI's rate-limit headers, said in the words the shared rate limiter reads.

The limiter (errorflow/models/rate_limit.py) reads a server's budgets from the
Messages API's `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` headers,
a reset being a moment (RFC 3339). OpenAI and the servers that copy it (LiteLLM, some
gateways) send the same budgets as `x-ratelimit-{limit,remaining,reset}-{requests,
tokens}`, a reset being a duration from now (`1s`, `6m0s`, `20ms`, `1h2m3.5s`, or plain
seconds). `limiter_headers` adds the first for each of the second, so that one limiter
serves both; a 429's `retry-after` needs nothing (the backend reads it).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime

#: The budgets OpenAI reports, by the last part of their header names.
_BUDGETS = ("requests", "tokens")
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_s(text: str) -> float | None:
    """Seconds in `6m0s`, `1.5s`, `20ms` or `12` (None: not a duration)."""
    text = text.strip().lower()
    try:
        value = float(text)
    except ValueError:
        parts = _PART.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            return None
        value = sum(float(n) * _UNIT_S[u] for n, u in parts)
    return value if math.isfinite(value) and value >= 0 else None


def limiter_headers(headers: Mapping[str, str], wall_now: float | None = None) -> dict[str, str]:
    """`headers` (lower-cased names) plus what their `x-ratelimit-*` say, as the
    limiter's `anthropic-ratelimit-*`."""
    out = dict(headers)
    now = time.time() if wall_now is None else wall_now
    for budget in _BUDGETS:
        for part in ("limit", "remaining"):
            value = headers.get(f"x-ratelimit-{part}-{budget}")
            if value is not None:
                out.setdefault(f"anthropic-ratelimit-{budget}-{part}", value)
        reset = headers.get(f"x-ratelimit-reset-{budget}")
        seconds = None if reset is None else duration_s(reset)
        if seconds is not None:
            moment = datetime.fromtimestamp(now + seconds, tz=UTC).isoformat()
            out.setdefault(f"anthropic-ratelimit-{budget}-reset", moment)
    return out
