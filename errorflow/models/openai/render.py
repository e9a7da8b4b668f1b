"""A `ModelRequest` as the body of one OpenAI Chat Completions request.

The conversation is the one the Anthropic backend sends, in Chat Completions' terms:
the system prompt (with the same working rules) as a `system` message, the task and
upstream messages as `user` messages, the model's tool calls as an `assistant` message's
`tool_calls` (arguments as a JSON string), and each tool's result as a `tool` message.
Chat Completions has no error flag on a tool result, so a failed call's result says so
itself: its JSON starts with `"is_error": true` (its `ok` is false, as always).

Tools are `function` tools with the scenario's JSON Schema as `parameters`, plus the
`submit_answer` tool the model finishes with; `tool_choice` is sent as "auto" (the API's
default, which some servers, llama.cpp's among them, need said to use the tools at all).
A claim's `value` (any JSON value) is spelled as the union of every JSON type rather than
left untyped: servers that constrain tool arguments with a grammar built from the schema
(llama.cpp's) cannot build one from an untyped value and fall back to a grammar of any
JSON at all, in which a small model can write without end (that path also ignores
`max_tokens`, so the request runs until the context is full).

The pairing every server checks is repaired rather than sent broken: the `tool` messages
answering an assistant message's calls come right after it, a call left without a result
gets an error result, and a result for no call of that message is sent as user text.
Consecutive user texts are one message, the conversation starts with a user message and
does not end with an assistant's (strict chat templates of local servers want that).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import JsonValue

from errorflow.models.anthropic.request import (
    SUBMIT_DESCRIPTION,
    SUBMIT_SCHEMA,
    SUBMIT_TOOL,
    render_system,
    render_task,
    render_upstream,
)
from errorflow.models.backend import (
    AssistantTurn,
    ObservationTurn,
    TaskTurn,
    ToolCall,
    ToolDef,
    Turn,
    UpstreamTurn,
)
from errorflow.protocol.envelope import JsonObject

_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NAME_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def api_name(name: str) -> str:
    """A function name the API accepts (``[A-Za-z0-9_-]{1,64}``): scenario identifiers
    may hold dots, which become underscores (undone on the way back)."""
    if _NAME_OK.match(name):
        return name
    return _NAME_BAD_CHARS.sub("_", name)[:64] or "_"


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _function(name: str, description: str, schema: JsonObject) -> JsonObject:
    parameters: JsonObject = dict(schema)
    parameters.setdefault("type", "object")
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


#: Every JSON type: "any JSON value" as a schema a grammar can be built from.
ANY_JSON_TYPE = ("string", "number", "integer", "boolean", "array", "object", "null")


def submit_schema() -> JsonObject:
    """The final-answer schema with each claim's `value` typed as any JSON type."""
    schema: Any = copy.deepcopy(SUBMIT_SCHEMA)
    value = schema["properties"]["claims"]["items"]["properties"]["value"]
    value.setdefault("type", list(ANY_JSON_TYPE))
    return cast(JsonObject, schema)


def render_tools(tools: Iterable[ToolDef]) -> list[JsonValue]:
    out: list[JsonValue] = [
        _function(api_name(t.name), t.description, t.input_schema) for t in tools
    ]
    out.append(_function(SUBMIT_TOOL, SUBMIT_DESCRIPTION, submit_schema()))
    return out


def _call(call: ToolCall) -> JsonObject:
    # A truncated call (a str) goes back as the text it was: the API wants a string.
    arguments = call.arguments if isinstance(call.arguments, str) else compact(call.arguments)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": api_name(call.name), "arguments": arguments},
    }


def _result_text(content: Mapping[str, JsonValue], is_error: bool) -> str:
    return compact({"is_error": True, **content} if is_error else dict(content))


def _tool_message(call_id: str, text: str) -> JsonObject:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


_NO_RESULT = _result_text({"ok": False, "error": {"message": "no result was recorded"}}, True)


@dataclass
class _Exchange:
    """The messages after one assistant message, up to the next: the results of its
    calls (`calls`: their ids, in order) and the user texts."""

    calls: list[str] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)

    def observe(self, turn: ObservationTurn) -> None:
        text = _result_text(turn.content, turn.is_error)
        if turn.call_id in self.calls and turn.call_id not in self.results:
            self.results[turn.call_id] = text
        else:
            self.texts.append(f"Result of tool call {turn.call_id}: {text}")

    def messages(self) -> list[JsonValue]:
        out: list[JsonValue] = [
            _tool_message(i, self.results.get(i, _NO_RESULT)) for i in self.calls
        ]
        if self.texts:
            out.append({"role": "user", "content": "\n\n".join(self.texts)})
        return out


def render_messages(system: str, turns: Iterable[Turn]) -> list[JsonValue]:
    """The system prompt and the turns as Chat Completions `messages`."""
    out: list[JsonValue] = [{"role": "system", "content": render_system(system)}]
    pending = _Exchange()
    for turn in turns:
        if isinstance(turn, TaskTurn):
            pending.texts.append(render_task(turn))
        elif isinstance(turn, UpstreamTurn):
            pending.texts.append(render_upstream(turn))
        elif isinstance(turn, ObservationTurn):
            pending.observe(turn)
        elif isinstance(turn, AssistantTurn):
            if not turn.calls and not turn.text:
                continue  # nothing said: an empty assistant message is refused
            out.extend(pending.messages())
            if len(out) == 1:  # the model speaks first: a user message goes before it
                out.append({"role": "user", "content": "Begin."})
            # Text even when empty: some servers (llama.cpp's) refuse a null content.
            message: JsonObject = {"role": "assistant", "content": turn.text}
            if turn.calls:
                message["tool_calls"] = [_call(c) for c in turn.calls]
            out.append(message)
            pending = _Exchange(calls=[c.id for c in turn.calls])
        else:
            raise TypeError(f"unknown turn type {type(turn).__name__}")
    out.extend(pending.messages())
    last = out[-1]
    if isinstance(last, dict) and last.get("role") in ("system", "assistant"):
        out.append({"role": "user", "content": "Continue." if len(out) > 1 else "Begin."})
    return out
