"""The Anthropic Messages API as a `Wire` (errorflow/models/wire.py): the backend's
`WireFormat` renders a request, `parse_reply` reads a reply, and a reply's usage is
read with its prompt cache's share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from errorflow.models.anthropic.reply import parse_reply
from errorflow.models.anthropic.request import WireFormat
from errorflow.models.backend import ModelRequest, ModelResponse
from errorflow.models.model_usage import CachedUsage
from errorflow.models.wire import WireRequest
from errorflow.protocol.envelope import JsonObject


@dataclass(frozen=True)
class MessagesWire:
    format: WireFormat

    def render(self, request: ModelRequest) -> tuple[WireRequest, dict[str, str]]:
        return self.format.render(request)

    def parse(self, reply: JsonObject, names: Mapping[str, str]) -> ModelResponse:
        return parse_reply(reply, names)

    def usage(self, reply: JsonObject) -> CachedUsage:
        """`input_tokens` of a Messages reply are the uncached ones: the cache's read and
        write are added to make the total."""
        usage = reply.get("usage")
        if not isinstance(usage, dict):
            return CachedUsage()
        read = as_int(usage.get("cache_read_input_tokens"))
        write = as_int(usage.get("cache_creation_input_tokens"))
        return CachedUsage(
            input_tokens=as_int(usage.get("input_tokens")) + read + write,
            output_tokens=as_int(usage.get("output_tokens")),
            cache_read_tokens=read,
            cache_write_tokens=write,
        )


def as_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
