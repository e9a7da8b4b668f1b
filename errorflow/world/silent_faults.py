"""Silent wrong answers: what a `stale`, `wrong_entity` or `corrupt` tool fault makes of
a tool's right answer (errorflow.scenario.fault_model).

The call still succeeds: the caller gets an answer of the right shape with no error,
so neither the policy layer nor explicit propagation can see anything wrong. A wrong
answer is never empty (an empty answer is the visible `empty` fault): a list keeps at
least one element and a string at least one character.

`stale` and `corrupt` are pure functions of the answer (and, for `digits`, a draw);
`wrong_entity` answers another entity's call, whose arguments `other_calls` proposes
for the tool world to serve.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pydantic import JsonValue

from errorflow.scenario.checks.references import key_columns
from errorflow.scenario.fault_model import DEFAULT_DRIFT, DEFAULT_DROP, FaultSpec
from errorflow.scenario.spec.model import Scenario, ToolSpec
from errorflow.scenario.spec.world_model import TableSpec

#: Candidates `wrong_entity` serves before it gives up looking for a different answer.
MAX_TRIES = 20


def stale(value: JsonValue, fault: FaultSpec) -> JsonValue:
    """An out-of-date answer: the one the scenario states, else numbers off by `drift`
    and lists missing their last `drop` elements (text stays as it was)."""
    if fault.value is not None:
        return fault.value
    drift = fault.drift if fault.drift is not None else DEFAULT_DRIFT
    drop = fault.drop if fault.drop is not None else DEFAULT_DROP
    return _leaves(
        value,
        number=lambda x: _moved(x, x * (1 + drift)),
        seq=lambda xs: xs[: max(1, len(xs) - drop)],
    )


def corrupt(value: JsonValue, fault: FaultSpec, rng: random.Random) -> JsonValue:
    """A schema-valid but corrupted answer: numbers ×1000 (`unit`), two adjacent digits
    transposed in one value (`digits`), text and lists cut in half (`truncate`); by
    default `unit` for numbers and `truncate` for the rest."""
    mode = fault.mode
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


# -- wrong_entity ------------------------------------------------------------------------


def other_calls(
    scenario: Scenario,
    tool: str,
    args: Mapping[str, Any],
    rng: random.Random,
    options: Mapping[str, list[object]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Arguments of calls about other entities than `args` is, in a drawn order, at
    most `MAX_TRIES`: the tool world serves them until one answers differently.
    `options`: the values each argument with a fixed set of them takes (a Python
    tool's other entities)."""
    candidates = _candidates(scenario, tool, dict(args), options or {})
    rng.shuffle(candidates)
    yield from candidates[:MAX_TRIES]


def _candidates(
    scenario: Scenario, tool: str, args: dict[str, Any], options: Mapping[str, list[object]]
) -> list[dict[str, Any]]:
    spec = scenario.tools[tool]
    world = scenario.world
    if spec.kind == "metric_store":
        return [{**args, "name": m} for m in sorted(world.metrics) if m != args.get("name")]
    if spec.kind == "batch_fetch":
        return _shifted(sorted(world.documents), "ids", args)
    if spec.kind == "paper_search":
        topics = sorted({p.topic for p in world.papers})
        return [{**args, "query": t} for t in topics if t != args.get("query")]
    if spec.kind in ("lookup", "search") and spec.table in world.tables:
        return _row_calls(spec, world.tables[spec.table], args)
    if spec.kind == "python":
        return _python_calls(scenario, tool, args, options)
    return []


def _shifted(pool: list[str], arg: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """A batch's calls about other items: each item asked for (in `args[arg]`) moved on
    by the same number of places among the world's items, so they stay distinct."""
    known = [str(i) for i in args.get(arg) or [] if str(i) in pool]
    return [
        {**args, arg: [pool[(pool.index(i) + k) % len(pool)] for i in known]}
        for k in range(1, len(pool))
        if known
    ]


def _row_calls(spec: ToolSpec, table: TableSpec, args: dict[str, Any]) -> list[dict[str, Any]]:
    """A table tool's call about each other row: the arguments that name a column take
    that row's value (a search's query: the row's first text in its search columns)."""
    columns = table.columns
    keys = key_columns(spec, columns) if spec.kind == "lookup" else {}
    batch = next((a for a in keys if isinstance(args.get(a), list)), None)
    if batch is not None:
        pool = sorted({str(r.get(keys[batch])) for r in table.rows})
        return _shifted(pool, batch, args)
    named = {a: keys.get(a, a) for a in args if keys.get(a, a) in columns and a != spec.select}
    out = []
    for row in table.rows:
        call = dict(args)
        for arg, column in named.items():
            cell = row.get(column)
            call[arg] = [cell] * len(args[arg]) if isinstance(args[arg], list) else cell
        if spec.kind == "search" and args.get(spec.query_arg):
            fields = spec.search_fields or columns
            text = next((row[f] for f in fields if isinstance(row.get(f), str)), None)
            if text is not None:
                call[spec.query_arg] = text
        if call != args:
            out.append(call)
    return out


def _python_calls(
    scenario: Scenario, tool: str, args: dict[str, Any], options: Mapping[str, list[object]]
) -> list[dict[str, Any]]:
    """A Python tool's other entities: the arguments of the task's other needs on it
    (those the task states), and each other value of an argument with fixed options."""
    out: list[dict[str, Any]] = []
    for need in scenario.task.needs:
        if need.tool == tool and not need.depends_on():
            call = {k: (list(v) if isinstance(v, list) else v) for k, v in need.arguments().items()}
            if call != args and call not in out:
                out.append(call)
    for name, values in options.items():
        for option in values:
            if name in args and option != args[name]:
                out.append({**args, name: option})
    return out


def relabelled(value: JsonValue, asked: JsonValue) -> JsonValue:
    """A batch answer about other items, filed under the items asked for (the caller
    sees its own ids, with other records behind them)."""
    if not isinstance(value, dict) or not isinstance(asked, dict):
        return value
    others = list(value.values())
    return {k: others[i % len(others)] for i, k in enumerate(asked)} if others else value
