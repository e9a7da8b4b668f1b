"""A `ModelRequest` as the body of one Messages API request: the submit tool, the system
rules, the turns as messages, the tools, and `WireFormat` (model, tokens, temperature,
prompt cache)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict, cast
from urllib.parse import urlsplit

from anthropic.types import (
    AssistantMessageParam,
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
    UserMessageParam,
)
from pydantic import JsonValue

from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import (
    AssistantTurn,
    ModelCallError,
    ModelRequest,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    ToolDef,
    Turn,
    UpstreamTurn,
)
from errorflow.protocol.claims import FinalAnswer, answer_to_wire
from errorflow.protocol.envelope import JsonObject
from errorflow.scenario.spec.model import ModelSpec

log = logging.getLogger(__name__)

#: Used when the scenario's ModelSpec names no model.
DEFAULT_MODEL = "claude-haiku-4-5"

#: The final-answer tool the model calls to finish.
SUBMIT_TOOL = "submit_answer"

SUBMIT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "claims": {
            "type": "array",
            "description": "One entry per fact, keyed by the need key given in the task.",
            "items": {
                "type": "object",
                "properties": {
                    "key": {"type": "string", "description": "the need key"},
                    "value": {"description": "the value found (any JSON value)"},
                    "certain": {
                        "type": "boolean",
                        "description": "false when the value is a guess or rests on "
                        "partial, failed or low-confidence input",
                    },
                },
                "required": ["key", "value", "certain"],
            },
        },
        "abstained": {
            "type": "boolean",
            "description": "true when you cannot give a trustworthy answer at all",
        },
        "flags": {
            "type": "array",
            "items": {"type": "string"},
            "description": "problems noticed (e.g. upstream_error, partial_failure, "
            "low_confidence, tool_error)",
        },
        "unresolved": {
            "type": "array",
            "items": {"type": "string"},
            "description": "need keys you could not establish",
        },
        "text": {"type": "string", "description": "a short prose answer"},
        "revise": {
            "type": "array",
            "items": {"type": "string"},
            "description": "reviewers only: claim keys the sources contradict, to send back "
            "to the author for revision",
        },
    },
    "required": ["claims", "abstained"],
}

SUBMIT_DESCRIPTION = (
    "Submit your final answer. Call this exactly once, when you are done, instead of "
    "replying in prose. Give one claim per need key."
)

SYSTEM_ADDENDUM = f"""\
How to work:
- Call the tools to gather the facts the task needs; do not invent values.
- When a tool returns an error, read it: fix the arguments if it says they are \
wrong, try again later if it is transient, and stop trying if it cannot succeed.
- Finish by calling `{SUBMIT_TOOL}` with one claim per need, keyed by the need key \
given in the task (the text in quotes after "key"). Mark a claim certain=false when \
it is a guess. List the keys you could not establish in `unresolved`.
- When an upstream agent reports errors, status partial_failure or failed, or low \
confidence, do not pass its claims on as certain: add a flag (e.g. upstream_error, \
partial_failure, low_confidence), mark the affected claims uncertain, or abstain \
(abstained=true) when nothing trustworthy is left.
- Reviewers: check each claim of the report against the tools; keep what checks \
out, list the keys the sources contradict in `revise` (the report goes back to its \
author), and mark what you could not check as uncertain."""

_ID_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ID_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")
MAX_MESSAGE = 500


# --------------------------------------------------------------------------- render


def _safe_name(name: str) -> str:
    """A name the API accepts for tools and tool_use ids (``[A-Za-z0-9_-]{1,64}``).

    Scenario identifiers may contain dots; those are mapped to underscores (and the
    mapping is undone on the way back for tool names)."""
    if _ID_OK.match(name):
        return name
    cleaned = _ID_BAD_CHARS.sub("_", name)[:64]
    return cleaned or "_"


def as_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


class UpstreamView(TypedDict):
    """What a model reads of an upstream agent's message (rendered as JSON)."""

    sender: str
    status: str
    confidence: float
    errors: list[JsonObject]
    answer: JsonObject


def _answer_view(answer: FinalAnswer) -> JsonObject:
    """The answer as a downstream model reads it (without the reviewer's `revise`)."""
    return {k: v for k, v in answer_to_wire(answer).items() if k != "revise"}


