"""An OpenAI Chat Completions reply as a `ModelResponse`.

The first choice's message decides, by its `finish_reason`:

- ``tool_calls`` / ``stop`` / None / anything else: the content decides. A
  `submit_answer` call → `final` (other calls in the same reply are dropped: the model
  said it is done); else the tool calls → `calls`; else prose only → a final answer with
  the text, no claims and the flag ``no_structured_answer``.
- ``length``: the reply may be cut mid-call. A complete `submit_answer` is used; anything
  else raises `UnusableReply` (model_error, not retryable: the same request would be cut
  again).
- ``content_filter``, or a message with a `refusal`: an abstaining final answer flagged
  ``content_filter`` or ``refusal``.

A call's `arguments` are a JSON string; one that is not a JSON object is kept as the
text it was (a truncated call, which the agent loop reports as a malformed call).
Usage: `prompt_tokens` is every input token, and `prompt_tokens_details.cached_tokens`
the share the server's prompt cache served (OpenAI's, vLLM's with prefix caching);
nothing is written to a cache at a price.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from errorflow.core.taxonomy import ErrorCode
from errorflow.models.anthropic.reply import parse_submit
from errorflow.models.anthropic.request import SUBMIT_TOOL
from errorflow.models.backend import (
    ModelCallError,
    ModelResponse,
    ToolCall,
    Usage,
)
from errorflow.models.model_usage import CachedUsage
from errorflow.protocol.claims import FinalAnswer
from errorflow.protocol.envelope import JsonObject

#: Finish reasons of a reply cut short by its token limit.
_CUT = frozenset({"length"})


class UnusableReply(ModelCallError):
    """A reply that arrived (tokens were spent) but cannot be used. Carries the usage
    so budgets can still charge it."""

    def __init__(self, message: str, *, usage: Usage, stop_reason: str) -> None:
        super().__init__(ErrorCode.MODEL_ERROR, message)
        self.usage = usage
        self.stop_reason = stop_reason


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def reply_usage(reply: Mapping[str, object]) -> CachedUsage:
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return CachedUsage()
    prompt = _int(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    return CachedUsage(
        input_tokens=prompt,
        output_tokens=_int(usage.get("completion_tokens")),
        cache_read_tokens=min(cached, prompt),
    )


def _message(reply: Mapping[str, object]) -> tuple[Mapping[str, object], str]:
    """The first choice's message and finish reason (empty when the reply has none)."""
    choices = reply.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(first, dict):
        return {}, "unknown"
    message = first.get("message")
    finish = first.get("finish_reason")
    return (message if isinstance(message, dict) else {}), (
        finish if isinstance(finish, str) else "unknown"
    )


def _text(content: object) -> str:
    """A message's content: a string, or (some servers) a list of text parts."""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
    return ""


def _arguments(raw: object) -> JsonObject | str:
    """A call's arguments: the JSON object its string holds, else the text as it was."""
    if isinstance(raw, dict):  # a server that sends the object itself
        return raw
    text = raw if isinstance(raw, str) else ""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return data if isinstance(data, dict) else text


@dataclass(frozen=True)
class _Calls:
    calls: list[ToolCall]
    submits: list[JsonObject | str]  # submit_answer arguments, as sent


def _read_calls(message: Mapping[str, object], names: Mapping[str, str]) -> _Calls:
    calls: list[ToolCall] = []
    submits: list[JsonObject | str] = []
    raw_calls = message.get("tool_calls")
    for index, raw in enumerate(raw_calls if isinstance(raw_calls, list) else []):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict):
            continue
        name = str(function.get("name") or "")
        arguments = _arguments(function.get("arguments"))
        if name == SUBMIT_TOOL:
            submits.append(arguments)
            continue
        # A server that leaves the id out: one the results can be paired with.
        given = raw.get("id")
        call_id = given if isinstance(given, str) and given else f"call_{index}"
        calls.append(ToolCall(id=call_id, name=names.get(name, name), arguments=arguments))
    return _Calls(calls, submits)


def _complete(data: object) -> bool:
    """Whether submit_answer arguments carry every required field with the right type
    (used after a cut reply, when they may have been cut short)."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("claims"), list)
        and isinstance(data.get("abstained"), bool)
    )


def parse_completion(
    reply: Mapping[str, object], names: Mapping[str, str] | None = None
) -> ModelResponse:
    message, stop_reason = _message(reply)
    usage = reply_usage(reply)
    text = _text(message.get("content"))
    found = _read_calls(message, names or {})

    def final(answer: FinalAnswer) -> ModelResponse:
        if not answer.text and text:
            answer.text = text
        return ModelResponse(final=answer, usage=usage, stop_reason=stop_reason)

    if stop_reason in _CUT:
        for data in found.submits:
            if _complete(data):
                return final(parse_submit(data))
        raise UnusableReply(
            f"{stop_reason}: the reply was cut off before a complete {SUBMIT_TOOL} call "
            f"({usage.output_tokens} output tokens)",
            usage=usage,
            stop_reason=stop_reason,
        )
    refusal = message.get("refusal")
    if stop_reason == "content_filter" or (isinstance(refusal, str) and refusal.strip()):
        flag = "content_filter" if stop_reason == "content_filter" else "refusal"
        said = refusal.strip() if isinstance(refusal, str) else ""
        return final(FinalAnswer(abstained=True, flags=[flag], text=said))
    if found.submits:
        return final(parse_submit(found.submits[0]))
    if found.calls:
        return ModelResponse(calls=found.calls, usage=usage, stop_reason=stop_reason)
    return final(FinalAnswer(flags=["no_structured_answer"]))
