"""What every real model API looks like to the served path: a wire format and a client.

A `Wire` turns a `ModelRequest` into the JSON body of one request and reads a reply's
JSON body back into a `ModelResponse` and its usage. The served path (the response
cache, the cassette and the traffic log: errorflow/models/served_backend.py) and the
dry run (errorflow/models/model_estimate.py) work on bodies and replies through it
alone, so they serve every API alike. A `Client` sends a body to the API's server and
returns the reply's body (through the shared rate limiter), checks the server before
the first trial, and waits for it to answer again after a request timed out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pydantic import JsonValue

from errorflow.models.backend import ModelRequest, ModelResponse
from errorflow.models.model_usage import CachedUsage
from errorflow.protocol.envelope import JsonObject

#: A request body as errorflow sends it: JSON values only, so that it can be hashed,
#: cached and recorded exactly as sent.
WireRequest = dict[str, JsonValue]


class Wire(Protocol):
    def render(self, request: ModelRequest) -> tuple[WireRequest, dict[str, str]]:
        """The request body, and the API's tool names → the scenario's."""
        ...

    def parse(self, reply: JsonObject, names: Mapping[str, str]) -> ModelResponse:
        """A reply's body (from the server, the response cache or a cassette)."""
        ...

    def usage(self, reply: JsonObject) -> CachedUsage:
        """What a reply's body says it used (input counts cached tokens too)."""
        ...


class Client(Protocol):
    async def send(self, body: WireRequest) -> JsonObject: ...

    async def check(self) -> None:
        """Raises `InfrastructureError` when the server cannot serve the run."""
        ...

    async def wait_free(self, wait_s: float) -> str | None:
        """None once the server answers again (within `wait_s`), else why not."""
        ...

    async def aclose(self) -> None: ...