def render_task(turn: TaskTurn) -> str:
    lines = [turn.prompt, "", "Needs:"]
    for need in turn.needs:
        line = f'- key "{need.id}": {need.wording}'
        given = [
            f"{name} = {value if isinstance(value, str) else as_json(value)}"
            for name, value in [
                *([(need.arg, need.identifier)] if need.identifier is not None else []),
                *need.fixed.items(),
            ]
        ]
        given += [
            f'{name} = the {field + " of the " if field else ""}value found for key "{source}"'
            for name, (source, field) in need.depends.items()
        ]
        if given:
            plural = "s" if len(given) > 1 else ""
            tools = " or ".join((need.tool, *need.sources))  # a second source checks a claim
            line += f" (tool {tools}, argument{plural} {', '.join(given)})"
        lines.append(line)
    return "\n".join(lines)


def render_upstream(turn: UpstreamTurn) -> str:
    view: UpstreamView = {
        "sender": turn.sender,
        "status": turn.status,
        "confidence": turn.confidence,
        "errors": turn.errors,
        "answer": _answer_view(turn.answer),
    }
    return f"Message from upstream agent {turn.sender!r}:\n{as_json(view)}"


#: Who speaks in a Messages API conversation (the system prompt goes apart).
Role = Literal["user", "assistant"]
#: The content blocks we send: text, the model's tool calls, and their results.
Block = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam
#: A message being assembled: its role and its blocks, still open to merging.
_Draft = tuple[Role, list[Block]]


def _text(text: str) -> TextBlockParam:
    return {"type": "text", "text": text}


def _tool_use(call: ToolCall) -> ToolUseBlockParam:
    # A truncated call (a str) is sent as an object: the API wants `input` to be one.
    args: dict[str, object] = (
        dict(call.arguments) if isinstance(call.arguments, dict) else {"_raw": call.arguments}
    )
    return {
        "type": "tool_use",
        "id": _safe_name(call.id),
        "name": _safe_name(call.name),
        "input": args,
    }


def _tool_result(turn: ObservationTurn) -> ToolResultBlockParam:
    block: ToolResultBlockParam = {
        "type": "tool_result",
        "tool_use_id": _safe_name(turn.call_id),
        "content": as_json(turn.content),
    }
    if turn.is_error:
        block["is_error"] = True
    return block


def _missing_result(tool_use_id: str) -> ToolResultBlockParam:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": as_json({"ok": False, "error": {"message": "no result was recorded"}}),
        "is_error": True,
    }


def _turn_message(turn: Turn) -> _Draft:
    if isinstance(turn, TaskTurn):
        return "user", [_text(render_task(turn))]
    if isinstance(turn, UpstreamTurn):
        return "user", [_text(render_upstream(turn))]
    if isinstance(turn, AssistantTurn):
        blocks: list[Block] = [_text(turn.text)] if turn.text else []
        blocks.extend(_tool_use(call) for call in turn.calls)
        return "assistant", blocks
    if isinstance(turn, ObservationTurn):
        return "user", [_tool_result(turn)]
    raise TypeError(f"unknown turn type {type(turn).__name__}")


def _tool_use_ids(blocks: list[Block]) -> list[str]:
    ids: list[str] = []
    for block in blocks:
        if block["type"] == "tool_use":
            ids.append(block["id"])
    return ids


def _merged(drafts: Iterable[_Draft]) -> list[_Draft]:
    """Consecutive drafts of one role as one (the API wants strict alternation); a
    draft without blocks (an assistant turn with neither text nor calls) is dropped."""
    merged: list[_Draft] = []
    for role, blocks in drafts:
        if not blocks:
            continue
        if merged and merged[-1][0] == role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((role, list(blocks)))
    return merged


def _answering(blocks: list[Block], expected: list[str]) -> list[Block]:
    """A user message's blocks, answering the calls `expected` from the assistant
    message before it: their tool_results first (once each, in the order given), a
    synthetic error result for each call left unanswered, then everything else. A
    tool_result for no expected call becomes plain text."""
    results: list[Block] = []
    others: list[Block] = []
    seen: set[str] = set()
    for block in blocks:
        if block["type"] != "tool_result":
            others.append(block)
            continue
        tid = block["tool_use_id"]
        if tid in expected and tid not in seen:
            seen.add(tid)
            results.append(block)
        else:
            others.append(_text(f"Result of tool call {tid}: {block['content']}"))
    results.extend(_missing_result(i) for i in expected if i not in seen)
    return results + others


def _paired(merged: list[_Draft]) -> list[_Draft]:
    """Every tool_use answered by a tool_result in the next message (synthetic user
    messages where an assistant message has none after it)."""
    out: list[_Draft] = []
    expected: list[str] = []  # tool_use ids awaiting their results
    for role, blocks in merged:
        if role == "assistant":
            if expected:  # an assistant turn followed another with unanswered calls
                out.append(("user", [_missing_result(i) for i in expected]))
            out.append((role, blocks))
            expected = _tool_use_ids(blocks)
        else:
            out.append((role, _answering(blocks, expected)))
            expected = []
    if expected:
        out.append(("user", [_missing_result(i) for i in expected]))
    return out


