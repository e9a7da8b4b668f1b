"""Redaction: secrets, connection strings and absolute paths never leave the trace.

Applied to every string on its way to a model, to the bus, or to a log. The patterns
are deliberately broad (a false positive costs a few characters of context; a false
negative leaks a credential). `redact_obj` also blanks string values whose key names a
secret (``{"password": "..."}``), whatever the value looks like.
"""

from __future__ import annotations

import functools
import re
from typing import Any

# Key names that say "the value is a secret" (key=value text and mapping keys).
_SECRET_KEY = (
    r"[\w\-]*(?:api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|secret|token"
    r"|passw(?:or)?d|pwd|authorization|credentials?|cookie)"
)

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private keys
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
        ),
        "[REDACTED_PRIVATE_KEY]",
    ),
    # scheme://[user]:password@host  (database and broker URLs; redis://:pw@host too)
    (
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/@:'\"]*:[^\s/@'\"]+@[^\s'\"]+"),
        "[REDACTED_URL]",
    ),
    # file:// URLs are paths
    (re.compile(r"\bfile://[^\s'\"]+"), "[PATH]"),
    # API keys and tokens: sk-..., sk-ant-..., sk_live_..., ghp_..., xoxb-..., AKIA..., AIza...
    (re.compile(r"\b(?:sk|pk|rk)[\-_](?:ant-)?[A-Za-z0-9_\-]{8,}"), "[REDACTED_KEY]"),
    (
        re.compile(r"\b(?:ghp|gho|ghs|ghu|github_pat|xox[abprs])[_\-][A-Za-z0-9_\-]{8,}"),
        "[REDACTED_KEY]",
    ),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{12,}"), "[REDACTED_KEY]"),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), "[REDACTED_KEY]"),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-+/=]{8,}"), "Bearer [REDACTED]"),
    (
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{4,}"),
        "[REDACTED_JWT]",
    ),
    # key=value, key: value, "key": "value" pairs whose key says secret (db_password=,
    # client_secret:, Authorization: Basic ...)
    (
        re.compile(
            rf"(?i)(?<![A-Za-z0-9])({_SECRET_KEY})(['\"]?\s*[=:]\s*['\"]?)"
            r"(?:(?:basic|bearer|digest|token)\s+)?[^\s'\",;&]+"
        ),
        r"\1\2[REDACTED]",
    ),
    # absolute paths (POSIX and Windows)
    (re.compile(r"(?<![\w.:/])/(?:[\w.\-@+~%]+/)+[\w.\-@+~%]*"), "[PATH]"),
    (re.compile(r"\b[A-Za-z]:\\(?:[\w.\- ]+\\)*[\w.\-]*"), "[PATH]"),
]

_SECRET_KEY_NAME = re.compile(rf"(?i){_SECRET_KEY}")


@functools.lru_cache(maxsize=4096)
def redact(text: str) -> str:
    """Pure, and called with the same few error texts again and again: memoised."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _secret_key(key: object) -> bool:
    return isinstance(key, str) and _SECRET_KEY_NAME.fullmatch(key) is not None


def redact_obj(value: Any) -> Any:
    """Redact every string inside a JSON-like value (mapping keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {
            redact_obj(k): "[REDACTED]" if _secret_key(k) and isinstance(v, str) else redact_obj(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [redact_obj(v) for v in value]
    return value
