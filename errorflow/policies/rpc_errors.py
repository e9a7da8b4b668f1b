"""JSON-RPC error codes (an MCP server's error responses) → one error code.

The protocol's own codes say who is at fault as an HTTP status does: the arguments
(-32602, as 400 is `invalid_args`), the method (-32601: the server has no such tool),
the server's handler (-32603, as a 500 is `transient`), the request's deadline
(-32001). What neither JSON-RPC nor MCP defines, and the two codes that blame errorflow
itself (a request the server could not parse or read), are `internal_error`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from errorflow.core.taxonomy import ErrorCode

_CODES: Final[Mapping[int, ErrorCode]] = {
    -32700: ErrorCode.INTERNAL_ERROR,  # parse error: what was sent is not JSON
    -32600: ErrorCode.INTERNAL_ERROR,  # invalid request: not a request the server reads
    -32601: ErrorCode.UNKNOWN_TOOL,  # method not found
    -32602: ErrorCode.INVALID_ARGS,  # invalid params
    -32603: ErrorCode.TRANSIENT,  # internal error: the server's handler failed
    -32001: ErrorCode.TIMEOUT,  # MCP: request timeout
    -32002: ErrorCode.NOT_FOUND,  # MCP: resource not found
    -32042: ErrorCode.PERMISSION_DENIED,  # MCP: the user must authorise at a URL first
}


def classify_rpc(code: int) -> ErrorCode:
    """The class of a JSON-RPC error response by its code."""
    return _CODES.get(code, ErrorCode.INTERNAL_ERROR)
