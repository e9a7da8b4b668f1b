"""What a Python tool returned, as the JSON its answer travels as.

Anything JSON can hold passes (dicts, lists, tuples and sets, strings, numbers, booleans,
None; pydantic models, dataclasses, enums, dates and the like as pydantic writes them).
Anything else was given its `str()`: an object's default one holds its memory address,
so a deterministic tool never matched its own ground truth and every trial scored
contaminated; a NaN became `null`. Both are the tool's failure now, in words that say
what to return. So is an answer past what a task's needs may fetch (`MAX_FINDINGS_BYTES`,
half a bus message): on an in-process bus it went through, over a broker every message
that carried it was refused, and its trials waited out the trial timeout as bus faults.
"""

from __future__ import annotations

import math

from pydantic import JsonValue
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from errorflow.core.errors import ErrorflowError
from errorflow.scenario.spec.model import MAX_FINDINGS_BYTES


class UnusableAnswer(ErrorflowError, TypeError):
    """A Python tool returned something its answer cannot be (its failure:
    `internal_error`, as any exception of its code)."""


def json_answer(tool: str, raw: object) -> JsonValue:
    def plain(obj: object) -> object:
        """What pydantic has no JSON for: numpy's values as the Python ones they hold
        (`tolist()`: an array's list, a scalar's number or bool), anything else refused,
        named by its own type wherever it sits in the answer."""
        tolist = getattr(obj, "tolist", None)
        if callable(tolist):
            return tolist()
        where = "" if obj is raw else f" (in the {type(raw).__name__} it returned)"
        raise UnusableAnswer(
            f"{tool} returned a {type(obj).__name__}{where}, which is not JSON; return "
            "dicts, lists, strings, numbers, bools and None (or pydantic models, "
            "dataclasses, numpy values)"
        )

    try:
        value: JsonValue = to_jsonable_python(raw, fallback=plain)
    except PydanticSerializationError as exc:
        raise UnusableAnswer(f"{tool} returned what is not JSON ({exc})") from None
    if not _finite(value):
        raise UnusableAnswer(f"{tool} returned a NaN or infinite number, which is not JSON")
    size = len(to_json(value))
    if size > MAX_FINDINGS_BYTES:
        raise UnusableAnswer(
            f"{tool} returned {size:,} bytes of JSON; an answer travels in a bus message, "
            f"so it may be at most {MAX_FINDINGS_BYTES:,}"
        )
    return value


def _finite(value: JsonValue) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True
