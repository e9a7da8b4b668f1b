"""One MCP tool of a scenario: its server's session, its name there, its input schema
(shown to the model as it is) and argument model, and one way to call it."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import JsonValue

from errorflow.core.outside_time import outside_call
from errorflow.scenario.problems import Problem, ScenarioError
from errorflow.scenario.spec.catalog import ToolArgs
from errorflow.scenario.spec.tool_model import ToolSpec
from errorflow.world.mcp.arguments import call_arguments, schema_args_model
from errorflow.world.mcp.host import mcp_host
from errorflow.world.mcp.results import tool_value
from errorflow.world.mcp.session import McpCallTimeout, McpSession

#: How long a call waits for the MCP host beyond the call's own timeout (the host bounds
#: the call itself; this bounds a host that stalled).
SYNC_SLACK_S = 10.0


class McpTool:
    def __init__(self, name: str, remote: str, session: McpSession) -> None:
        self.name, self.remote, self.session = name, remote, session
        listed = session.tools[remote]
        schema = listed.get("inputSchema")
        #: The server's input schema, shown to the model as it is.
        self.input_schema: dict[str, Any] = (
            schema if isinstance(schema, dict) else {"type": "object", "properties": {}}
        )
        self.output_schema: object = listed.get("outputSchema")
        description = listed.get("description")
        self.description = description.strip() if isinstance(description, str) else ""
        self.args_model: type[ToolArgs] = schema_args_model(name, self.input_schema)

    @classmethod
    def load(cls, name: str, spec: ToolSpec) -> McpTool:
        """Tool `name` of a scenario: its server started (or its session reused) and the
        tool looked up there. ToolServerDown when the server cannot start; a
        ScenarioError at the tool when the server has no such tool."""
        assert spec.server is not None
        session = mcp_host().session(spec.server)
        remote = spec.tool or name
        if remote not in session.tools:
            offered = ", ".join(sorted(session.tools)[:20]) or "none"
            at = f"tools.{name}.tool" if spec.tool else f"tools.{name}"
            msg = f"{session.name} has no tool {remote!r} (it has: {offered})"
            if not spec.tool:
                msg += "; name it with `tool:`"
            raise ScenarioError("<scenario>", [Problem(at, None, None, msg)])
        return cls(name, remote, session)

    async def call(self, args: ToolArgs, timeout_s: float) -> JsonValue:
        """One call with validated arguments: its answer, or the failure raised
        (ToolResultError, JsonRpcError, McpCallTimeout, ToolServerDown)."""
        work = self.session.call(self.remote, call_arguments(args), timeout_s)
        bound_s = timeout_s + SYNC_SLACK_S  # the host's own bound, should its loop stall
        deadline = asyncio.timeout(bound_s)
        with outside_call(bound_s):  # the server's time: not the trial timeout's to count
            try:
                async with deadline:
                    result = await asyncio.wrap_future(mcp_host().submit(work))
            except TimeoutError:
                if not deadline.expired():  # the host's own McpCallTimeout
                    raise
                raise McpCallTimeout.of(self.remote, timeout_s) from None
        return tool_value(result, self.output_schema)

    def call_sync(self, args: ToolArgs, timeout_s: float) -> JsonValue:
        """`call` for a caller with no loop of its own to await on (ground truth)."""
        work = self.session.call(self.remote, call_arguments(args), timeout_s)
        result = mcp_host().submit(work).result(timeout=timeout_s + SYNC_SLACK_S)
        return tool_value(result, self.output_schema)
