"""The Anthropic Messages API as a `ModelBackend`.

Renders a `ModelRequest` (typed turns, tool list) as a Messages API call and maps the
reply back to tool calls or a `FinalAnswer`. The model ends its work by calling the
`submit_answer` tool, so answers come back structured (claims keyed by need id)
rather than as prose that would have to be parsed.

Failures become `ModelCallError` with a taxonomy code, decided from the exception
type, the HTTP status and the shape of the reply (errorflow/models/server_reply.py),
never from message text:

====================================  =====================  ==========  =====
what happened                         code                   retryable   infra
====================================  =====================  ==========  =====
429                                   paced, not raised (see below)
408                                   timeout                yes
409, 5xx, 529 (overloaded)            transient              yes
no answer within `timeout_s`          infra_fault            no          yes
connection failure                    transient              yes         yes
401, 403                              permission_denied      no          yes
402                                   permission_denied      no          yes
404 (no such model)                   model_error            no          yes
400, 413, 422, other 4xx              model_error            no          yes
a 200 that is not a Messages reply    infra_fault            no          yes
unusable reply (max_tokens, ...)      model_error            no
====================================  =====================  ==========  =====

"infra" failures are errorflow's infrastructure, not the experiment: the error also
carries one line naming the server (`ModelCallError.infrastructure`), and a call that
fails for good that way makes its trial an infra fault (never an outcome). A 4xx
refuses the request itself, whatever the model would have said; a 200 that is empty,
an HTML page, not JSON, or JSON without a Messages reply's content is not the model
speaking; a server silent for `timeout_s` is not answering (not retried: another wait
as long would run into the trial's own timeout). A 429 from
the server is infrastructure too, but one a run can wait out: every request takes a
slot of the server's shared `RateLimiter` (errorflow/models/rate_limit.py), which the
429's `retry-after` and every reply's `anthropic-ratelimit-*` headers feed, and the
request is sent again when the limiter lets it, without the policy layer seeing it. A
call still refused after `max_pacing_s` of such waits fails as an infra fault, rate
limit. Overload (529) and the rest stay part of the experiment, retried by the policy
layer. `check` asks the server once before the first trial (reachable, key accepted,
model exists, and answering the API's shapes) and raises `InfrastructureError`.

The SDK client is built with ``max_retries=0``: retries and backoff of what the
experiment measures are owned by our policy layer (errorflow.policies.retry), which
must see every such failure.

What goes on the wire (`WireFormat`): the system prompt as one text block and the tool
definitions, both marked ``cache_control: ephemeral`` (identical across the trials of a
run, so the server's prompt cache serves them; the reply's usage says how many input
tokens it read from and wrote to the cache); `max_tokens`; and `temperature` where the
server takes it. SDK 2.x speaks API version 2026-10-21, whose Messages API has no
sampling parameters: `messages.create` takes no `temperature` and Anthropic's API
answers 400 to one sent in the body. So by default ("auto") it is not sent to Anthropic
(no `base_url`, or a host under anthropic.com) and is sent, in the request body, to
every other server (Ollama, vLLM, llama.cpp and proxies speak the older shape, which
has it); "always" and "never" decide it for every server.

The API key is handed to the SDK client and nowhere else: it is not kept on the
backend, not shown by ``repr``, not logged, and every error message is scrubbed
(literal key and `redact` patterns) before it leaves this module.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Literal, TypedDict, cast
from urllib.parse import urlsplit

import anthropic
from anthropic import AsyncAnthropic
from anthropic.types import (
    AssistantMessageParam,
    Message,
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
    UserMessageParam,
)
from pydantic import JsonValue

from errorflow.core.redact import redact
from errorflow.core.taxonomy import ErrorCode
from errorflow.models.backend import (
    AssistantTurn,
    InfrastructureError,
    ModelCallError,
    ModelRequest,
    ModelResponse,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    ToolDef,
    Turn,
    UpstreamTurn,
    Usage,
)
from errorflow.models.model_usage import CachedUsage
from errorflow.models.paced import DEFAULT_MAX_PACING_S, Posted, Refused
from errorflow.models.paced_sender import PacedSender
from errorflow.models.rate_limit import RateLimiter
from errorflow.models.server_reply import (
    NotAReply,
    Shape,
    messages_reply,
    model_description,
    read_reply,
    refused_for_good,
)
from errorflow.models.serving import DEFAULT_REQUEST_TIMEOUT_S
from errorflow.protocol.claims import Claim, FinalAnswer, claim_to_wire
from errorflow.protocol.envelope import JsonObject
from errorflow.scenario.spec.model import ModelSpec

log = logging.getLogger(__name__)

API_KEY_ENV = "ANTHROPIC_API_KEY"

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
_MAX_MESSAGE = 500


#: Statuses of infrastructure that is wrong, named apart from the other refusals
#: (`refused_for_good`): the key refused, no such model. (429 and 529 are load.)
_KEY_REFUSED = frozenset({401, 403})
_NO_MODEL = 404

#: What a connection failure's cause says, in words (searched along the cause chain).
_CONNECTION_CAUSES: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (socket.gaierror, "host name not resolved"),
    (ConnectionAbortedError, "connection aborted"),
)


def api_key_from_env(env: Mapping[str, str] = os.environ) -> str | None:
    """The API key from the environment, or None when unset or blank."""
    value = env.get(API_KEY_ENV)
    if value is None or not value.strip():
        return None
    return value.strip()


# --------------------------------------------------------------------------- render


def _safe_name(name: str) -> str:
    """A name the API accepts for tools and tool_use ids (``[A-Za-z0-9_-]{1,64}``).

    Scenario identifiers may contain dots; those are mapped to underscores (and the
    mapping is undone on the way back for tool names)."""
    if _ID_OK.match(name):
        return name
    cleaned = _ID_BAD_CHARS.sub("_", name)[:64]
    return cleaned or "_"


def _json(value: object) -> str:
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
    claims: list[JsonValue] = [claim_to_wire(c) for c in answer.claims]
    flags: list[JsonValue] = list(answer.flags)
    unresolved: list[JsonValue] = list(answer.unresolved)
    return {
        "claims": claims,
        "abstained": answer.abstained,
        "flags": flags,
        "unresolved": unresolved,
        "text": answer.text,
    }


def render_task(turn: TaskTurn) -> str:
    lines = [turn.prompt, "", "Needs:"]
    for need in turn.needs:
        line = f'- key "{need.id}": {need.wording}'
        given = [
            f"{name} = {value if isinstance(value, str) else _json(value)}"
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
    return f"Message from upstream agent {turn.sender!r}:\n{_json(view)}"


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
        "content": _json(turn.content),
    }
    if turn.is_error:
        block["is_error"] = True
    return block


def _missing_result(tool_use_id: str) -> ToolResultBlockParam:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": _json({"ok": False, "error": {"message": "no result was recorded"}}),
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
_SDK_FIELDS = ("model", "max_tokens", "system", "messages", "tools")

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


def parse_reply(reply: Mapping[str, object], name_map: Mapping[str, str]) -> ModelResponse:
    """A reply's JSON body (from the server, the response cache or a cassette) →
    ModelResponse, as `parse_message` reads the SDK's Message."""
    # `construct` builds the typed blocks without validating, as the SDK does with a reply.
    message = Message.construct(**dict(reply))  # type: ignore[arg-type]
    return parse_message(message, name_map)


