"""What a python agent's callable (`behaviour: python`) is given and what it gives back.

    async def agent(ctx: AgentContext) -> AgentReply:
        found = {}
        for need in ctx.needs:
            result = await ctx.call_tool(need.tool, need.arguments)
            if result.ok:
                found[need.id] = result.value
        return AgentReply(claims=found)

`AgentContext` holds the agent's inputs (the task, its needs, the upstream messages with
their status, errors, confidence and claims), `call_tool` (the agent's tool gate:
injected faults, retries, breakers, limiters and loop guards apply as for a built-in
agent, and under implicit propagation a failed call reads as an empty success, as the
model would see it) and `model` (the agent's model backend behind its model gate). The
callable returns an `AgentReply` (or a mapping of claims); errorflow builds the envelope,
applies the propagation mode and scores it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from errorflow.models.backend import NeedView, ToolDef, UpstreamTurn
from errorflow.protocol.claims import Claim, FinalAnswer

#: A result's status, as the envelope says it.
StatusName = Literal["ok", "partial_failure", "failed"]


@dataclass(frozen=True)
class Need:
    """One fact the task asks for."""

    id: str
    #: The tool that serves it, and the argument that names what to look up.
    tool: str
    argument: str
    #: The task's own words for it.
    wording: str
    #: The value of `argument` when the task gives it (None: only the wording says it).
    identifier: JsonValue
    #: The call's arguments as far as the task states them (the identifier included).
    arguments: Mapping[str, JsonValue]

    @classmethod
    def of(cls, view: NeedView) -> Need:
        args: dict[str, JsonValue] = dict(view.fixed)
        if view.identifier is not None:
            args[view.arg] = view.identifier
        return cls(view.id, view.tool, view.arg, view.wording, view.identifier, args)


@dataclass(frozen=True)
class UpstreamError:
    """An error an upstream message carries (explicit propagation only)."""

    code: str
    tool: str
    message: str
    #: The agent where it started, and how many agents it has travelled through.
    origin: str
    hops: int
    retryable: bool


@dataclass(frozen=True)
class Upstream:
    """A message from an upstream agent, as its envelope shows it."""

    sender: str
    status: StatusName
    confidence: float
    errors: tuple[UpstreamError, ...]
    claims: tuple[Claim, ...]
    abstained: bool
    unresolved: tuple[str, ...]
    flags: tuple[str, ...]
    text: str

    def claim(self, key: str) -> Claim | None:
        return next((c for c in self.claims if c.key == key), None)

    @classmethod
    def of(cls, turn: UpstreamTurn) -> Upstream:
        errors = tuple(
            UpstreamError(
                code=str(e.get("code", "")),
                tool=str(e.get("tool", "")),
                message=str(e.get("message", "")),
                origin=str(e.get("origin", "")),
                hops=_count(e.get("hops")),
                retryable=bool(e.get("retryable", False)),
            )
            for e in turn.errors
        )
        status: StatusName = (
            turn.status if turn.status in ("ok", "partial_failure", "failed") else "failed"  # type: ignore[assignment]
        )
        a = turn.answer
        return cls(
            turn.sender,
            status,
            turn.confidence,
            errors,
            tuple(a.claims),
            a.abstained,
            tuple(a.unresolved),
            tuple(a.flags),
            a.text,
        )


@dataclass(frozen=True)
class ToolResult:
    """One tool call as the agent's policy lets it through: what a model would be shown.

    `ok` is False when the call failed (or answered with a flagged empty or partial
    result); `code`, `message`, `retryable`, `retry_after_s` and `suggestion` are there
    as far as the policy's `error_style` and `tell_class` tell them. Under implicit
    propagation a failure reads as an empty success."""

    tool: str
    ok: bool
    value: JsonValue = None
    code: str | None = None
    message: str | None = None
    retryable: bool | None = None
    retry_after_s: float | None = None
    suggestion: str | None = None

    @classmethod
    def of(cls, tool: str, observation: Mapping[str, object]) -> ToolResult:
        def text(key: str) -> str | None:
            value = observation.get(key)
            return None if value is None else str(value)

        after = observation.get("retry_after_s")
        retryable = observation.get("retryable")
        ok = bool(observation.get("ok", False)) and observation.get("code") is None
        return cls(
            tool,
            ok,
            observation.get("result"),  # type: ignore[arg-type]
            text("code"),
            text("message") or text("error"),
            retryable if isinstance(retryable, bool) else None,
            float(after) if isinstance(after, int | float) else None,
            text("suggestion"),
        )


@dataclass
class AgentReply:
    """What the agent answers. `claims`: need id (or `need.item`) → value, stated as
    certain unless named in `uncertain`. Under explicit propagation `status` and
    `confidence` can only lower what errorflow derives from the agent's failures and
    inputs; under implicit propagation every result says ok, as a built-in agent's does."""

    claims: Mapping[str, JsonValue] = field(default_factory=dict)
    uncertain: Sequence[str] = ()
    unresolved: Sequence[str] = ()
    flags: Sequence[str] = ()
    text: str = ""
    abstained: bool = False
    status: StatusName | None = None
    confidence: float | None = None

    def answer(self) -> FinalAnswer:
        doubt = set(self.uncertain)
        return FinalAnswer(
            claims=[Claim(k, v, k not in doubt) for k, v in self.claims.items()],
            abstained=self.abstained,
            flags=[str(f) for f in self.flags],
            unresolved=[str(u) for u in self.unresolved],
            text=str(self.text),
        )

    @classmethod
    def of(cls, answer: FinalAnswer) -> AgentReply:
        return cls(
            claims={c.key: c.value for c in answer.claims},
            uncertain=[c.key for c in answer.claims if not c.certain],
            unresolved=list(answer.unresolved),
            flags=list(answer.flags),
            text=answer.text,
            abstained=answer.abstained,
        )


