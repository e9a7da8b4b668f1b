"""Exceptions the simulated tools raise, shaped like the ones real client libraries raise.

The tools do not classify their own failures: like an HTTP client or a database driver
they raise typed exceptions carrying a status or a structured detail, and the edge
(`errorflow.policies.classify`) maps those to error codes. The `raw` text is what the
library would have printed; it may contain secrets and paths, so it goes to the trace
and, only after redaction, to a model that asked for `raw` errors.
"""

from __future__ import annotations

from typing import Any

from errorflow.core.errors import ErrorflowError


class ToolException(ErrorflowError):
    raw: str

    def __init__(self, raw: str) -> None:
        super().__init__(raw)
        self.raw = raw


class HTTPStatusError(ToolException):
    def __init__(self, status: int, raw: str, retry_after_s: float | None = None) -> None:
        super().__init__(raw)
        self.status = status
        self.retry_after_s = retry_after_s


class ConnectTimeout(ToolException):
    """A network-level failure before any response (ETIMEDOUT, ECONNRESET)."""


class CallTimeout(ToolException):
    """The call did not answer within the per-call timeout."""

    def __init__(self, raw: str, waited_s: float) -> None:
        super().__init__(raw)
        self.waited_s = waited_s


class SchemaViolation(ToolException):
    """The call does not match the tool's schema (caught before the tool runs)."""

    def __init__(
        self,
        raw: str,
        *,
        field: str,
        constraint: str,
        received: Any,
        missing: bool = False,
        options: list[str] | None = None,
        unexpected: bool = False,
    ) -> None:
        super().__init__(raw)
        self.field = field
        self.constraint = constraint
        self.received = received
        self.missing = missing  # a required argument is absent
        self.options = options  # valid values (or, when unexpected, valid parameter names)
        self.unexpected = unexpected  # the argument is not a parameter of the tool


class UnknownValue(ToolException):
    """An argument names something the backend does not have (ENOENT-style)."""

    def __init__(self, raw: str, *, field: str, received: Any, options: list[str]) -> None:
        super().__init__(raw)
        self.field = field
        self.received = received
        self.options = options


class UnknownTool(ToolException):
    def __init__(self, raw: str, *, options: list[str]) -> None:
        super().__init__(raw)
        self.options = options


class UnknownKey(ToolException):
    """A record lookup found no record for a key (HTTP 404-style, `not_found`): the
    valid keys travel with it, for observations whose style lists them."""

    def __init__(self, raw: str, *, field: str, received: Any, options: list[str]) -> None:
        super().__init__(raw)
        self.field = field
        self.received = received
        self.options = options


class ToolResultError(ToolException):
    """The tool ran and answered that it failed (an MCP result with `isError`): what
    HTTP 200 with `success: false` is to a REST service. `raw` is the tool's own text."""


class JsonRpcError(ToolException):
    """A JSON-RPC error response (an MCP server's): `code` as the protocol numbers it
    (-32602 invalid params, -32603 internal error, ...)."""

    def __init__(self, raw: str, *, code: int) -> None:
        super().__init__(raw)
        self.code = code


class ToolServerDown(ToolException):
    """The server behind a tool could not be started or reached, or went away (an MCP
    server that exited): errorflow's infrastructure failed, not the experiment, so a
    trial that meets it is not scored. The message is one line naming the server."""
