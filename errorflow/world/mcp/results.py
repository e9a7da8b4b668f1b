"""What an MCP tool's result (`CallToolResult`, in wire form) answers.

- `isError: true`: the tool ran and says it failed; its text is the reason
  (ToolResultError, a `business_rule` refusal at the tool edge);
- `structuredContent`: the answer, as the object it is; a tool whose output schema is
  the one property `result` (how FastMCP wraps a function's plain return value)
  answers that value;
- otherwise its `content`: a text block is its JSON value when it is JSON (`42`,
  `{"units": 5}`), else the text; other blocks (images, resources) as they came, without
  metadata; one block is the answer, several a list of them, none `null` (empty).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from errorflow.core.tool_errors import ToolResultError

#: Longest refusal text kept (the rest of a stack trace says nothing more).
MAX_ERROR_TEXT = 2000


def tool_value(result: Mapping[str, Any], output_schema: object = None) -> JsonValue:
    """The answer of a result; ToolResultError when it says the tool failed."""
    if result.get("isError") is True:
        raise ToolResultError(error_text(result))
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        return _unwrapped(structured, output_schema)
    blocks = result.get("content")
    values = [_block(b) for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def error_text(result: Mapping[str, Any]) -> str:
    blocks = result.get("content")
    texts = [
        b["text"].strip()
        for b in (blocks if isinstance(blocks, list) else [])
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    text = "\n".join(t for t in texts if t)
    return text[:MAX_ERROR_TEXT] if text else "the tool reported an error (isError, no text)"


def _unwrapped(structured: dict[str, Any], output_schema: object) -> JsonValue:
    props = output_schema.get("properties") if isinstance(output_schema, dict) else None
    if isinstance(props, dict) and list(props) == ["result"] and list(structured) == ["result"]:
        value: JsonValue = structured["result"]
        return value
    return structured


def _block(block: dict[str, Any]) -> JsonValue:
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        return _json_or_text(block["text"])
    return {k: v for k, v in block.items() if k not in ("annotations", "_meta")}


def _json_or_text(text: str) -> JsonValue:
    try:
        value: JsonValue = json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # NaN / Infinity: keep the text
