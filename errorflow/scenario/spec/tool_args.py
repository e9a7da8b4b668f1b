"""The arguments every tool of a scenario takes, whatever its kind.

Built-in kinds have fixed models (errorflow.scenario.spec.catalog); declarative tools have
the arguments they declare, or defaults that follow from their table (a lookup takes
the table's key, a search a query); a Python tool without declared arguments takes
those of its type hints (errorflow.scenario.python_ref builds that model, since it
must import the code). The tool world validates every call against these models
before the tool runs, and the loader checks every need's arguments against them.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping

from errorflow.scenario.spec.arg_schema import ArgSpec, args_model, schema_of
from errorflow.scenario.spec.catalog import ARG_MODELS, DESCRIPTIONS, ToolArgs
from errorflow.scenario.spec.tool_model import ToolSpec
from errorflow.scenario.spec.world_model import TableSpec

#: Most hits a search returns when it declares no limit argument.
DEFAULT_SEARCH_LIMIT = 50


def declared_args(spec: ToolSpec, tables: Mapping[str, TableSpec]) -> dict[str, ArgSpec] | None:
    """The arguments of a declarative tool, defaults filled in (None: a Python tool
    that takes its type hints', an MCP tool its server's input schema)."""
    if spec.kind == "mcp":
        return None
    if spec.args is not None:
        args = dict(spec.args)
    elif spec.kind == "python":
        return None
    elif spec.kind == "search":
        args = {spec.query_arg: ArgSpec(min_length=1, max_length=500)}
    else:
        table = tables.get(spec.table or "")
        args = {table.key if table else "id": ArgSpec(min_length=1, max_length=200)}
    table = tables.get(spec.table or "")
    if spec.select is not None and table is not None:
        select = args.get(spec.select) or ArgSpec()
        if select.enum is None:
            choices = [c for c in table.columns if c != table.key]
            select = select.model_copy(update={"enum": choices or [table.key]})
        args[spec.select] = select
    return args


def tool_args_model(
    name: str, spec: ToolSpec, tables: Mapping[str, TableSpec]
) -> type[ToolArgs] | None:
    """The strict model a call to tool `name` is validated against (None: a Python
    tool's hints, built where its code is imported; an MCP tool's server schema, read
    when a run loads its tools)."""
    if spec.kind in ARG_MODELS:
        return ARG_MODELS[spec.kind]
    args = declared_args(spec, tables)
    return None if args is None else args_model(name, args)


def tool_description(spec: ToolSpec) -> str:
    if spec.description:
        return spec.description
    if spec.kind in DESCRIPTIONS:
        return DESCRIPTIONS[spec.kind]
    return {
        "lookup": f"Look up a record of table {spec.table!r}.",
        "search": f"Search table {spec.table!r}; returns the matching records.",
        "python": "Call the tool.",
        "mcp": "Call the tool.",
    }[spec.kind]


def tool_schema(model: type[ToolArgs]) -> dict[str, object]:
    return schema_of(model)


def enum_options(model: type[ToolArgs]) -> dict[str, list[object]]:
    """Each argument that takes one of a fixed set of values (a declared `enum`, or a
    `Literal` type hint), with those values."""
    out: dict[str, list[object]] = {}
    for name, info in model.model_fields.items():
        ann = info.annotation
        if typing.get_origin(ann) in (typing.Union, types.UnionType):
            ann = next((a for a in typing.get_args(ann) if a is not type(None)), ann)
        if typing.get_origin(ann) is typing.Literal:
            out[name] = list(typing.get_args(ann))
    return out
