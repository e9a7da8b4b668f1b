"""Declarative tools over the world's tables: record lookups and searches.

Pure functions of a tool's spec, its table and validated arguments, so the tool world
serves calls and the scorer computes ground truth with the very same code. A key that
matches no record raises `UnknownKey` (not_found) carrying the valid keys; whether the
model sees them is the observation style's decision, not the tool's.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from errorflow.core.tool_errors import UnknownKey
from errorflow.scenario.checks.references import key_columns
from errorflow.scenario.spec.tool_args import DEFAULT_SEARCH_LIMIT
from errorflow.scenario.spec.tool_model import ToolSpec
from errorflow.scenario.spec.world_model import Cell, TableSpec

Row = Mapping[str, Cell]
#: Most valid keys an error carries (the observation shows at most 20 of them).
MAX_KEY_OPTIONS = 200


def lookup(
    spec: ToolSpec, table: TableSpec, args: Mapping[str, object]
) -> tuple[JsonValue, dict[str, str]]:
    """The record(s) the key arguments select, shaped by `select` / `returns`. An array
    key argument looks several records up at once: the answer is per item, and a
    missing item is an item error (a partial success), not a failure of the call."""
    keys = key_columns(spec, table.columns)
    batch = next((a for a in keys if isinstance(args.get(a), list)), None)
    if batch is None:
        return _shape(spec, _match(spec, table, keys, args), args), {}
    out: dict[str, JsonValue] = {}
    errors: dict[str, str] = {}
    items = args[batch]
    assert isinstance(items, list)
    for item in items:
        try:
            row = _match(spec, table, keys, {**args, batch: item})
        except UnknownKey:
            errors[str(item)] = "HTTP 404 Not Found"
            continue
        out[str(item)] = _shape(spec, row, args)
    return out, errors


def _match(
    spec: ToolSpec, table: TableSpec, keys: Mapping[str, str], args: Mapping[str, object]
) -> Row:
    rows: list[Row] = list(table.rows)
    for arg, column in keys.items():
        if arg not in args or args[arg] is None:
            continue
        wanted = args[arg]
        matching = [r for r in rows if _equal(r.get(column), wanted)]
        if not matching:
            options = sorted({str(r.get(column)) for r in rows})[:MAX_KEY_OPTIONS]
            raise UnknownKey(
                f"HTTP 404 Not Found: no record with {column} = {wanted!r}",
                field=arg,
                received=wanted,
                options=options,
            )
        rows = matching
    return rows[0]


def _shape(spec: ToolSpec, row: Row, args: Mapping[str, object]) -> JsonValue:
    if spec.select is not None and isinstance(args.get(spec.select), str):
        return _json(row.get(str(args[spec.select])))
    columns = spec.returns or list(row)
    if len(columns) == 1:
        return _json(row.get(columns[0]))
    return {c: _json(row.get(c)) for c in columns}


def search(spec: ToolSpec, table: TableSpec, args: Mapping[str, object]) -> JsonValue:
    """Records whose search columns contain the query (case-insensitive), filtered by
    every other argument that names a column (without a query, the filters alone
    select); the key column, or `returns`, of each."""
    query = str(args.get(spec.query_arg) or "").lower().strip()
    fields = spec.search_fields or [
        c for c in table.columns if any(isinstance(r.get(c), str | list) for r in table.rows)
    ]
    filters = {
        a: v
        for a, v in args.items()
        if a not in (spec.query_arg, spec.limit) and a in table.columns and v is not None
    }
    limit = args.get(spec.limit) if spec.limit else None
    cap = limit if isinstance(limit, int) and not isinstance(limit, bool) else DEFAULT_SEARCH_LIMIT
    hits = [
        r
        for r in table.rows
        if (any(query in _text(r.get(f)) for f in fields) if query else bool(filters))
        and all(_equal(r.get(a), v) for a, v in filters.items())
    ][: max(0, cap)]
    columns = spec.returns or [table.key]
    if len(columns) == 1:
        return sorted((_json(r.get(columns[0])) for r in hits), key=str)
    return [{c: _json(r.get(c)) for c in columns} for r in hits]


def _equal(cell: Cell | None, wanted: object) -> bool:
    if isinstance(cell, list):
        return str(wanted) in cell
    return cell == wanted or (cell is not None and str(cell) == str(wanted))


def _text(cell: Cell | None) -> str:
    if isinstance(cell, list):
        return " ".join(cell).lower()
    return "" if cell is None else str(cell).lower()


def _json(cell: Cell | None) -> JsonValue:
    return list(cell) if isinstance(cell, list) else cell
