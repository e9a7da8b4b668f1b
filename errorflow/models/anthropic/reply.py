"""A Messages API reply read back: tool calls, or the final answer from the submit tool's
arguments, and the usage with cached-prompt tokens."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from anthropic.types import (
    Message,
)

from errorflow.core.taxonomy import ErrorCode
from errorflow.models.anthropic.request import SUBMIT_TOOL, as_json
from errorflow.models.backend import (
    ModelCallError,
    ModelResponse,
    ToolCall,
    Usage,
)
from errorflow.models.model_usage import CachedUsage
from errorflow.protocol.claims import Claim, FinalAnswer
from errorflow.protocol.envelope import JsonObject

log = logging.getLogger(__name__)

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
        return [v if isinstance(v, str) else as_json(v) for v in value if v is not None]
    return [as_json(value)]


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
        text=text if isinstance(text, str) else ("" if text is None else as_json(text)),
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


def as_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(message: Message) -> CachedUsage:
    """The reply's usage: input counts every input token (cached or not), and the cache's
    share is kept apart (a server without a prompt cache reports none)."""
    u = getattr(message, "usage", None)
    if u is None:
        return CachedUsage()
    read = as_int(getattr(u, "cache_read_input_tokens", None))
    write = as_int(getattr(u, "cache_creation_input_tokens", None))
    return CachedUsage(
        input_tokens=as_int(getattr(u, "input_tokens", None)) + read + write,
        output_tokens=as_int(getattr(u, "output_tokens", None)),
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


def parse_reply(reply: Mapping[str, object], name_map: Mapping[str, str]) -> ModelResponse:
    """A reply's JSON body (from the server, the response cache or a cassette) →
    ModelResponse, as `parse_message` reads the SDK's Message."""
    # `construct` builds the typed blocks without validating, as the SDK does with a reply.
    message = Message.construct(**dict(reply))  # type: ignore[arg-type]
    return parse_message(message, name_map)
