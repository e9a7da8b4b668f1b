"""What the MCP tests share: the test server's spec, a tool of it, sessions closed
after each module."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from errorflow.scenario.spec.tool_model import ToolSpec

SERVER = Path(__file__).resolve().parent / "mcp_server.py"


def server(**extra: Any) -> dict[str, Any]:
    """The test server over stdio (`extra`: more server fields, such as `env`)."""
    return {"command": sys.executable, "args": [str(SERVER)], **extra}


def spec(tool: str | None = None, **server_extra: Any) -> ToolSpec:
    data: dict[str, Any] = {"kind": "mcp", "server": server(**server_extra)}
    if tool is not None:
        data["tool"] = tool
    return ToolSpec.model_validate(data)
