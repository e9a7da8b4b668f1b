"""JSON-RPC error codes at the tool edge."""

from __future__ import annotations

import pytest

from errorflow.core.taxonomy import ErrorCode
from errorflow.core.tool_errors import JsonRpcError, ToolResultError, ToolServerDown
from errorflow.policies.classify import classify_exception
from errorflow.policies.rpc_errors import classify_rpc


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (-32700, ErrorCode.INTERNAL_ERROR),
        (-32600, ErrorCode.INTERNAL_ERROR),
        (-32601, ErrorCode.UNKNOWN_TOOL),
        (-32602, ErrorCode.INVALID_ARGS),
        (-32603, ErrorCode.TRANSIENT),
        (-32001, ErrorCode.TIMEOUT),
        (-32002, ErrorCode.NOT_FOUND),
        (-32042, ErrorCode.PERMISSION_DENIED),
        (-32099, ErrorCode.INTERNAL_ERROR),
        (1, ErrorCode.INTERNAL_ERROR),
    ],
)
def test_codes(code: int, expected: ErrorCode) -> None:
    assert classify_rpc(code) is expected
    failure = classify_exception("t", JsonRpcError(f"MCP error {code}: x", code=code))
    assert failure.code is expected and failure.http_status is None


def test_a_refusal_and_a_server_gone() -> None:
    refused = classify_exception("t", ToolResultError("sku discontinued"))
    assert (refused.code, refused.reason) == (ErrorCode.BUSINESS_RULE, "sku discontinued")
    gone = classify_exception("t", ToolServerDown("MCP server 'x' is gone: it exited"))
    assert gone.code is ErrorCode.INFRA_FAULT and gone.raw.endswith("it exited")
