"""An MCP server the tests start, written with the SDK's FastMCP (MCPServer in SDK 2):
over stdio, or over streamable HTTP with `--http PORT`. A few accounts to look up, and
each way an MCP server answers or fails. `DIE_AFTER=n` in its environment makes the
process exit (as a crash would) on the `account` call after the n-th."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, Literal

try:  # SDK 2
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError

    app = MCPServer("errorflow-test", log_level="WARNING")

    def rpc(code: int, message: str) -> Exception:
        return MCPError(code, message)

except ImportError:  # SDK 1: FastMCP under its first name
    from mcp.server.fastmcp import FastMCP  # type: ignore[no-redef]
    from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef]
    from mcp.shared.exceptions import McpError
    from mcp.types import ErrorData

    app = FastMCP("errorflow-test", log_level="WARNING")  # type: ignore[assignment]

    def rpc(code: int, message: str) -> Exception:
        return McpError(ErrorData(code=code, message=message))


ACCOUNTS: dict[str, dict[str, Any]] = {
    "ACME": {"owner": "Dana Reyes", "tier": "gold", "open_tickets": 3},
    "GLOBEX": {"owner": "Sam Okafor", "tier": "silver", "open_tickets": 12},
    "INITECH": {"owner": "Lu Wen", "tier": "bronze", "open_tickets": 0},
}
CALLS = {"account": 0, "wobbly": 0}


@app.tool()
def account(account: str, field: Literal["owner", "tier", "open_tickets"]) -> str | int:
    """One field of an account."""
    CALLS["account"] += 1
    die_after = os.environ.get("DIE_AFTER")
    if die_after and CALLS["account"] > int(die_after):
        os._exit(7)
    row = ACCOUNTS.get(account)
    if row is None:
        raise rpc(-32602, f"no account {account!r}")
    value: str | int = row[field]
    return value


@app.tool()
def wobbly(account: str) -> str:
    """An account's owner; its handler fails (-32603) on every call but each third."""
    CALLS["wobbly"] += 1
    if CALLS["wobbly"] % 3:
        raise rpc(-32603, "the handler failed")
    return str(ACCOUNTS[account]["owner"])


@app.tool()
def profile(account: str) -> dict[str, Any]:
    """An account's whole record (JSON text: no output schema)."""
    row = ACCOUNTS.get(account)
    if row is None:
        raise ToolError(f"no account {account!r}")
    return {"account": account, **row}


@app.tool(name="tickets.count")
def tickets_count(account: str) -> int:
    """Open tickets of an account (a tool name that is no scenario identifier)."""
    return int(ACCOUNTS[account]["open_tickets"])


@app.tool()
def refuse(reason: str) -> str:
    """Always refuses (isError)."""
    raise ToolError(reason)


@app.tool()
def rpc_error(code: int) -> str:
    """Always answers a JSON-RPC error with `code`."""
    raise rpc(code, f"error {code}")


@app.tool()
async def sleep(seconds: float) -> str:
    """Answers after `seconds`."""
    await asyncio.sleep(seconds)
    return "awake"


@app.tool()
def crash() -> str:
    """Exits the server mid-call."""
    os._exit(3)


@app.tool()
def lines() -> list[str]:
    """Two text blocks."""
    return ["first", "second"]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        try:
            app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
        except TypeError:  # SDK 1: the address is a setting
            app.settings.host, app.settings.port = "127.0.0.1", int(sys.argv[2])
            app.run("streamable-http")
    else:
        app.run()
