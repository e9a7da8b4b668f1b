"""A pure function of a text, remembered for short texts only.

A run asks the same few short questions again and again (the same error to redact,
the same event's text to search, the same key names), so their answers are kept; a
text longer than `longest` is answered afresh and not kept, so hostile traffic full of
long distinct texts cannot fill memory (and at most `kept` answers are, the least
recently used dropped first).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: Answers kept by default: far more than the distinct short texts of a run.
KEPT = 4096


class ShortMemo(Generic[T]):
    __slots__ = ("_fn", "_longest", "_memo")

    def __init__(self, fn: Callable[[str], T], longest: int, kept: int = KEPT) -> None:
        self._fn = fn
        self._longest = longest
        self._memo = functools.lru_cache(maxsize=kept)(fn)

    def __call__(self, text: str) -> T:
        return self._memo(text) if len(text) <= self._longest else self._fn(text)

    def kept(self) -> int:
        """How many answers are kept now."""
        return self._memo.cache_info().currsize

    def clear(self) -> None:
        self._memo.cache_clear()

    def __repr__(self) -> str:
        info: Any = self._memo.cache_info()
        return f"ShortMemo({self._fn.__name__}, longest={self._longest}, {info})"
