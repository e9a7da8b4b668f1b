"""A call's arguments refused before the tool runs (errorflow/world/tool_client.py),
worded as the runtime that would refuse them words it: a JavaScript client's for the
built-in kinds, Python's for a Python tool, a JSON Schema check's for an MCP tool (never a
JavaScript error its Python server could not have sent)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from errorflow.core.tool_errors import SchemaViolation
from errorflow.scenario.spec.tool_model import ToolSpec
from errorflow.world.tool_client import _parse_arguments, _schema_violation
from tests.mcp_support import spec as mcp_spec


class QuoteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: str
    cents: int = 0


SPECS = {
    "builtin": ToolSpec.model_validate({"kind": "metric_store"}),
    "python": ToolSpec.model_validate({"kind": "python", "function": "shop.py:quote"}),
    "mcp": mcp_spec(),
}


def refusal(kind: str, args: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as info:
        QuoteArgs.model_validate(args)
    return str(_schema_violation("quote", QuoteArgs, info.value, SPECS[kind]))


@pytest.mark.parametrize(
    ("kind", "missing", "unexpected", "wrong"),
    [
        (
            "builtin",
            "TypeError: Cannot read properties of undefined (reading 'order_id')",
            "TypeError: unexpected keyword argument 'rush'",
            "TypeError: cents: Input should be a valid integer",
        ),
        (
            "python",
            "TypeError: quote() missing 1 required positional argument: 'order_id'",
            "TypeError: quote() got an unexpected keyword argument 'rush'",
            "TypeError: cents: Input should be a valid integer",
        ),
        (
            "mcp",
            "Invalid arguments for tool quote: 'order_id' is a required property",
            "Invalid arguments for tool quote: additional properties are not allowed ('rush' "
            "was unexpected)",
            "Invalid arguments for tool quote: cents: Input should be a valid integer",
        ),
    ],
)
def test_argument_errors_are_worded_by_the_runtime_that_refuses_them(
    kind: str, missing: str, unexpected: str, wrong: str
) -> None:
    assert refusal(kind, {}) == missing
    assert refusal(kind, {"order_id": "A1", "rush": True}) == unexpected
    assert refusal(kind, {"order_id": "A1", "cents": "many"}).startswith(wrong)


@pytest.mark.parametrize(
    ("kind", "raw"),
    [
        ("builtin", "SyntaxError: Unexpected end of JSON input at position 13"),
        ("python", "JSONDecodeError: Unterminated string starting at: line 1 column 14 (char 13)"),
        ("mcp", "JSONDecodeError: Unterminated string starting at: line 1 column 14 (char 13)"),
    ],
)
def test_arguments_cut_off_are_worded_by_the_host_that_parses_them(kind: str, raw: str) -> None:
    with pytest.raises(SchemaViolation) as info:
        _parse_arguments('{"order_id": "A1', SPECS[kind])
    assert str(info.value) == raw
