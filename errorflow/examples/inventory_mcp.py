"""The warehouse inventory (errorflow.examples.inventory) as an MCP server over stdio:

    python -m errorflow.examples.inventory_mcp

Built with the official `mcp` SDK (installed with errorflow): its MCPServer (the
SDK's FastMCP) makes each function a tool, its type hints the tool's input schema. The
server answers the three ways MCP servers do, so a scenario shows each classified at
the tool edge:

- a known SKU: the answer (`structuredContent`);
- a discontinued SKU or a quantity below one: a tool error (`isError`, the reason as
  its text), which errorflow counts as a `business_rule` refusal;
- an unknown SKU: a JSON-RPC error response, -32602 invalid params (`invalid_args`),
  its message naming no valid SKU.

Deterministic, no I/O but its stdio: the same arguments always give the same answer.
"""

from __future__ import annotations

from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from errorflow.examples import inventory

#: JSON-RPC's code for arguments the server refuses.
INVALID_PARAMS = -32602

server = MCPServer("errorflow-inventory", log_level="WARNING")


def _answer(result: dict[str, object]) -> dict[str, Any]:
    """A refusal in the inventory's result becomes the tool's error."""
    if result.get("ok") is False:
        raise ToolError(str(result.get("reason") or "refused"))
    return {k: v for k, v in result.items() if k != "ok"}


@server.tool()
def stock_level(sku: str, warehouse: Literal["north", "south"]) -> dict[str, Any]:
    """Units of one SKU in stock at one warehouse (north or south)."""
    try:
        return _answer(inventory.stock_level(sku, warehouse))
    except inventory.UnknownSku as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from None


@server.tool()
async def price_quote(sku: str, quantity: int) -> dict[str, Any]:
    """A price for `quantity` units of one SKU, volume discount applied (in cents)."""
    try:
        return _answer(await inventory.price_quote(sku, quantity))
    except inventory.UnknownSku as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from None


if __name__ == "__main__":
    server.run()
