"""Redaction: secrets, connection strings and absolute paths never leave the trace.

Applied to every string on its way to a model, to the bus, or to a log. The patterns
are deliberately broad (a false positive costs a few characters of context; a false
negative leaks a credential). `redact_obj` also blanks string values whose key names a
secret (``{"password": "..."}``), whatever the value looks like.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

# Key names that say "the value is a secret" (key=value text and mapping keys).
_SECRET_KEY = (
    r"[\w\-]*(?:api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|secret|token"
    r"|passw(?:or)?d|pwd|authorization|credentials?|cookie)"
)

# Pairs whose value is a secret, by their name, in two forms. A name is matched loosely
# (a run of name characters) and checked in Python: a pattern that found the secret word
# inside the name would backtrack quadratically on a long run of name characters (64 KiB
# of `a_`, as a rejected message may hold, took minutes).
#
# key=value, key: value, "key": "value" whose key ends in a secret word (db_password=,
# client_secret:, Authorization: Basic ...).
_KEY_NAME = re.compile(r"(?<![\w\-])([\w\-]+)['\"]?\s*[=:]\s*['\"]?")
_KEY_VALUE = re.compile(r"(?i)(?:(?:basic|bearer|digest|token)\s+)?[^\s'\",;&]+")
# Environment style, NAME=value where one part of NAME (parts joined by `_` or `-`) is a
# secret word: SECRET_KEY=, AWS_SECRET_ACCESS_KEY=, DB_PASS=, AUTH= (`KEY` alone is not a
# word of the form above). Applied last: a value redacted already is left as it is.
_ENV_NAME = re.compile(r"(?<![A-Za-z0-9_\-])([A-Za-z0-9_\-]+)\s*=\s*['\"]?")
_ENV_VALUE = re.compile(r"(?!\[(?:REDACTED|PATH))[^\s'\",;&]+")
_ENV_SECRET_WORDS = frozenset(
    ("key", "secret", "secrets", "token", "password", "passwd", "pass", "passphrase", "pwd",
     "credential", "credentials", "auth")
)  # fmt: skip  # `tokens` (input_tokens=120) is a count, not a secret
_PARTS = re.compile(r"[_\-]")


def _ends_secret(name: str) -> bool:
    return _SECRET_KEY_NAME.fullmatch(name) is not None


def _has_secret_part(name: str) -> bool:
    return not _ENV_SECRET_WORDS.isdisjoint(_PARTS.split(name.lower()))


def _redact_pairs(
    text: str, names: re.Pattern[str], secret: Callable[[str], bool], values: re.Pattern[str]
) -> str:
    """Each name and separator found; the value after a secret name redacted. A scan, not
    one `sub`: a value (`x=SECRET_KEY=abc`) may hold the next pair."""
    kept: list[str] = []
    done = pos = 0
    while (name := names.search(text, pos)) is not None:
        pos = name.end()
        if not secret(name.group(1)):
            continue
        value = values.match(text, pos)
        if value is not None:
            kept += (text[done:pos], "[REDACTED]")
            done = pos = value.end()
    return "".join(kept) + text[done:] if kept else text


_PEM = re.compile(  # PEM private keys
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
)
# scheme://[user]:password@host (database and broker URLs; redis://:pw@host too): found
# by their `://`, the scheme read backwards from it (a pattern that began with the
# scheme tried every `.` of a long `a.a.a...` as its start: 3 s for 64 KiB).
_URL_REST = re.compile(r"://[^\s/@:'\"]*:[^\s/@'\"]+@[^\s'\"]+")
_SCHEME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _redact_urls(text: str) -> str:
    kept: list[str] = []
    done = pos = 0
    while (rest := _URL_REST.search(text, pos)) is not None:
        at = start = rest.start()
        while start > done and text[start - 1] in _SCHEME:
            start -= 1
        # where `\b[a-zA-Z]` would begin it: the first letter not after a word character
        begin = next((i for i in range(start, at) if _url_start(text, i)), None)
        if begin is None:
            pos = at + 1
            continue
        kept += (text[done:begin], "[REDACTED_URL]")
        done = pos = rest.end()
    return "".join(kept) + text[done:] if kept else text


def _url_start(text: str, i: int) -> bool:
    c = text[i]
    return c.isascii() and c.isalpha() and (i == 0 or not _WORD.match(text, i - 1))


_WORD = re.compile(r"\w")

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
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
]
# absolute paths (POSIX and Windows), after the pairs
_PATHS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?<![\w.:/])/(?:[\w.\-@+~%]+/)+[\w.\-@+~%]*"), "[PATH]"),
    (re.compile(r"\b[A-Za-z]:\\(?:[\w.\- ]+\\)*[\w.\-]*"), "[PATH]"),
]

_SECRET_KEY_NAME = re.compile(rf"(?i){_SECRET_KEY}")


@functools.lru_cache(maxsize=4096)
def redact(text: str) -> str:
    """Pure, and called with the same few error texts again and again: memoised."""
    text = _PEM.sub("[REDACTED_PRIVATE_KEY]", text)
    if "://" in text:
        text = _redact_urls(text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    if "=" in text or ":" in text:
        text = _redact_pairs(text, _KEY_NAME, _ends_secret, _KEY_VALUE)
    for pattern, replacement in _PATHS:
        text = pattern.sub(replacement, text)
    if "=" in text:
        text = _redact_pairs(text, _ENV_NAME, _has_secret_part, _ENV_VALUE)
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
