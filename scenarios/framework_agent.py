"""The framework agent of scenarios/framework-agent.yaml: a pydantic-ai `Agent`.

Its model is a `FunctionModel`, a deterministic policy written as a function (no
network, no weights): it calls the tool of every need the task lists, calls a tool
again once when the answer says the error is retryable, then answers with the values
the tools returned and leaves the rest unresolved. Swap in any pydantic-ai model
(`Agent("openai:gpt-4o", ...)`) and the same tools, faults and scoring apply.

errorflow runs it through `run_pydantic_ai`, which hands the agent errorflow's gated
tools as a pydantic-ai toolset: the injected faults hit the framework's tool calls.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from errorflow import AgentContext, AgentReply, run_pydantic_ai


class Findings(BaseModel):
    """The agent's structured output: a value per need, and the needs it could not get."""

    claims: dict[str, Any]
    unresolved: list[str]


def decide(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model's next step, from the conversation so far."""
    needs: list[dict[str, Any]] = []
    returns: dict[str, dict[str, Any]] = {}  # need id -> the latest answer of its tool
    retried: set[str] = set()
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                needs = json.loads(part.content)["needs"]
            elif isinstance(part, ToolReturnPart):
                # Calls are named `need#attempt`, as errorflow's trace names them.
                need, _, attempt = part.tool_call_id.rpartition("#")
                returns[need] = part.content if isinstance(part.content, dict) else {}
                if attempt != "1":
                    retried.add(need)
    if not returns:  # the first step: every need's tool
        return ModelResponse(
            parts=[
                ToolCallPart(n["tool"], n["arguments"], tool_call_id=f"{n['id']}#1") for n in needs
            ]
        )
    again = [
        n
        for n in needs
        if not returns[n["id"]].get("ok")
        and returns[n["id"]].get("retryable")
        and n["id"] not in retried
    ]
    if again:
        return ModelResponse(
            parts=[
                ToolCallPart(n["tool"], n["arguments"], tool_call_id=f"{n['id']}#2") for n in again
            ]
        )
    got = {n["id"]: returns[n["id"]]["result"] for n in needs if returns[n["id"]].get("ok")}
    missing = [n["id"] for n in needs if n["id"] not in got]
    final = Findings(claims=got, unresolved=missing).model_dump()
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, final)])


analyst = Agent(FunctionModel(decide), output_type=Findings, name="analyst")


async def run(ctx: AgentContext) -> AgentReply:
    return await run_pydantic_ai(analyst, ctx)
