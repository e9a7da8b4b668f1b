"""The tool kinds a scenario can name: their argument schemas and descriptions.

A scenario file declares tools by kind (`kind: metric_store`); the loader checks a
need's argument against the kind's schema, and the tool world (errorflow.world.tool_client)
validates every call against the same schema before it runs the tool. What a kind
*does* lives in the world; what a kind *is* lives here, below both.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ToolKind = Literal["metric_store", "paper_search", "batch_fetch", "report_sink"]
#: Kinds whose calls fetch several items, so that some may fail (a `partial` fault).
BATCH_KINDS: frozenset[str] = frozenset({"batch_fetch"})


class ToolArgs(BaseModel):
    """The arguments of one tool call; strict, so a wrong type is an error, not a cast."""

    model_config = ConfigDict(extra="forbid", strict=True)


class QueryMetricArgs(ToolArgs):
    name: str = Field(min_length=1, max_length=200, description="Metric identifier")


class SearchPapersArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=500, description="Search query")
    limit: int = Field(default=10, ge=1, le=50)


class FetchManyArgs(ToolArgs):
    ids: list[str] = Field(min_length=1, max_length=50, description="Document ids")


class SendReportArgs(ToolArgs):
    title: str = Field(min_length=1, max_length=300)
    body: str = Field(max_length=50_000)


ARG_MODELS: dict[ToolKind, type[ToolArgs]] = {
    "metric_store": QueryMetricArgs,
    "paper_search": SearchPapersArgs,
    "batch_fetch": FetchManyArgs,
    "report_sink": SendReportArgs,
}

DESCRIPTIONS: dict[ToolKind, str] = {
    "metric_store": "Read one business metric by its identifier.",
    "paper_search": "Search the paper index; returns matching papers.",
    "batch_fetch": "Fetch several documents by id; results are returned per item.",
    "report_sink": "Send the final report (side effect: sends once per idempotency key).",
}


def input_schema(kind: ToolKind) -> dict[str, Any]:
    """The JSON Schema a model is shown for a tool of this kind (pydantic's own type)."""
    return ARG_MODELS[kind].model_json_schema()
