"""How a `ModelRequest` becomes the body of one OpenAI Chat Completions request, and its
reply a `ModelResponse`: the `Wire` (errorflow/models/wire.py) of the openai backend.

What goes on the wire besides the conversation and the tools
(errorflow/models/openai/render.py): the model, the token limit and, where the server takes it, the
temperature. OpenAI's own API (no `base_url`, or a host under openai.com) takes the limit
as `max_completion_tokens` (its reasoning models refuse `max_tokens`), every other server
(vLLM, Ollama, llama.cpp, LM Studio, LiteLLM) as `max_tokens`. `temperature` follows the
rule the Anthropic backend has: by default ("auto") it is not sent to the vendor's own
API (OpenAI's reasoning models refuse any value but 1) and is sent to every other server;
"always" and "never" decide it for every server. A prompt cache needs no marks: a server
that has one (OpenAI's, vLLM's) caches the shared prefix by itself and says so in the
reply's usage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import JsonValue

from errorflow.core.taxonomy import ErrorCode
from errorflow.models.anthropic.request import SUBMIT_TOOL
from errorflow.models.backend import ModelCallError, ModelRequest, ModelResponse
from errorflow.models.model_usage import CachedUsage
from errorflow.models.openai.render import api_name, render_messages, render_tools
from errorflow.models.openai.reply import parse_completion, reply_usage
from errorflow.models.wire import WireRequest
from errorflow.protocol.envelope import JsonObject
from errorflow.scenario.spec.model import ModelSpec

#: Where the SDK sends requests when a spec names no base_url.
OPENAI_BASE_URL = "https://api.openai.com/v1"

#: The body field the token limit goes in.
TokenField = Literal["max_tokens", "max_completion_tokens"]


def openai_hosted(base_url: str | None) -> bool:
    """Whether requests go to OpenAI's own API (no base_url, or an openai.com host)."""
    if base_url is None:
        return True
    host = (urlsplit(base_url).hostname or "").lower()
    return host == "openai.com" or host.endswith(".openai.com")


def _tool_choice(has_tools: bool) -> JsonValue:
    """`auto` while the agent has tools of its own; `submit_answer` itself when it is the
    only tool, the one way the agent can finish. llama.cpp's server reads `max_tokens`
    only when a tool is chosen this way (its "auto" path generates until the context is
    full), so a tool-less agent's answer is bounded there too."""
    if has_tools:
        return "auto"
    return {"type": "function", "function": {"name": SUBMIT_TOOL}}


@dataclass(frozen=True)
class ChatWire:
    model: str
    max_tokens: int
    temperature: float | None = None  # None: not sent
    token_field: TokenField = "max_tokens"

    @classmethod
    def of(cls, spec: ModelSpec, temperature: str = "auto") -> ChatWire:
        """`temperature`: the policy, auto, always or never."""
        hosted = openai_hosted(spec.base_url)
        sent = temperature == "always" or (temperature == "auto" and not hosted)
        if not spec.model:
            raise ValueError("the openai backend needs a model name")
        field: TokenField = "max_completion_tokens" if hosted else "max_tokens"
        return cls(spec.model, spec.max_tokens, spec.temperature if sent else None, field)

    def render(self, request: ModelRequest) -> tuple[WireRequest, dict[str, str]]:
        name_map: dict[str, str] = {}
        for tool in request.tools:
            name = api_name(tool.name)
            if name == SUBMIT_TOOL:
                raise ModelCallError(
                    ErrorCode.MODEL_ERROR, f"tool name {tool.name!r} clashes with {SUBMIT_TOOL}"
                )
            name_map[name] = tool.name
        body: WireRequest = {
            "model": self.model,
            "messages": render_messages(request.system, request.turns),
            "tools": render_tools(request.tools),
            "tool_choice": _tool_choice(bool(request.tools)),
            self.token_field: self.max_tokens,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body, name_map

    def parse(self, reply: JsonObject, names: Mapping[str, str]) -> ModelResponse:
        return parse_completion(reply, names)

    def usage(self, reply: JsonObject) -> CachedUsage:
        return reply_usage(reply)