# --------------------------------------------------------------------------- parse


def _as_bool(value: object, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "yes", "1"):
            return True
        if low in ("false", "no", "0"):
            return False
    return default


def _str_list(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list | tuple):
        return [v if isinstance(v, str) else _json(v) for v in value if v is not None]
    return [_json(value)]


def parse_submit(data: object) -> FinalAnswer:
    """A submit_answer input → FinalAnswer, tolerating missing or mistyped fields."""
    if not isinstance(data, dict):
        return FinalAnswer(flags=["malformed_answer"], text=str(data) if data else "")
    claims: list[Claim] = []
    raw_claims = data.get("claims")
    if isinstance(raw_claims, dict):  # {"key": value, ...}
        claims = [Claim(key=str(k), value=v) for k, v in raw_claims.items()]
    elif isinstance(raw_claims, list):
        for item in raw_claims:
            if not isinstance(item, dict) or item.get("key") is None:
                continue
            claims.append(
                Claim(
                    key=str(item["key"]),
                    value=item.get("value"),
                    certain=_as_bool(item.get("certain"), True),
                )
            )
    text = data.get("text")
    return FinalAnswer(
        claims=claims,
        abstained=_as_bool(data.get("abstained"), False),
        flags=_str_list(data.get("flags")),
        unresolved=_str_list(data.get("unresolved")),
        text=text if isinstance(text, str) else ("" if text is None else _json(text)),
        revise=_str_list(data.get("revise")),
    )


