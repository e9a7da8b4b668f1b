"""One cross-reference problem of a scenario, and the words for an unknown name: shared
by every module that checks what blocks say about each other (references,
discussion_checks, fault_checks, sweep_model)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic_core import InitErrorDetails, PydanticCustomError

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Reference:
    """One cross-reference problem: where, what is wrong, and the value found there."""

    loc: Loc
    message: str
    found: object

    def details(self) -> InitErrorDetails:
        error = PydanticCustomError("reference", self.message)
        return InitErrorDetails(type=error, loc=self.loc, input=self.found)


def unknown(what: str, name: str, known: Iterable[str]) -> str:
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return f"unknown {what} {name!r}; did you mean {close[0]!r}?"
    return f"unknown {what} {name!r}; expected one of: {', '.join(names) or '(none)'}"
