"""Redaction: secrets, connection strings and absolute paths never leave the trace.

Applied to every string on its way to a model, to the bus, or to a log. The patterns
are deliberately broad (a false positive costs a few characters of context; a false
negative leaks a credential).
"""

from __future__ import annotations

import re
from typing import Any

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # scheme://user:password@host  (database and broker URLs)
    (
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/@:'\"]+:[^\s/@'\"]+@[^\s'\"]+"),
        "[REDACTED_URL]",
    ),
    # API keys and tokens: sk-..., sk-ant-..., ghp_..., xoxb-..., AKIA..., Bearer ...
    (re.compile(r"\b(?:sk|pk|rk)-(?:ant-)?[A-Za-z0-9_\-]{8,}"), "[REDACTED_KEY]"),
    (
        re.compile(r"\b(?:ghp|gho|ghs|github_pat|xox[abpr])[_\-][A-Za-z0-9_\-]{8,}"),
        "[REDACTED_KEY]",
    ),
    (re.compile(r"\bAKIA[0-9A-Z]{12,}"), "[REDACTED_KEY]"),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-]{8,}"), "Bearer [REDACTED]"),
    (
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{4,}"),
        "[REDACTED_JWT]",
    ),
    # key=value / key: value pairs whose key says secret
    (
        re.compile(
            r"(?i)\b(api[_-]?key|apikey|token|secret|password|passwd|pwd|authorization)"
            r"(\s*[=:]\s*)['\"]?[^\s'\",;]+"
        ),
        r"\1\2[REDACTED]",
    ),
    # absolute paths (POSIX and Windows)
    (re.compile(r"(?<![\w.:/])/(?:[\w.\-]+/)+[\w.\-]*"), "[PATH]"),
    (re.compile(r"\b[A-Za-z]:\\(?:[\w.\- ]+\\)*[\w.\-]*"), "[PATH]"),
]


def redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_obj(value: Any) -> Any:
    """Redact every string inside a JSON-like value."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_obj(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_obj(v) for v in value]
    return value
