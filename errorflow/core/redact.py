"""Redaction: secrets, connection strings and absolute paths never leave the trace.

Applied to every string on its way to a model, to the bus, or to a log. The patterns
are deliberately broad (a false positive costs a few characters of context; a false
negative leaks a credential). `redact_obj` also blanks string values whose key names a
secret (``{"password": "..."}``), whatever the value looks like.

`might_hold_secret` is the cheap question asked first (by `redact` itself, by every
envelope sent and every row stored: errorflow.bus.redaction): one search for a part
that every match of a pattern here contains. It never says no where `redact` would
change something, so a text it clears is left as it is without running the patterns.
`redact_json` redacts JSON text as data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from errorflow.core.short_memo import ShortMemo

# Key names that say "the value is a secret" (key=value text and mapping keys).
_SECRET_KEY = (
    r"[\w\-]*(?:api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|secret|token"
    r"|passw(?:or)?d|pwd|authorization|credentials?|cookie|signature)"
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
     "credential", "credentials", "auth", "signature")
)  # fmt: skip  # `tokens` (input_tokens=120) is a count, not a secret
# Parts are joined by `_` or `-`, or camelCase (AccountKey=, dbPassword=).
_PARTS = re.compile(r"[_\-]|(?<=[a-z0-9])(?=[A-Z])")


def _ends_secret(name: str) -> bool:
    return _SECRET_KEY_NAME.fullmatch(name) is not None


def _has_secret_part(name: str) -> bool:
    return not _ENV_SECRET_WORDS.isdisjoint(part.lower() for part in _PARTS.split(name))


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


_PEM = re.compile(  # PEM and PGP private keys, to their end or the end of the text
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)"
)
# scheme://[user]:password@host (database and broker URLs; redis://:pw@host too), and
# scheme://TOKEN@host (a token as the user, 16 characters or more: git@ and ftp@ stay):
# found by their `://`, the scheme read backwards from it (a pattern that began with
# the scheme tried every `.` of a long `a.a.a...` as its start: 3 s for 64 KiB).
_URL_REST = re.compile(r"://(?:[^\s/@:'\"]*:[^\s/@'\"]+|[^\s/@:'\"]{16,})@[^\s'\"]+")
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
    # API keys and tokens by their vendor prefix: OpenAI and Anthropic sk-..., Stripe
    # sk_/pk_/rk_live_..., GitHub ghp_/gho_/ghu_/ghs_/ghr_/github_pat_, Slack xox*- and
    # xapp-, GitLab glpat-, npm_, PyPI pypi-, Hugging Face hf_, Stripe webhooks whsec_,
    # Shopify shpat_, DigitalOcean dop_v1_, Google ya29. and AIza, SendGrid SG., AWS
    # AKIA/ASIA; lengths as the vendors make them, so that a name (pk_customer_id) is
    # not taken for one
    (re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{8,}"), "[REDACTED_KEY]"),
    (re.compile(r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}"), "[REDACTED_KEY]"),
    (
        re.compile(r"\b(?:gh[pousr]|github_pat|xox[a-z]|xapp)[_\-][A-Za-z0-9_\-]{8,}"),
        "[REDACTED_KEY]",
    ),
    (
        re.compile(
            r"\b(?:gl(?:pat|dt|ptt|rt|cbt|ft|soat)-[A-Za-z0-9_\-]{20,}|npm_[A-Za-z0-9]{30,}"
            r"|hf_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_\-]{50,}|whsec_[A-Za-z0-9+/=]{24,}"
            r"|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32,}|do[opr]_v1_[a-f0-9]{64})"
        ),
        "[REDACTED_KEY]",
    ),
    (re.compile(r"\bya29\.[A-Za-z0-9_\-]{16,}"), "[REDACTED_KEY]"),
    (re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"), "[REDACTED_KEY]"),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{12,}"), "[REDACTED_KEY]"),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"), "[REDACTED_KEY]"),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-+/=]{8,}"), "Bearer [REDACTED]"),
    # JWTs (an unsigned one ends in its second dot)
    (
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
        "[REDACTED_JWT]",
    ),
]
# absolute paths (POSIX and Windows), after the pairs
_PATHS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?<![\w.:/])/(?:[\w.\-@+~%]+/)+[\w.\-@+~%]*"), "[PATH]"),
    (re.compile(r"\b[A-Za-z]:\\(?:[\w.\- ]+\\)*[\w.\-]*"), "[PATH]"),
]

_SECRET_KEY_NAME = re.compile(rf"(?i){_SECRET_KEY}")


#: The longest text or key name kept by the memos below: a run repeats short ones, and
#: hostile traffic full of long distinct ones must not fill memory.
MEMO_LONGEST = 2048


def redact(text: str) -> str:
    """Pure, and called with the same few error texts again and again: memoised (up to
    `MEMO_LONGEST`). A text with no clue of a secret in it (`might_hold_secret`) is
    returned as it is."""
    return _REDACTED.ask(text)


def _redacted(text: str) -> str:
    return _patterns_applied(text) if might_hold_secret(text) else text


_REDACTED = ShortMemo(_redacted, MEMO_LONGEST)


def _patterns_applied(text: str) -> str:
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
    return isinstance(key, str) and _SECRET_NAME.ask(key)


def _secret_name(key: str) -> bool:
    return _SECRET_KEY_NAME.fullmatch(key) is not None


#: A run's mappings use the same few keys again and again.
_SECRET_NAME = ShortMemo(_secret_name, MEMO_LONGEST)


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


def redact_json(text: str) -> str:
    """JSON text with every string in it redacted (`redact_obj`, on the data: redacting
    the text itself could break its escapes); `text` itself when it has no clue of a
    secret in it, which costs one search, not a parse."""
    if not might_hold_secret(text):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return redact(text)
    clean = redact_obj(value)
    return text if clean == value else json.dumps(clean, ensure_ascii=False, separators=(",", ":"))


# -- the pre-check ----------------------------------------------------------------------
#
# Theory of operation. `might_hold_secret` must never say no where `redact` (or
# `redact_obj`, for a mapping key) would change something, and must cost little on the
# clean envelopes that are nearly all the traffic. So it looks for literals that every
# match of a pattern above contains (a vendor prefix, a secret word a pair's name ends
# in, `://`, a path's `/`, ...) with one search. Python's regex engine spends about 25 ns
# per position on an alternation of literals but skips ahead in C to the characters a
# pattern can begin with, so each literal is looked for at its rarest character
# (`_RARITY`) and what precedes that character is checked behind it. Nothing is checked
# before a literal's first character except the word start of `sk-` and its kin, which
# knows JSON's escapes: the search holds on JSON text too, where `\n` or `\"` can stand
# before a string's first word (a look-ahead is safe: an escape starts with `\`).

#: Lowercase characters and punctuation from the rarest to the most common in the
#: bundled scenarios' envelopes; capitals are rarer than all of them, and any other
#: character counts as common.
_RARITY = "jzxwhqmgy.vk-_ubfplosndcitare"
#: Characters that Python's case-insensitive matching takes for an ASCII letter.
_FOLDS = {"k": "kK\u212a", "s": "sS\u017f", "i": "iI\u0130\u0131"}
_DASH = r"[\-_]"
_NOT_NAME = "(?![a-z0-9])"  # case-sensitive: a camelCase name goes on in a capital
_SPACE = r"(?:\s|\\|[^\x00-\x7f])"  # whitespace, an escape, or what may be either


@dataclass(frozen=True)
class _Clue:
    """A literal that every match of one pattern contains: `text` (in any case if
    `fold`), after one of `before` (if any) and followed by `after` (a pattern); if
    `word`, not after a word character."""

    text: str
    after: str = ""
    before: tuple[str, ...] = ()
    fold: bool = False
    word: bool = False


def _ends(*words: str) -> list[_Clue]:
    return [_Clue(w, _NOT_NAME, fold=True) for w in words]


#: Vendor prefixes (sk-, ghp_, xoxb-, glpat-, AKIA, eyJ, ...), PEM, and `Bearer `.
_PREFIXES = [
    *(_Clue(t, _DASH, word=True) for t in ("sk", "pk", "rk")),
    _Clue("gh", rf"[pousr]{_DASH}"),
    _Clue("gl", rf"(?:pat|dt|ptt|rt|cbt|ft|soat){_DASH}"),
    _Clue("shp", "(?:at|ss|ca|pa)_"),
    *map(_Clue, ("github_pat", "xox", "xapp", "npm_", "hf_", "pypi-", "whsec_", "_v1_")),
    *map(_Clue, ("ya29.", "SG.", "AKIA", "ASIA", "AIza", "eyJ", "-----BEGIN ")),
    _Clue("bearer", _SPACE, fold=True),
]
#: The secret words a pair's name (or a mapping key) ends in.
_NAME_ENDS = [
    _Clue("key", _NOT_NAME, ("api_", "api-", "api", "access_", "access-", "access",
                             "private_", "private-", "private"), fold=True),
    *_ends("secret", "token", "passwd", "password", "pwd", "authorization", "credential"),
    *_ends("credentials", "cookie", "signature"),
]  # fmt: skip
#: The secret words of an environment-style name (one of its parts).
_ENV_PARTS = _ends(
    "key", "secret", "secrets", "token", "pass", "passwd", "password", "passphrase", "pwd",
    "credential", "credentials", "auth", "signature",
)  # fmt: skip


def _char(c: str, fold: bool) -> str:
    if not (fold and c.isalpha()):
        return re.escape(c)
    return f"[{_FOLDS.get(c, c + c.upper())}]"


def _rank(c: str, fold: bool) -> int:
    if c.isupper() and not fold:
        return -1
    return _RARITY.find(c) if c in _RARITY else len(_RARITY)


def _clue_pattern(clues: list[_Clue]) -> str:
    """One alternation: each clue behind its rarest character, one group a character."""
    groups: dict[str, list[str]] = {}
    for clue in clues:
        text, fold = clue.text, clue.fold
        at = min(range(len(text)), key=lambda i: _rank(text[i], fold))
        upto = "".join(_char(c, fold) for c in text[: at + 1])
        behind = f"(?<={upto})" if at else ""
        if clue.before:
            behind += "(?:" + "|".join(f"(?<={_spell(b, fold)}{upto})" for b in clue.before) + ")"
        if clue.word:  # not after a word character, unless that ends an escape
            behind += (
                rf"(?:(?<![A-Za-z0-9_]{upto})|(?<=\\[nrtbf]{upto})"
                rf"|(?<=\\u[0-9a-fA-F]{{4}}{upto}))"
            )
        tail = behind + _spell(text[at + 1 :], fold) + clue.after
        anchor = text[at]
        for c in (
            _FOLDS.get(anchor, anchor + anchor.upper()) if fold and anchor.isalpha() else anchor
        ):
            groups.setdefault(c, []).append(tail)
    return "|".join(f"{re.escape(c)}(?:{'|'.join(tails)})" for c, tails in groups.items())


def _spell(text: str, fold: bool) -> str:
    return "".join(_char(c, fold) for c in text)


# `://`, paths (POSIX `/a/`, Windows `C:\`)
_CLUES = re.compile(_clue_pattern(_PREFIXES + _NAME_ENDS) + r"|/(?:/|[\w.\-@+~%]+/)|\\(?<=:\\)")
# A `=` whose value is not redacted already, and a secret part of a name anywhere.
_ENV_EQUALS = re.compile(r"""=(?!(?:\s|\\?["'])*\[(?:REDACTED|PATH))""")
_ENV_CLUES = re.compile(_clue_pattern(_ENV_PARTS))


def might_hold_secret(text: str, start: int = 0, end: int | None = None) -> bool:
    """False only if `redact` would change nothing in `text[start:end]` and no JSON
    mapping key in it names a secret: a few µs where the patterns take tens, so that
    every envelope and every stored row can be asked."""
    end = len(text) if end is None else end
    if _CLUES.search(text, start, end) is not None:
        return True
    equals = _ENV_EQUALS.search(text, start, end)
    return equals is not None and _ENV_CLUES.search(text, start, end) is not None