def _message(role: Role, blocks: list[Block]) -> MessageParam:
    if role == "user":
        return UserMessageParam(role="user", content=blocks)
    return AssistantMessageParam(role="assistant", content=blocks)


def render_messages(turns: Sequence[Turn]) -> list[MessageParam]:
    """Turns → Messages API ``messages``.

    Consecutive turns of one role are merged (the API wants strict alternation), and
    within a user message tool_result blocks come first (the API requires them right
    after the assistant's tool_use). The tool_use/tool_result pairing is repaired
    rather than sent broken: a call without an observation gets a synthetic error
    result, and an observation whose call is not in the preceding assistant message
    is sent as plain text. The conversation starts and ends with a user message.
    """
    out = _paired(_merged(_turn_message(turn) for turn in turns))
    if not out or out[0][0] != "user":
        out.insert(0, ("user", [_text("Begin.")]))
    if out[-1][0] != "user":
        out.append(("user", [_text("Continue.")]))
    # merging again is needed only where a synthetic message met a user message
    return [_message(role, blocks) for role, blocks in _merged(out)]


def _tool_param(name: str, description: str, schema: JsonObject) -> ToolParam:
    input_schema: dict[str, object] = dict(schema)
    input_schema.setdefault("type", "object")
    return {"name": name, "description": description, "input_schema": input_schema}


def render_tools(tools: list[ToolDef]) -> list[ToolParam]:
    out = [_tool_param(_safe_name(t.name), t.description, t.input_schema) for t in tools]
    out.append(_tool_param(SUBMIT_TOOL, SUBMIT_DESCRIPTION, SUBMIT_SCHEMA))
    return out


def render_system(system: str) -> str:
    return f"{system.rstrip()}\n\n{SYSTEM_ADDENDUM}" if system.strip() else SYSTEM_ADDENDUM


# --------------------------------------------------------------------------- wire

#: A Messages API request body as errorflow sends it: JSON values only, so that it can
#: be hashed, cached and recorded exactly as sent.
WireRequest = dict[str, JsonValue]

#: Whether `temperature` is sent: "auto" (to every server but Anthropic's), or always,
#: or never.
TemperaturePolicy = Literal["auto", "always", "never"]

#: The body fields `messages.create` takes by name; the rest go in its `extra_body`.
SDK_FIELDS = ("model", "max_tokens", "system", "messages", "tools")

_EPHEMERAL: JsonObject = {"type": "ephemeral"}


def anthropic_hosted(base_url: str | None) -> bool:
    """Whether requests go to Anthropic's own API (no base_url, or an anthropic.com host)."""
    if base_url is None:
        return True
    host = (urlsplit(base_url).hostname or "").lower()
    return host == "anthropic.com" or host.endswith(".anthropic.com")


def sends_temperature(base_url: str | None, policy: TemperaturePolicy = "auto") -> bool:
    if policy == "auto":
        return not anthropic_hosted(base_url)
    return policy == "always"


@dataclass(frozen=True)
class WireFormat:
    """How a `ModelRequest` becomes the body of one Messages API request."""

    model: str
    max_tokens: int
    temperature: float | None = None  # None: not sent
    prompt_cache: bool = True

    @classmethod
    def of(
        cls, spec: ModelSpec, temperature: TemperaturePolicy = "auto", prompt_cache: bool = True
    ) -> WireFormat:
        sent = spec.temperature if sends_temperature(spec.base_url, temperature) else None
        return cls(spec.model or DEFAULT_MODEL, spec.max_tokens, sent, prompt_cache)

    def render(self, request: ModelRequest) -> tuple[WireRequest, dict[str, str]]:
        """The request body, and the API's tool names → the scenario's."""
        name_map: dict[str, str] = {}
        for tool in request.tools:
            safe = _safe_name(tool.name)
            if safe == SUBMIT_TOOL:
                raise ModelCallError(
                    ErrorCode.MODEL_ERROR, f"tool name {tool.name!r} clashes with {SUBMIT_TOOL}"
                )
            name_map[safe] = tool.name
        system: JsonValue = render_system(request.system)
        tools: list[JsonValue] = [cast(JsonValue, t) for t in render_tools(request.tools)]
        if self.prompt_cache:  # the prefix every trial of the run shares: tools, then system
            system = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
            last = cast(JsonObject, tools[-1])
            tools[-1] = {**last, "cache_control": _EPHEMERAL}
        body: WireRequest = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": cast(JsonValue, render_messages(request.turns)),
            "tools": tools,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body, name_map
