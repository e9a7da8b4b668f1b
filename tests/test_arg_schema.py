"""Declared tool arguments: the JSON-Schema subset and the strict model it builds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from errorflow.scenario.spec.arg_schema import ArgSpec, args_model, schema_of


def test_types_enums_ranges_required_and_defaults() -> None:
    model = args_model(
        "t",
        {
            "id": ArgSpec(min_length=2),
            "field": ArgSpec(enum=["a", "b"]),
            "n": ArgSpec(type="integer", minimum=1, maximum=5, required=False, default=2),
            "ids": ArgSpec(type="array", items="string", required=False),
        },
    )
    ok = model.model_validate({"id": "x1", "field": "a"})
    assert ok.model_dump() == {"id": "x1", "field": "a", "n": 2, "ids": None}
    for bad in (
        {"id": "x1"},  # a required argument missing
        {"id": 7, "field": "a"},  # strict: no casts
        {"id": "x1", "field": "c"},  # not in the enum
        {"id": "x1", "field": "a", "n": 9},  # out of range
        {"id": "x", "field": "a"},  # too short
        {"id": "x1", "field": "a", "extra": 1},  # not an argument
    ):
        with pytest.raises(ValidationError):
            model.model_validate(bad)


def test_the_schema_a_model_is_shown() -> None:
    schema = schema_of(args_model("t", {"q": ArgSpec(description="what to find")}))
    assert schema["required"] == ["q"] and schema["additionalProperties"] is False
    assert schema["properties"] == {"q": {"type": "string", "description": "what to find"}}


def test_an_inconsistent_declaration_is_refused() -> None:
    for bad in (
        {"type": "integer", "minimum": 5, "maximum": 1},
        {"type": "string", "minimum": 1},
        {"default": "x"},  # a default on a required argument
        {"type": "list"},
    ):
        with pytest.raises(ValidationError):
            ArgSpec.model_validate(bad)
