"""A scenario's tools: the built-in kinds, declarative tools over tables, Python tools.

- built-in kinds (`metric_store`, `paper_search`, `batch_fetch`, `report_sink`): fixed
  arguments (errorflow.scenario.spec.catalog), served from the world's older shapes;
- `lookup`: look records up in a table by one or more key arguments and return chosen
  columns (or the column an argument names, `select`);
- `search`: match a query argument against chosen text columns of a table, with any
  other argument that names a column as an equality filter;
- `python`: a callable of the user's (`function: package.module:callable` or
  `path/to/file.py:callable`), its arguments declared (`args`) or taken from its type
  hints. A scenario with Python tools runs that code.
- `mcp`: a tool of an MCP server (`server:`, errorflow.scenario.spec.mcp_model; `tool:` its
  name there), its arguments the server's input schema.

Every kind takes the same injected faults (errorflow.faults.tool).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from errorflow.core.shapes import Extended, Ident, Strict
from errorflow.faults.tool import ToolFault
from errorflow.scenario.spec.arg_schema import ArgSpec
from errorflow.scenario.spec.catalog import ToolKind
from errorflow.scenario.spec.mcp_model import McpServer, RemoteName

DeclarativeKind = Literal["lookup", "search", "python", "mcp"]
AnyKind = ToolKind | DeclarativeKind
#: Most arguments a declared tool may take.
MAX_ARGS = 32


class BusinessFailure(Strict):
    """When a Python (or MCP) tool's 2xx answer is a refusal: `result[field] == equals`; the
    refusal's reason is `result[reason_field]`."""

    field: str = "ok"
    equals: str | int | float | bool | None = False
    reason_field: str | None = "reason"


class ToolSpec(Extended):
    added_fields = frozenset(
        {
            "args",
            "table",
            "key",
            "select",
            "returns",
            "query",
            "search_fields",
            "limit",
            "function",
            "business_failure",
            "service",
            "server",
            "tool",
        }
    )

    kind: AnyKind
    description: str = ""
    idempotent: bool = True
    latency_s: float = Field(default=0.05, ge=0, le=3600)
    faults: list[ToolFault] = Field(default_factory=list, max_length=32)
    #: The service that answers the tool (under `services:`), shared with other tools.
    service: Ident | None = None
    #: lookup / search / python: the arguments (a python tool may leave them to its hints)
    args: dict[Ident, ArgSpec] | None = Field(default=None, max_length=MAX_ARGS)
    #: lookup / search: the table served
    table: Ident | None = None
    #: lookup: argument -> the column it is matched against (default: same-named columns)
    key: dict[Ident, Ident] | None = None
    #: lookup: the argument whose value names the column returned
    select: Ident | None = None
    #: lookup: the columns returned (one: its bare value; default all);
    #: search: the columns of each hit (default: the key column, as a list of keys)
    returns: list[Ident] | None = Field(default=None, min_length=1, max_length=64)
    #: search: the argument holding the free-text query (default `query`), and the
    #: columns it is matched in
    query: Ident | None = None
    search_fields: list[Ident] | None = Field(default=None, min_length=1, max_length=64)
    #: search: the argument capping the number of hits
    limit: Ident | None = None
    #: python: what to call
    function: str | None = Field(default=None, min_length=3, max_length=500)
    business_failure: BusinessFailure | None = None
    #: mcp: the server, and the tool's name there (default: this tool's name)
    server: McpServer | None = None
    tool: RemoteName | None = None

    @model_validator(mode="after")
    def _fields_of_kind(self) -> ToolSpec:
        table_kinds = ("lookup", "search")
        if self.kind in table_kinds and self.table is None:
            raise ValueError(f"a {self.kind} tool needs `table:` (the table it serves)")
        if self.kind == "python" and self.function is None:
            raise ValueError("a python tool needs `function: package.module:callable`")
        if self.kind == "mcp" and self.server is None:
            raise ValueError("an mcp tool needs `server:` (a `command` or a `url`)")
        misplaced = [
            name
            for name, ok in (
                ("table", self.kind in table_kinds),
                ("key", self.kind == "lookup"),
                ("select", self.kind == "lookup"),
                ("returns", self.kind in table_kinds),
                ("search_fields", self.kind == "search"),
                ("query", self.kind == "search"),
                ("limit", self.kind == "search"),
                ("function", self.kind == "python"),
                ("business_failure", self.kind in ("python", "mcp")),
                ("server", self.kind == "mcp"),
                ("tool", self.kind == "mcp"),
                ("args", self.kind in (*table_kinds, "python")),
            )
            if not ok and getattr(self, name) is not None
        ]
        if misplaced:
            raise ValueError(f"{', '.join(misplaced)} do(es) not apply to a {self.kind} tool")
        return self

    @property
    def query_arg(self) -> str:
        """search: the argument holding the free-text query."""
        return self.query or "query"

    @property
    def declarative(self) -> bool:
        return self.kind in ("lookup", "search", "python")
