"""The agents of scenarios/own-agent.yaml: plain async Python, no model.

`clerk` fetches each need with its tools and retries a call its policy did not already
retry when the error says it may help; it claims only what a tool answered. `writer`
relays the clerk's claims and says what it was told of failures: under explicit
propagation it flags an upstream error and lowers its confidence; under implicit
propagation there is nothing to see, so it passes on what it received as fact.
"""

from __future__ import annotations

from errorflow import AgentContext, AgentReply


async def clerk(ctx: AgentContext) -> AgentReply:
    found: dict[str, object] = {}
    missing: list[str] = []
    for need in ctx.needs:
        if need.tool not in ctx.tools:
            continue
        result = await ctx.call_tool(need.tool, need.arguments)
        if not result.ok and result.retryable:
            result = await ctx.call_tool(need.tool, need.arguments)
        if result.ok:
            found[need.id] = result.value  # type: ignore[assignment]
        else:
            missing.append(need.id)
    return AgentReply(claims=found, unresolved=missing)  # type: ignore[arg-type]


async def writer(ctx: AgentContext) -> AgentReply:
    claims: dict[str, object] = {}
    flags: list[str] = []
    unresolved: list[str] = []
    for message in ctx.upstream:
        claims.update({c.key: c.value for c in message.claims if c.certain})
        unresolved += message.unresolved
        flags += [f"{e.origin}: {e.code}" for e in message.errors]
    confidence = min((m.confidence for m in ctx.upstream), default=1.0)
    return AgentReply(
        claims=claims,  # type: ignore[arg-type]
        unresolved=unresolved,
        flags=flags,
        confidence=confidence,
        text="; ".join(f"{k} = {v}" for k, v in claims.items()),
    )