@dataclass(frozen=True)
class ToolRequest:
    """A tool call the model asked for (run it with `ctx.run_call(request)`, which keeps
    the model's id for the call, so the model can match the answer to its request)."""

    id: str
    name: str
    arguments: Mapping[str, JsonValue] | str


@dataclass(frozen=True)
class ModelReply:
    """The model's answer to the conversation so far: tool calls, or a final answer."""

    calls: tuple[ToolRequest, ...]
    answer: AgentReply | None


class ModelHandle:
    """The agent's model: its backend behind its model gate (retries, breaker, model
    faults, an injected crash, token and cost accounting, as for a built-in agent)."""

    def __init__(self, complete: Callable[[str | None], Awaitable[ModelReply]]) -> None:
        self._complete = complete

    async def complete(self, note: str | None = None) -> ModelReply:
        """Ask the model about the task, the upstream messages and this agent's tool
        calls so far (`note`: one more line for it to read). A call that fails for good
        raises `ModelCallError`; left unhandled, the agent stops as a built-in agent
        whose model failed does."""
        return await self._complete(note)


@dataclass(frozen=True)
class AgentContext:
    """A python agent's inputs for one trial, and its tools and model."""

    agent: str
    role: str
    trial: int
    #: The task's prompt and the facts it needs.
    task: str
    needs: tuple[Need, ...]
    #: The messages from upstream agents (the runner's task is not one).
    upstream: tuple[Upstream, ...]
    #: The tools this agent may call, and each one's description and input schema.
    tools: tuple[str, ...]
    tool_defs: tuple[ToolDef, ...]
    model: ModelHandle
    _call: Callable[[str, Mapping[str, JsonValue] | str, str | None], Awaitable[ToolResult]] = (
        field(repr=False)
    )

    async def call_tool(
        self, name: str, arguments: Mapping[str, JsonValue] | None = None, **kwargs: JsonValue
    ) -> ToolResult:
        """Call a tool through the agent's gate; never raises for a tool's failure."""
        return await self._call(name, {**(arguments or {}), **kwargs}, None)

    async def run_call(self, request: ToolRequest) -> ToolResult:
        """Run a tool call the model asked for (`ModelReply.calls`), through the gate."""
        return await self._call(request.name, request.arguments, request.id)

    def prompt(self) -> str:
        """The inputs as one JSON text, for a framework agent's first message: the task,
        its needs (with the arguments the task states) and the upstream messages."""
        return json.dumps(
            {
                "task": self.task,
                "needs": [
                    {"id": n.id, "tool": n.tool, "wording": n.wording, "arguments": n.arguments}
                    for n in self.needs
                ],
                "upstream": [
                    {
                        "sender": u.sender,
                        "status": u.status,
                        "confidence": u.confidence,
                        "errors": [f"{e.origin}: {e.code}" for e in u.errors],
                        "claims": {c.key: c.value for c in u.claims if c.certain},
                        "unresolved": list(u.unresolved),
                    }
                    for u in self.upstream
                ],
            },
            default=str,
        )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
