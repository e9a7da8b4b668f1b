"""The few names of the `mcp` SDK errorflow uses, imported when the first MCP server
starts (never by `import errorflow`), with the spellings of SDK 1.x where 2.x renamed
them, so that either serves."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Any

from errorflow.core.tool_errors import ToolServerDown

#: JSON-RPC code the SDK gives a request whose connection closed under it.
CONNECTION_CLOSED = -32000


def sdk() -> ModuleType:
    """The `mcp` package, or ToolServerDown (one line) when it is not installed."""
    try:
        return importlib.import_module("mcp")
    except ImportError:
        raise ToolServerDown(
            "MCP tools need the `mcp` package, which is not installed: "
            "pip install 'mcp>=2.3,<3' jsonschema"
        ) from None


def rpc_error_type() -> type[Exception]:
    """The exception the SDK raises for a JSON-RPC error response (`MCPError`; 1.x:
    `McpError`); `.error.code` and `.error.message` in both."""
    module = importlib.import_module("mcp.shared.exceptions")
    found: type[Exception] = getattr(module, "MCPError", None) or module.McpError
    return found


def rpc_code(exc: BaseException) -> int | None:
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    return code if isinstance(code, int) else None


def rpc_message(exc: BaseException) -> str:
    error = getattr(exc, "error", None)
    return str(getattr(error, "message", None) or exc)


@asynccontextmanager
async def http_streams(url: str) -> AsyncIterator[tuple[Any, Any]]:
    """The read and write streams of a streamable-HTTP connection (2.x:
    `streamable_http_client`; 1.x: `streamablehttp_client`, which yields a third item)."""
    module = importlib.import_module("mcp.client.streamable_http")
    connect = getattr(module, "streamable_http_client", None) or module.streamablehttp_client
    async with connect(url) as streams:
        yield streams[0], streams[1]


@asynccontextmanager
async def stdio_streams(
    command: str, args: list[str], env: dict[str, str] | None, cwd: str | None, errlog: Any
) -> AsyncIterator[tuple[Any, Any]]:
    """The read and write streams of a server started as a subprocess."""
    mcp = sdk()
    params = mcp.StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    async with mcp.stdio_client(params, errlog=errlog) as streams:
        yield streams[0], streams[1]


async def list_page(session: Any, cursor: str | None) -> Any:
    """One page of `tools/list` (2.x takes the cursor in `params`, 1.x as `cursor`)."""
    if cursor is None:
        return await session.list_tools()
    types = importlib.import_module("mcp.types")
    try:
        return await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
    except TypeError:
        return await session.list_tools(cursor=cursor)


def wire(model: Any) -> dict[str, Any]:
    """An SDK model as it travels (the protocol's field names, `isError`, `inputSchema`),
    whichever spelling the SDK's attributes have."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped
