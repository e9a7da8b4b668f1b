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
from typing import Generic, TypeVar

T = TypeVar("T")

#: Answers kept by default: far more than the distinct short texts of a run.
KEPT = 4096


class ShortMemo(Generic[T]):
    """`ask(text)` answers; it is a plain function (no `__call__` dispatch: it is asked
    for every envelope)."""

    __slots__ = ("_memo", "ask")

    def __init__(self, fn: Callable[[str], T], longest: int, kept: int = KEPT) -> None:
        memo = self._memo = functools.lru_cache(maxsize=kept)(fn)

        def ask(text: str) -> T:
            return memo(text) if len(text) <= longest else fn(text)

        self.ask: Callable[[str], T] = ask

    def size(self) -> int:
        """How many answers are kept now."""
        return self._memo.cache_info().currsize

    def clear(self) -> None:
        self._memo.cache_clear()
