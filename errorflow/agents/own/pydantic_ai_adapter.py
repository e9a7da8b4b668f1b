"""A pydantic-ai agent as an errorflow python agent (`pip install 'errorflow[pydantic-ai]'`).

    agent = Agent(FunctionModel(decide), output_type=Findings)

    async def desk(ctx: AgentContext) -> AgentReply:
        return await run_pydantic_ai(agent, ctx)

`run_pydantic_ai` runs the framework agent with the errorflow agent's tools as a
pydantic-ai toolset: every tool the framework's model calls goes through errorflow's
gate (injected faults, retries, breakers, guards), and the tool returns to the
framework what errorflow's own model would be shown (`ok`, `result`, and the error's
class, message and suggestion as far as the policy tells them). The tools run one at
a time, in the order the model asked, so a seed gives the same events. The framework's
output becomes the reply: an `AgentReply`, a mapping of claims, a pydantic model with a
`claims` field (and optionally `unresolved`, `flags`, `text`, `status`, `confidence`),
or text (no claims).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from errorflow.agents.own.context import AgentContext, AgentReply, ToolRequest, ToolResult
from errorflow.core.errors import InputError
from errorflow.models.backend import ToolDef

try:
    from pydantic_ai import Agent, RunContext, Tool
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # the optional extra is not installed
    raise InputError(
        f"pydantic-ai is not installed ({exc.name}): pip install 'errorflow[pydantic-ai]'"
    ) from None

#: The reply's fields a framework output may carry besides `claims`.
_REPLY_FIELDS = ("uncertain", "unresolved", "flags", "text", "abstained", "status", "confidence")


def gated_toolset(ctx: AgentContext) -> FunctionToolset[Any]:
    """The agent's tools as pydantic-ai tools, each call through errorflow's gate."""
    return FunctionToolset([_tool(ctx, d) for d in ctx.tool_defs])


def _tool(ctx: AgentContext, tool: ToolDef) -> Tool[Any]:
    async def call(run: RunContext[Any], **arguments: Any) -> dict[str, Any]:
        # The framework's call id names the call in errorflow's trace and events.
        request = ToolRequest(run.tool_call_id or "", tool.name, arguments)
        return observation(await ctx.run_call(request))

    return Tool.from_schema(
        call, tool.name, tool.description, dict(tool.input_schema), takes_ctx=True, sequential=True
    )


def observation(result: ToolResult) -> dict[str, Any]:
    """What the framework's model reads of a tool call."""
    shown: dict[str, Any] = {"ok": result.ok, "result": result.value}
    for key in ("code", "message", "retryable", "retry_after_s", "suggestion"):
        value = getattr(result, key)
        if value is not None:
            shown[key] = value
    return shown


async def run_pydantic_ai(
    agent: Agent[Any, Any], ctx: AgentContext, prompt: str | None = None
) -> AgentReply:
    """Run `agent` on this trial's inputs (`prompt`, by default `ctx.prompt()`)."""
    result = await agent.run(
        prompt if prompt is not None else ctx.prompt(), toolsets=[gated_toolset(ctx)]
    )
    return reply_of(result.output)


def reply_of(output: object) -> AgentReply:
    """The framework agent's output as an errorflow reply."""
    if isinstance(output, AgentReply):
        return output
    if isinstance(output, BaseModel):
        output = output.model_dump(mode="json")
    if isinstance(output, Mapping):
        if "claims" in output and isinstance(output["claims"], Mapping):
            extra = {k: output[k] for k in _REPLY_FIELDS if output.get(k) is not None}
            return AgentReply(claims=dict(output["claims"]), **extra)
        return AgentReply(claims=dict(output))
    return AgentReply(text=str(output))
