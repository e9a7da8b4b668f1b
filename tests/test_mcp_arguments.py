"""An MCP tool's argument model, from its input schema (JSON Schema)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from errorflow.scenario.spec.tool_args import enum_options
from errorflow.world.mcp.arguments import call_arguments, schema_args_model

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "minLength": 3},
        "warehouse": {"enum": ["north", "south"], "type": "string"},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "file-name": {"type": "string"},
        "json": {"$ref": "#/$defs/Count"},
    },
    "required": ["sku", "warehouse"],
    "$defs": {"Count": {"type": "integer", "minimum": 3}},
}


def errors(model: Any, payload: dict[str, Any]) -> list[tuple[tuple[object, ...], str, str]]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(payload)
    return [(e["loc"], e["type"], e["msg"]) for e in info.value.errors()]


def test_each_property_is_a_field_under_its_own_name() -> None:
    model = schema_args_model("stock", SCHEMA)
    args = model.model_validate({"sku": "SKU-1", "warehouse": "north"})
    # An optional argument left out stays out (the server applies its own default).
    assert call_arguments(args) == {"sku": "SKU-1", "warehouse": "north"}
    full = {"sku": "SKU-1", "warehouse": "south", "file-name": "a.txt", "json": 4, "limit": 2}
    assert call_arguments(model.model_validate(full)) == full
    # Names that cannot be Python fields travel under the schema's name all the same.
    assert set(model.model_json_schema()["properties"]) == set(SCHEMA["properties"])
    assert enum_options(model) == {"warehouse": ["north", "south"]}


def test_a_wrong_value_is_refused_at_its_field() -> None:
    model = schema_args_model("stock", SCHEMA)
    assert errors(model, {"sku": 5, "warehouse": "north"}) == [
        (("sku",), "value_error", "Value error, 5 is not of type 'string'")
    ]
    assert errors(model, {"sku": "ab", "warehouse": "north"})[0][0] == ("sku",)
    assert errors(model, {"warehouse": "north"}) == [(("sku",), "missing", "Field required")]
    assert errors(model, {"sku": "SKU-1", "warehouse": "east"})[0][:2] == (
        ("warehouse",),
        "literal_error",
    )
    # A $ref into the schema's $defs is followed.
    assert (
        "less than the minimum of 3"
        in errors(model, {"sku": "abc", "warehouse": "north", "json": 2})[0][2]
    )


def test_unknown_arguments_follow_additional_properties() -> None:
    open_model = schema_args_model("open", SCHEMA)
    assert (
        call_arguments(open_model.model_validate({"sku": "abc", "warehouse": "north", "x": 1}))["x"]
        == 1
    )
    closed = schema_args_model("closed", {**SCHEMA, "additionalProperties": False})
    assert errors(closed, {"sku": "abc", "warehouse": "north", "x": 1})[0][:2] == (
        ("x",),
        "extra_forbidden",
    )


def test_what_spans_properties_is_checked_on_the_whole_call() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "email": {"type": "string"}},
        "anyOf": [{"required": ["id"]}, {"required": ["email"]}],
    }
    model = schema_args_model("who", schema)
    assert model.model_validate({"email": "a@b"})
    assert errors(model, {})[0][:2] == ((), "value_error")


def test_a_schema_that_is_no_json_schema_checks_names_only() -> None:
    model = schema_args_model(
        "odd", {"type": "object", "properties": {"n": {"type": "int"}}, "required": ["n"]}
    )
    assert call_arguments(model.model_validate({"n": "anything"})) == {"n": "anything"}
    assert errors(model, {})[0][1] == "missing"


def test_a_tool_without_arguments() -> None:
    model = schema_args_model("ping", {"type": "object"})
    assert call_arguments(model.model_validate({})) == {}