def _submit_complete(data: object) -> bool:
    """Whether a submit_answer input carries every required field with the right type
    (used after a max_tokens stop, when the input may have been cut short)."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("claims"), list)
        and isinstance(data.get("abstained"), bool)
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(message: Message) -> CachedUsage:
    """The reply's usage: input counts every input token (cached or not), and the cache's
    share is kept apart (a server without a prompt cache reports none)."""
    u = getattr(message, "usage", None)
    if u is None:
        return CachedUsage()
    read = _int(getattr(u, "cache_read_input_tokens", None))
    write = _int(getattr(u, "cache_creation_input_tokens", None))
    return CachedUsage(
        input_tokens=_int(getattr(u, "input_tokens", None)) + read + write,
        output_tokens=_int(getattr(u, "output_tokens", None)),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


class AnthropicResponseError(ModelCallError):
    """A reply that arrived (tokens were spent) but cannot be used. Carries the usage
    so budgets can still charge it."""

    def __init__(self, message: str, *, usage: Usage, stop_reason: str) -> None:
        super().__init__(ErrorCode.MODEL_ERROR, message)
        self.usage = usage
        self.stop_reason = stop_reason


@dataclass(frozen=True)
class _Content:
    """What a reply's content blocks carry for the loop."""

    text: str  # the prose blocks, joined
    calls: list[ToolCall]
    submits: list[object]  # submit_answer inputs, as sent


def _read_content(message: Message, names: Mapping[str, str]) -> _Content:
    """The reply's blocks, read field by field with defaults: the SDK builds a reply
    without validating it, so a field that a compatible server (Ollama, a proxy)
    leaves out is absent rather than defaulted."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    submits: list[object] = []
    for block in getattr(message, "content", None) or []:
        btype = getattr(block, "type", None)
        if btype == "text":
            text = getattr(block, "text", "")
            if isinstance(text, str) and text.strip():
                texts.append(text.strip())
        elif btype == "tool_use":
            name = str(getattr(block, "name", ""))
            data = getattr(block, "input", None)
            if name == SUBMIT_TOOL:
                submits.append(data)
            else:
                args: JsonObject | str = data if isinstance(data, dict) else str(data)
                call_id = str(getattr(block, "id", ""))
                calls.append(ToolCall(id=call_id, name=names.get(name, name), arguments=args))
        # thinking and server-tool blocks carry nothing the loop can use
    return _Content("\n\n".join(texts), calls, submits)


def parse_message(message: Message, name_map: Mapping[str, str] | None = None) -> ModelResponse:
    """A Messages API reply → ModelResponse.

    stop_reason handling:

    - ``tool_use`` / ``end_turn`` / ``stop_sequence`` / None / unknown: the content
      decides. A submit_answer call → ``final`` (other calls in the same reply are
      dropped: the model said it is done). Else tool calls → ``calls``. Else (prose
      only) → a final answer with the text, no claims and flag ``no_structured_answer``.
    - ``max_tokens`` / ``model_context_window_exceeded``: the reply may be cut
      mid-call. A complete submit_answer is used; anything else raises
      `AnthropicResponseError` (model_error, not retryable: the same request would be
      cut again).
    - ``refusal``: an abstaining final answer flagged ``refusal``.
    - ``pause_turn`` (only server tools pause, and we send none): tool calls are
      returned if present; otherwise `ModelCallError` transient, since re-sending
      the request is how a paused turn continues.
    """
    stop = getattr(message, "stop_reason", None)
    stop_reason = stop if isinstance(stop, str) else "unknown"
    usage = _usage(message)
    content = _read_content(message, name_map or {})
    text = content.text

    def final(answer: FinalAnswer) -> ModelResponse:
        if not answer.text and text:
            answer.text = text
        return ModelResponse(final=answer, usage=usage, stop_reason=stop_reason)

    if stop_reason in ("max_tokens", "model_context_window_exceeded"):
        for data in content.submits:
            if _submit_complete(data):
                return final(parse_submit(data))
        raise AnthropicResponseError(
            f"{stop_reason}: the reply was cut off before a complete {SUBMIT_TOOL} call "
            f"({usage.output_tokens} output tokens)",
            usage=usage,
            stop_reason=stop_reason,
        )
    if stop_reason == "refusal":
        return final(FinalAnswer(abstained=True, flags=["refusal"]))
    if content.submits:
        return final(parse_submit(content.submits[0]))
    if content.calls:
        return ModelResponse(calls=content.calls, usage=usage, stop_reason=stop_reason)
    if stop_reason == "pause_turn":
        raise ModelCallError(ErrorCode.TRANSIENT, "pause_turn: the model paused without a call")
    return final(FinalAnswer(flags=["no_structured_answer"]))


# --------------------------------------------------------------------------- errors


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP
    date); None when absent or unparseable."""
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            value = float(ms) / 1000.0
            if math.isfinite(value):
                return max(0.0, value)
    except (TypeError, ValueError):
        pass
    try:
        raw = headers.get("retry-after")
    except Exception:
        return None
    if raw is None:
        return None
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except (TypeError, ValueError):
        pass
    try:
        when = parsedate_to_datetime(str(raw))
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:  # pragma: no cover - older Pythons
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def connection_cause(exc: BaseException) -> str:
    """Why a connection failed, in words: the first known cause along the exception's
    chain (`ConnectionRefusedError` → "connection refused"), else the first cause's
    class name."""
    chain: list[BaseException] = []
    link = exc.__cause__ or exc.__context__
    while link is not None and link not in chain and len(chain) < 16:
        chain.append(link)
        link = link.__cause__ or link.__context__
    for cause in chain:
        for kind, words in _CONNECTION_CAUSES:
            if isinstance(cause, kind):
                return words
    return type(chain[0]).__name__ if chain else "unknown cause"


