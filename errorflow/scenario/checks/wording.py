"""How values and names read in a problem message: "'many' (a string)", "an empty list",
"did you mean 'trials'?"."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


def kind_of(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def found(value: object) -> str:
    """How a found value reads in a message: "'many' (a string)", "an empty list"."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):  # as YAML writes it, not Python's True
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, dict | list):
        return f"{kind_of(value)} {short(value)}" if value else f"an empty {kind_of(value)[2:]}"
    return f"{short(value)} ({kind_of(value)})"


def closest(word: object, options: Iterable[str]) -> str | None:
    """The valid name a typo most likely meant: a close spelling, or the one name that
    starts with what was written (`p_heed` → `p_heed_upstream`)."""
    names, text = list(options), str(word)
    close = difflib.get_close_matches(text, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    starts = [n for n in names if n.startswith(text) or text.startswith(n)]
    return starts[0] if len(starts) == 1 and len(text) >= 3 else None


def unknown_name(what: str, name: object, known: Iterable[str]) -> str:
    names = list(known)
    close = closest(name, names)
    if close:
        return f"unknown {what} {name!r}; did you mean {close!r}?"
    return f"unknown {what} {name!r}; expected one of: {', '.join(names)}"


def quoted_options(expected: str) -> list[str]:
    return re.findall(r"'([^']*)'", expected)


def num(x: object) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)
