"""What a Python tool returned, as the JSON its answer travels as.

Anything JSON can hold passes (dicts, lists, tuples and sets, strings, numbers, booleans,
None; pydantic models, dataclasses, enums, dates and the like as pydantic writes them).
Anything else was given its `str()`: an object's default one holds its memory address,
so a deterministic tool never matched its own ground truth and every trial scored
contaminated; a NaN became `null`. Both are the tool's failure now, in words that say
what to return.
"""

from __future__ import annotations

import math

from pydantic import JsonValue
from pydantic_core import PydanticSerializationError, to_jsonable_python


class NotJson(TypeError):
    """A Python tool returned something its answer cannot be (its failure:
    `internal_error`, as any exception of its code)."""


def json_answer(tool: str, raw: object) -> JsonValue:
    try:
        value: JsonValue = to_jsonable_python(raw)
    except PydanticSerializationError:
        raise NotJson(
            f"{tool} returned a {type(raw).__name__}, which is not JSON; return a dict, "
            "list, str, number, bool or None (or a pydantic model or dataclass)"
        ) from None
    if not _finite(value):
        raise NotJson(f"{tool} returned a NaN or infinite number, which is not JSON")
    return value


def _finite(value: JsonValue) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True