def server_address(host: str, port: int | None, scheme: str) -> str:
    """`host:port` of a model server (the scheme's default port when none is given)."""
    shown = f"[{host}]" if ":" in host else host  # an IPv6 literal
    return f"{shown}:{port or (443 if scheme == 'https' else 80)}"


def classify_status(status: int) -> ErrorCode:
    if status == 429:
        return ErrorCode.RATE_LIMIT
    if status == 408:
        return ErrorCode.TIMEOUT
    if status in (401, 402, 403):
        return ErrorCode.PERMISSION_DENIED
    if status == 409 or status >= 500:
        return ErrorCode.TRANSIENT  # 500, 502, 503, 504, 529 overloaded, 409 conflict
    return ErrorCode.MODEL_ERROR  # 400, 404, 413, 422 ...: the request itself is wrong


# --------------------------------------------------------------------------- backend


class AnthropicBackend(PacedSender):
    """`ModelBackend` over the Anthropic Messages API (one call per `complete`).

    `send` is the transport alone (a request body in, the reply's JSON body out, paced by
    the shared `limiter`), for the response cache and the recorder in between
    (errorflow/models/served_backend.py); `complete` renders, sends and parses."""

    def __init__(
        self,
        spec: ModelSpec,
        api_key: str,
        *,
        timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        limiter: RateLimiter | None = None,
        temperature: TemperaturePolicy = "auto",
        prompt_cache: bool = True,
        max_pacing_s: float = DEFAULT_MAX_PACING_S,
    ) -> None:
        if not isinstance(api_key, str) or not api_key.strip():
            raise ValueError(f"an Anthropic API key is required (set {API_KEY_ENV})")
        if not timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        self.wire = WireFormat.of(spec, temperature, prompt_cache)
        self.model = self.wire.model
        self.base_url = spec.base_url
        self.max_tokens = spec.max_tokens
        self.timeout_s = timeout_s
        self.limiter = limiter or RateLimiter()
        self.max_pacing_s = max_pacing_s
        # max_retries=0: the policy layer owns retries, backoff and Retry-After; an
        # SDK retry would hide failures from it and double-count the budget. The key
        # lives only inside the SDK client (which needs it for every request).
        self._client = AsyncAnthropic(
            api_key=api_key.strip(),
            base_url=spec.base_url,
            max_retries=0,
            timeout=timeout_s,
        )
        url = self._client.base_url
        #: `host:port` of the server, for messages (never the URL's user or password).
        self.server = server_address(url.host, url.port, url.scheme)

    def __repr__(self) -> str:
        where = f", base_url={redact(self.base_url)!r}" if self.base_url else ""
        return f"AnthropicBackend(model={self.model!r}{where})"

    __str__ = __repr__

    async def __aenter__(self) -> AnthropicBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.close()

    def _scrub(self, text: str) -> str:
        key = self._client.api_key
        if key:
            text = text.replace(key, "[REDACTED_KEY]")
        text = " ".join(redact(text).split())  # one line, whatever the server sent
        return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."

    def _wrap(self, exc: Exception, waited_s: float | None = None) -> ModelCallError:
        """An SDK exception → ModelCallError, by type and status only (`waited_s`: the
        timeout the request had, when not `timeout_s`)."""
        if isinstance(exc, anthropic.APITimeoutError):  # before APIConnectionError: a subclass
            waited = self.timeout_s if waited_s is None else waited_s
            reason = f"the model server at {self.server} did not answer in {waited:g}s"
            return ModelCallError(ErrorCode.INFRA_FAULT, reason, infrastructure=reason)
        if isinstance(exc, anthropic.APIConnectionError):
            reason = self._scrub(
                f"cannot reach the model server at {self.server} ({connection_cause(exc)})"
            )
            return ModelCallError(ErrorCode.TRANSIENT, reason, infrastructure=reason)
        if isinstance(exc, anthropic.APIStatusError):
            return self._status_error(exc)
        if isinstance(exc, anthropic.AnthropicError):  # e.g. a reply that fails validation
            return ModelCallError(
                ErrorCode.MODEL_ERROR, self._scrub(f"Anthropic SDK error ({type(exc).__name__})")
            )
        return ModelCallError(
            ErrorCode.INTERNAL_ERROR, self._scrub(f"model call failed ({type(exc).__name__})")
        )

    def _status_error(self, exc: anthropic.APIStatusError) -> ModelCallError:
        status = exc.status_code
        err_type = getattr(exc, "type", None)
        api_message = getattr(exc, "api_message", None)
        detail = f"HTTP {status}"
        if isinstance(err_type, str) and err_type:
            detail += f" {err_type}"
        if isinstance(api_message, str) and api_message:
            detail += f": {api_message}"
        return ModelCallError(
            classify_status(status),
            self._scrub(f"Anthropic API error {detail}"),
            status=status,
            retry_after_s=parse_retry_after(exc.response.headers),
            infrastructure=self._infrastructure(status, detail),
        )

    def _infrastructure(self, status: int, detail: str) -> str | None:
        """The one line an infrastructure status gets (None: the experiment's)."""
        if status in _KEY_REFUSED:
            return self._scrub(f"the model server at {self.server} refused the API key ({status})")
        if status == _NO_MODEL:
            reason = f"model {self.model} does not exist on the model server at {self.server}"
            return self._scrub(f"{reason} ({status})")
        if refused_for_good(status):
            return self._scrub(f"the model server at {self.server} refused the request ({detail})")
        return None

    def _judged(
        self, body: bytes, content_type: str | None, asked: str, shape: Shape, expected: str
    ) -> JsonObject | ModelCallError:
        """A 200's body as the reply `shape` describes, or the infrastructure fault of a
        server that answered something else (`asked`: the request, in words)."""
        reply = read_reply(body, content_type, shape)
        if not isinstance(reply, NotAReply):
            return reply
        reason = self._scrub(
            f"the model server at {self.server} answered {asked} with {reply.what}, not {expected}"
        )
        return ModelCallError(ErrorCode.INFRA_FAULT, reason, infrastructure=reason)

    async def check(self) -> None:
        """One cheap request before the first trial: the server answers, accepts the key,
        has the model and answers in the API's shapes (`models.retrieve`; a server without
        that endpoint answers 404 or another 4xx, so that is confirmed by a one-token
        message). Raises `InfrastructureError`; a rate limit or an overload is not a
        reason to refuse the run."""
        failure = await self._try(self._lookup_model)
        if failure is not None and _lookup_unserved(failure.status):
            failure = await self._try(self._ping)
        if failure is None:
            return
        reason = failure.infrastructure
        if reason is not None:
            log.debug("anthropic check failed model=%s server=%s", self.model, self.server)
            raise InfrastructureError(reason)


    async def _lookup_model(self) -> ModelCallError | None:
        client = self._client.with_options(timeout=self._check_s)
        raw = await client.models.with_raw_response.retrieve(self.model)
        asked = f"the lookup of model {self.model}"
        content_type = raw.headers.get("content-type")
        judged = self._judged(
            await raw.read(), content_type, asked, model_description, "a model description"
        )
        return judged if isinstance(judged, ModelCallError) else None

    async def _ping(self) -> ModelCallError | None:
        client = self._client.with_options(timeout=self._check_s)
        raw = await client.messages.with_raw_response.create(
            model=self.model,
            max_tokens=1,
            messages=[{"role": "user", "content": "ping"}],
        )
        content_type = raw.headers.get("content-type")
        judged = self._judged(
            await raw.read(), content_type, _MESSAGES_REQUEST, messages_reply, _MESSAGES_REPLY
        )
        return judged if isinstance(judged, ModelCallError) else None

    async def _post(self, body: WireRequest) -> Posted | Refused:
        named = {k: body[k] for k in _SDK_FIELDS if k in body}
        extra = {k: v for k, v in body.items() if k not in _SDK_FIELDS}
        failure: Refused | None = None
        try:
            raw = await self._client.messages.with_raw_response.create(
                **cast(Any, named), extra_body=extra or None
            )
            headers = _lower(raw.headers)
            body_bytes = await raw.read()
        except Exception as exc:  # every failure becomes a ModelCallError
            failure = Refused(self._wrap(exc), _headers_of(exc))
        if failure is not None:
            # Returned outside the handler so that neither __cause__ nor __context__ keeps
            # the SDK exception, which holds the request (and its auth header).
            return failure
        content_type = headers.get("content-type")
        reply = self._judged(
            body_bytes, content_type, _MESSAGES_REQUEST, messages_reply, _MESSAGES_REPLY
        )
        if isinstance(reply, ModelCallError):
            return Refused(reply, headers)
        return Posted(reply, headers, _used_tokens(reply))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body, name_map = self.wire.render(request)
        log.debug(
            "anthropic call agent=%s model=%s messages=%d tools=%d",
            request.agent,
            self.model,
            len(cast(list[object], body["messages"])),
            len(cast(list[object], body["tools"])),
        )
        try:
            reply = await self.send(body)
        except ModelCallError as err:
            log.debug(
                "anthropic call failed agent=%s code=%s status=%s",
                request.agent,
                err.code,
                err.status,
            )
            raise
        response = parse_reply(reply, name_map)
        log.debug(
            "anthropic reply agent=%s stop=%s in=%d out=%d calls=%d final=%s",
            request.agent,
            response.stop_reason,
            response.usage.input_tokens,
            response.usage.output_tokens,
            len(response.calls),
            response.final is not None,
        )
        return response


_MESSAGES_REQUEST = "a Messages API request"
_MESSAGES_REPLY = "a Messages API reply"


def _lookup_unserved(status: int | None) -> bool:
    """A model lookup refused as a route the server does not serve (a 404, or a proxy's
    400 or 405), not for the key: the one-token message decides instead."""
    return status is not None and refused_for_good(status) and status not in _KEY_REFUSED


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _headers_of(exc: Exception) -> dict[str, str]:
    """The headers of a failed request's response (a 429's retry-after, rate-limit
    headers), or none when the request got no response."""
    if isinstance(exc, anthropic.APIStatusError):
        return _lower(exc.response.headers)
    return {}


def _used_tokens(reply: JsonObject) -> int:
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return 0
    names = ("input_tokens", "output_tokens", "cache_read_input_tokens",
             "cache_creation_input_tokens")  # fmt: skip
    return sum(_int(usage.get(n)) for n in names)
