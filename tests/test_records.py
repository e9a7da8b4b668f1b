"""Declarative tools over tables: lookups and searches (errorflow.world.records)."""

from __future__ import annotations

import pytest

from errorflow.core.tool_errors import UnknownKey
from errorflow.scenario.spec.arg_schema import ArgSpec
from errorflow.scenario.spec.tool_model import ToolSpec
from errorflow.scenario.spec.world_model import TableSpec
from errorflow.world.records import lookup, search

TICKETS = TableSpec(
    key="id",
    rows=[
        {"id": "T-1", "product": "router", "priority": "high", "tags": ["reboot"]},
        {"id": "T-2", "product": "switch", "priority": "low", "tags": ["led"]},
        {"id": "T-3", "product": "router", "priority": "low", "tags": []},
    ],
)


def tool(**fields: object) -> ToolSpec:
    return ToolSpec.model_validate({"kind": "lookup", "table": "tickets", **fields})


def test_lookup_by_key_returns_the_record_or_the_selected_field() -> None:
    whole, errors = lookup(tool(args={"id": ArgSpec()}), TICKETS, {"id": "T-2"})
    assert whole == {"id": "T-2", "product": "switch", "priority": "low", "tags": ["led"]}
    assert errors == {}
    spec = tool(args={"id": ArgSpec(), "field": ArgSpec()}, select="field")
    assert lookup(spec, TICKETS, {"id": "T-2", "field": "priority"})[0] == "low"
    one = tool(args={"id": ArgSpec()}, returns=["product"])
    assert lookup(one, TICKETS, {"id": "T-3"})[0] == "router"
    two = tool(args={"id": ArgSpec()}, returns=["product", "priority"])
    assert lookup(two, TICKETS, {"id": "T-3"})[0] == {"product": "router", "priority": "low"}


def test_lookup_by_two_keys_and_renamed_arguments() -> None:
    spec = tool(
        args={"item": ArgSpec(), "level": ArgSpec()},
        key={"item": "product", "level": "priority"},
        returns=["id"],
    )
    assert lookup(spec, TICKETS, {"item": "router", "level": "low"})[0] == "T-3"
    with pytest.raises(UnknownKey) as info:
        lookup(spec, TICKETS, {"item": "router", "level": "urgent"})
    # The valid values of the argument that failed, among the records still matching.
    assert info.value.field == "level" and info.value.options == ["high", "low"]


def test_an_unknown_key_is_not_found_with_the_valid_keys() -> None:
    with pytest.raises(UnknownKey) as info:
        lookup(tool(args={"id": ArgSpec()}), TICKETS, {"id": "T-9"})
    assert info.value.options == ["T-1", "T-2", "T-3"] and info.value.received == "T-9"
    assert "T-1" not in info.value.raw  # the raw text, like a 404, lists nothing


def test_an_array_key_looks_up_each_item_and_reports_missing_ones() -> None:
    spec = tool(args={"id": ArgSpec(type="array")}, returns=["priority"])
    value, errors = lookup(spec, TICKETS, {"id": ["T-1", "T-9", "T-2"]})
    assert value == {"T-1": "high", "T-2": "low"} and errors == {"T-9": "HTTP 404 Not Found"}


def search_tool(**fields: object) -> ToolSpec:
    return ToolSpec.model_validate({"kind": "search", "table": "tickets", **fields})


def test_search_matches_the_query_in_text_columns_and_filters_by_columns() -> None:
    assert search(search_tool(), TICKETS, {"query": "ROUTER"}) == ["T-1", "T-3"]
    assert search(search_tool(), TICKETS, {"query": "reboot"}) == ["T-1"]  # list cells
    spec = search_tool(args={"query": ArgSpec(), "priority": ArgSpec()})
    assert search(spec, TICKETS, {"query": "router", "priority": "low"}) == ["T-3"]
    fields = search_tool(search_fields=["priority"])
    assert search(fields, TICKETS, {"query": "router"}) == []


def test_search_without_a_query_selects_by_its_filters_and_shapes_hits() -> None:
    spec = search_tool(args={"product": ArgSpec()}, returns=["id", "priority"])
    assert search(spec, TICKETS, {"product": "router"}) == [
        {"id": "T-1", "priority": "high"},
        {"id": "T-3", "priority": "low"},
    ]
    assert search(search_tool(args={"product": ArgSpec()}), TICKETS, {}) == []


def test_search_limit_caps_the_hits() -> None:
    spec = search_tool(args={"query": ArgSpec(), "n": ArgSpec(type="integer")}, limit="n")
    assert search(spec, TICKETS, {"query": "t", "n": 1}) == ["T-1"]
