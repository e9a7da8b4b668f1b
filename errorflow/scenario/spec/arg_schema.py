"""User-declared tool arguments: a JSON-Schema subset, and the pydantic model it builds.

A declarative or Python tool lists its arguments in the scenario (`args:`), each with a
type, an optional enum, a range or length bounds, `required` and a default. The tool
world validates every call against the model built here before the tool runs, exactly
as it does for the built-in kinds (errorflow.scenario.spec.catalog), so a wrong type, a
missing argument or an unexpected one is `invalid_args` with the same observation.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from errorflow.scenario.spec.catalog import ToolArgs

ArgType = Literal["string", "integer", "number", "boolean", "array", "object"]
Scalar = str | int | float | bool

_PYTHON: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
}
_ITEM: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}


class ArgSpec(BaseModel):
    """One argument, as a scenario declares it (JSON Schema's names where they exist)."""

    model_config = ConfigDict(extra="forbid")

    type: ArgType = "string"
    description: str = Field(default="", max_length=2000)
    enum: list[Scalar] | None = Field(default=None, min_length=1, max_length=1000)
    required: bool = True
    default: Scalar | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = Field(default=None, ge=0, le=1_000_000)
    max_length: int | None = Field(default=None, ge=1, le=1_000_000)
    #: array arguments: the type of each item
    items: Literal["string", "integer", "number", "boolean"] = "string"

    @model_validator(mode="after")
    def _consistent(self) -> ArgSpec:
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError("minimum must not exceed maximum")
        if (self.minimum is not None or self.maximum is not None) and self.type not in (
            "integer",
            "number",
        ):
            raise ValueError(f"minimum/maximum apply to integer or number, not {self.type}")
        if self.default is not None and self.required:
            raise ValueError("an argument with a default is not required: set required: false")
        return self


def _annotation(spec: ArgSpec) -> Any:
    if spec.enum is not None:
        return Literal[tuple(spec.enum)]
    if spec.type == "array":
        item: Any = _ITEM[spec.items]
        return list[item]
    return _PYTHON[spec.type]


def _field(spec: ArgSpec) -> Any:
    bounds: dict[str, Any] = {}
    if spec.minimum is not None:
        bounds["ge"] = spec.minimum
    if spec.maximum is not None:
        bounds["le"] = spec.maximum
    if spec.min_length is not None:
        bounds["min_length"] = spec.min_length
    if spec.max_length is not None:
        bounds["max_length"] = spec.max_length
    default: Any = ... if spec.required else spec.default
    annotation = _annotation(spec)
    if not spec.required and spec.default is None:
        annotation = annotation | None
    return (Annotated[annotation, Field(description=spec.description or None, **bounds)], default)


def args_model(tool: str, args: dict[str, ArgSpec]) -> type[ToolArgs]:
    """The strict pydantic model of a declared argument list (extra arguments forbidden:
    an unexpected argument is an error the model can be told about)."""
    fields = {name: _field(spec) for name, spec in args.items()}
    model: type[ToolArgs] = create_model(f"{tool}_args", __base__=ToolArgs, **fields)
    return model


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema a model is shown for a tool (pydantic's, without its title noise)."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema
