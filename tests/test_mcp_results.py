"""What an MCP tool's result answers."""

from __future__ import annotations

import pytest

from errorflow.core.tool_errors import ToolResultError
from errorflow.world.mcp.results import tool_value

WRAPPED = {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}


def text(*texts: str, **more: object) -> dict[str, object]:
    return {"content": [{"type": "text", "text": t} for t in texts], **more}


def test_structured_content_is_the_answer() -> None:
    assert tool_value(text("{}", structuredContent={"units": 5})) == {"units": 5}
    # FastMCP's wrapping of a plain return value is unwrapped (only under its schema).
    assert tool_value(text("3", structuredContent={"result": 3}), WRAPPED) == 3
    assert tool_value(text("3", structuredContent={"result": 3})) == {"result": 3}


def test_text_is_its_json_value_when_it_is_json() -> None:
    assert tool_value(text('{"units": 5}')) == {"units": 5}
    assert tool_value(text("42")) == 42
    assert tool_value(text("On branch main")) == "On branch main"
    assert tool_value(text("NaN")) == "NaN"
    assert tool_value(text("a", "b")) == ["a", "b"]
    assert tool_value({"content": []}) is None


def test_other_blocks_come_as_they_are_without_metadata() -> None:
    image = {"type": "image", "data": "aGk=", "mimeType": "image/png", "annotations": {"x": 1}}
    assert tool_value({"content": [image]}) == {
        "type": "image",
        "data": "aGk=",
        "mimeType": "image/png",
    }


def test_is_error_raises_its_text() -> None:
    with pytest.raises(ToolResultError) as info:
        tool_value(text("Error executing tool x: no such repo", isError=True))
    assert info.value.raw == "Error executing tool x: no such repo"
    with pytest.raises(ToolResultError, match="no text"):
        tool_value({"content": [], "isError": True})
