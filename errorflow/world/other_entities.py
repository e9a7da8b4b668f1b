"""The calls about other entities a `wrong_entity` tool fault answers for
(errorflow.faults.tool): the tool world serves them, in a drawn order, until one answers
differently from the right answer.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

from errorflow.scenario.checks.references import key_columns
from errorflow.scenario.spec.model import Scenario, ToolSpec
from errorflow.scenario.spec.world_model import TableSpec

#: Candidates `wrong_entity` serves before it gives up looking for a different answer.
MAX_TRIES = 20


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
    if spec.kind in ("python", "mcp"):
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
