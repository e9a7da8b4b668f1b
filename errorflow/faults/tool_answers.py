"""What the silent tool faults make of a right answer, and what `malformed_call` makes
of the model's call: pure functions of the value (and, where a choice is made, a draw).

A wrong answer is never empty (an empty answer is the visible `empty` fault): a list
keeps at least one element and a string at least one character.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import JsonValue


def stale(value: JsonValue, drift: float, drop: int) -> JsonValue:
    """An out-of-date answer: numbers off by `drift` and lists missing their last
    `drop` elements (text stays as it was)."""
    return _leaves(
        value,
        number=lambda x: _moved(x, x * (1 + drift)),
        seq=lambda xs: xs[: max(1, len(xs) - drop)],
    )


def corrupt(value: JsonValue, mode: str | None, rng: random.Random) -> JsonValue:
    """A schema-valid but corrupted answer: numbers ×1000 (`unit`), two adjacent digits
    transposed in one value (`digits`), text and lists cut in half (`truncate`); by
    default `unit` for numbers and `truncate` for the rest."""
    if mode == "digits":
        return _transposed(value, rng)
    scale = mode in (None, "unit")
    cut = mode in (None, "truncate")
    return _leaves(
        value,
        number=(lambda x: x * 1000) if scale else None,
        text=(lambda t: t[: max(1, len(t) // 2)]) if cut else None,
        seq=(lambda xs: xs[: max(1, len(xs) // 2)]) if cut else None,
    )


def relabelled(value: JsonValue, asked: JsonValue) -> JsonValue:
    """A batch answer about other items, filed under the items asked for (the caller
    sees its own ids, with other records behind them)."""
    if not isinstance(value, dict) or not isinstance(asked, dict):
        return value
    others = list(value.values())
    return {k: others[i % len(others)] for i, k in enumerate(asked)} if others else value


def mangled(
    args: Mapping[str, object], mode: str | None, required: Sequence[str]
) -> dict[str, object] | str:
    """The model's call mangled: its JSON truncated (the default), a field the schema
    requires dropped or retyped (an optional one would not fail), an extra field added."""
    first = next((k for k in args if k in required), next(iter(args), None))
    if mode == "truncated_json" or mode is None:
        text = json.dumps(dict(args), ensure_ascii=False)
        return text[: max(1, len(text) // 2)]
    out = dict(args)
    if mode == "missing_field" and first is not None:
        out.pop(first)
    elif mode == "wrong_type" and first is not None:
        out[first] = 12345 if isinstance(out[first], str) else "12345"
    elif mode == "extra_field":
        out["verbose"] = True
    return out


def _moved(old: float, new: float) -> float:
    """`new`, an integer when `old` was one and rounding still changes it."""
    if isinstance(old, int) and round(new) != old:
        return round(new)
    return new


def _leaves(
    value: JsonValue,
    *,
    number: Callable[[Any], JsonValue] | None = None,
    text: Callable[[str], JsonValue] | None = None,
    seq: Callable[[list[JsonValue]], list[JsonValue]] | None = None,
) -> JsonValue:
    """`value` with each number, string and list rewritten (records and batches by
    their values; a list as a whole when `seq` is given, else element by element)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return number(value) if number is not None else value
    if isinstance(value, str):
        return text(value) if text is not None and value else value
    if isinstance(value, list):
        if seq is not None:
            return seq(list(value)) if value else value
        return [_leaves(v, number=number, text=text) for v in value]
    return {k: _leaves(v, number=number, text=text, seq=seq) for k, v in value.items()}


def _transposed(value: JsonValue, rng: random.Random) -> JsonValue:
    """Two adjacent, different digits swapped in one number or string of `value` (drawn
    among those that have such a pair)."""
    places = list(_digit_places(value, ()))
    if not places:
        return value
    path, text, i = places[rng.randrange(len(places))]
    swapped = text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    return _replace(value, path, swapped)


def _digit_places(
    value: JsonValue, path: tuple[Any, ...]
) -> Iterator[tuple[tuple[Any, ...], str, int]]:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float | str):
        text = str(value)
        for i in range(len(text) - 1):
            if text[i].isdigit() and text[i + 1].isdigit() and text[i] != text[i + 1]:
                yield path, text, i
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _digit_places(v, (*path, i))
    else:
        for k in sorted(value):
            yield from _digit_places(value[k], (*path, k))


def _replace(value: JsonValue, path: tuple[Any, ...], text: str) -> JsonValue:
    if not path:
        if isinstance(value, int):
            return int(text)
        if isinstance(value, float):
            return float(text)
        return text
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        return [_replace(v, rest, text) if i == head else v for i, v in enumerate(value)]
    assert isinstance(value, dict)
    return {k: _replace(v, rest, text) if k == head else v for k, v in value.items()}
