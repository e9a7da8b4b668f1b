"""The world a scenario's tools serve: metrics, papers, documents and tables of records.

Tables are the general form: named collections of records with a key column, served
by declarative tools (`kind: lookup` / `kind: search`, errorflow.scenario.spec.tool_model)
and used by the scorer for ground truth. The three older shapes stay as they are.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from errorflow.core.shapes import Extended, Ident, Strict

#: One cell of a record: a JSON scalar, or a list of strings (tags, ids).
Cell = str | int | float | bool | list[str] | None
#: Largest table a scenario may hold (rows); the tools scan it per call.
MAX_ROWS = 10_000


class Paper(Strict):
    id: Ident
    title: str
    topic: str


class TableSpec(Strict):
    """Records with a key column: `rows` are objects, each with a unique `key` value."""

    key: Ident = "id"
    rows: list[dict[Ident, Cell]] = Field(min_length=1, max_length=MAX_ROWS)

    @model_validator(mode="after")
    def _keyed(self) -> TableSpec:
        seen: dict[str, int] = {}
        for i, row in enumerate(self.rows):
            if self.key not in row:
                raise ValueError(f"row {i} has no key column {self.key!r}")
            value = row[self.key]
            if not isinstance(value, str | int) or isinstance(value, bool):
                raise ValueError(f"row {i}: key {self.key!r} must be a string or an integer")
            text = str(value)
            if text in seen:
                raise ValueError(f"row {i} repeats key {text!r} (first in row {seen[text]})")
            seen[text] = i
        return self

    @property
    def columns(self) -> list[str]:
        """Every column that appears in a row, in first-seen order."""
        out: dict[str, None] = {}
        for row in self.rows:
            out.update(dict.fromkeys(row))
        return list(out)


class WorldSpec(Extended):
    added_fields = frozenset({"tables"})

    metrics: dict[str, float | int | str] = Field(default_factory=dict)
    papers: list[Paper] = Field(default_factory=list)
    documents: dict[str, str] = Field(default_factory=dict)
    tables: dict[Ident, TableSpec] = Field(default_factory=dict)
