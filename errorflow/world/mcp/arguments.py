"""An MCP tool's arguments: the strict model a call is validated against, made from the
tool's input schema (JSON Schema, 2020-12 unless it says otherwise).

Each property is a field of the model, checked against its own subschema (its `$ref`s
to the schema's `$defs` resolved), so a wrong value is `invalid_args` at the field at
fault, as a declared tool's is; a required property left out is `missing`, and one the
schema does not know is refused only when the schema closes the object
(`additionalProperties: false`). What spans properties (`anyOf` at the top,
`dependentRequired`, ...) is checked on the whole call. A property with an `enum` is
typed by it (a `Literal`), so a `wrong_entity` fault finds the other values. A schema
the validator rejects checks names only, not values: the server still judges them.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator

from errorflow.scenario.spec.catalog import ToolArgs

#: A validator of one JSON value (jsonschema's `iter_errors`).
Check = Callable[[Any], Any]


class _OpenArgs(ToolArgs):
    """Arguments of a schema that lets unknown properties through (JSON Schema's default)."""

    model_config = ConfigDict(
        extra="allow", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )


class _ClosedArgs(ToolArgs):
    model_config = ConfigDict(
        extra="forbid", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )


def schema_args_model(tool: str, schema: Mapping[str, Any]) -> type[ToolArgs]:
    """The argument model of MCP tool `tool` whose input schema is `schema`."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = {r for r in schema.get("required") or () if isinstance(r, str)}
    checker = _checker(schema)
    fields: dict[str, Any] = {}
    for i, (prop, sub) in enumerate(properties.items()):
        annotation: Any = _typed(sub)
        if checker is not None and isinstance(sub, dict):
            annotation = Annotated[annotation, AfterValidator(checker(_scoped(sub, schema)))]
        name = prop if _usable(prop, fields) else f"arg_{i}"
        default = ... if prop in required else None
        fields[name] = (annotation, Field(default, alias=prop) if name != prop else default)
    validators: dict[str, Any] = {}
    if checker is not None:
        validators["_whole_call"] = model_validator(mode="after")(_whole(checker(dict(schema))))
    base = _ClosedArgs if schema.get("additionalProperties") is False else _OpenArgs
    model = create_model(f"{tool}_args", __base__=base, __validators__=validators, **fields)
    return cast(type[ToolArgs], model)


def call_arguments(args: ToolArgs) -> dict[str, Any]:
    """What a validated call sends: the arguments given (an optional one left out stays
    out, for the server's own default), under the schema's names."""
    dumped: dict[str, Any] = args.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return dumped


def _typed(sub: object) -> Any:
    """`Literal[...]` for a property with an enum of scalars, else Any."""
    enum = sub.get("enum") if isinstance(sub, dict) else None
    if isinstance(enum, list) and enum and all(type(v) in (str, int, bool) for v in enum):
        return Literal[tuple(enum)]
    return Any


def _usable(prop: str, taken: Mapping[str, object]) -> bool:
    """Whether a property can be its field's name (else the field is aliased)."""
    return (
        prop.isidentifier()
        and not keyword.iskeyword(prop)
        and not prop.startswith(("_", "model_"))
        and not hasattr(BaseModel, prop)
        and prop not in taken
    )


def _scoped(sub: dict[str, Any], root: Mapping[str, Any]) -> dict[str, Any]:
    """A property's subschema with the root's definitions, so its local `$ref`s resolve."""
    scoped = dict(sub)
    for key in ("$defs", "definitions", "$schema"):
        if key in root and key not in scoped:
            scoped[key] = root[key]
    return scoped


def _checker(schema: Mapping[str, Any]) -> Callable[[dict[str, Any]], Check] | None:
    """A maker of value checks under the schema's dialect; None when the schema itself
    is not valid JSON Schema (or jsonschema is missing)."""
    try:
        from jsonschema import exceptions, validators
    except ImportError:
        return None
    cls = validators.validator_for(dict(schema), default=validators.Draft202012Validator)
    try:
        cls.check_schema(dict(schema))
    except exceptions.SchemaError:
        return None

    def make(sub: dict[str, Any]) -> Check:
        validator = cls(sub)

        def check(value: Any) -> Any:
            error = exceptions.best_match(validator.iter_errors(value))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path)
                raise ValueError(f"{where}: {error.message}" if where else error.message)
            return value

        return check

    return make


def _whole(check: Check) -> Callable[[ToolArgs], ToolArgs]:
    def whole_call(self: ToolArgs) -> ToolArgs:
        check(call_arguments(self))
        return self

    return whole_call
