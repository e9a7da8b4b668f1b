"""MCP tools against a real server (the SDK's FastMCP, tests/mcp_server.py): the tool
list discovered once per process, calls, and every way a call fails classified at the
tool edge; a server that cannot start, or that dies, is the infrastructure's."""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from errorflow.core.taxonomy import ErrorCode
from errorflow.core.tool_errors import JsonRpcError, ToolResultError, ToolServerDown
from errorflow.policies.classify import classify_exception
from errorflow.scenario.problems import ScenarioError
from errorflow.scenario.spec.tool_model import ToolSpec
from errorflow.world.mcp import tool as mcp_tool
from errorflow.world.mcp.host import close_sessions, mcp_host
from errorflow.world.mcp.session import McpCallTimeout
from errorflow.world.mcp.tool import McpTool
from tests.conftest import free_port
from tests.mcp_support import SERVER, spec


@pytest.fixture(autouse=True, scope="module")
def _sessions_closed() -> Iterator[None]:
    yield
    close_sessions()


def tool(name: str, remote: str | None = None, **server: object) -> McpTool:
    return McpTool.load(name, spec(remote, **server))


async def call(t: McpTool, timeout_s: float = 10, **args: object) -> object:
    return await t.call(t.args_model.model_validate(args), timeout_s)


# -- the tools ------------------------------------------------------------------------
def test_the_tool_list_and_input_schema_come_from_the_server() -> None:
    t = tool("account")
    assert t.description == "One field of an account."
    assert t.input_schema["required"] == ["account", "field"]
    assert t.input_schema["properties"]["field"]["enum"] == ["owner", "tier", "open_tickets"]
    assert {"account", "profile", "tickets.count", "crash"} <= set(t.session.tools)
    # One session per server and process: every tool of it shares the connection.
    assert tool("profile").session is t.session


def test_a_tool_the_server_lacks_is_a_problem_of_the_scenario() -> None:
    with pytest.raises(ScenarioError) as info:
        tool("acount")
    problem = info.value.problems[0]
    assert problem.path == "tools.acount"
    assert "has no tool 'acount'" in problem.message and "account" in problem.message
    with pytest.raises(ScenarioError) as info:
        tool("tickets", "ticket.count")
    assert info.value.problems[0].path == "tools.tickets.tool"


async def test_answers() -> None:
    assert await call(tool("account"), account="ACME", field="owner") == "Dana Reyes"
    assert await call(tool("account"), account="GLOBEX", field="open_tickets") == 12
    # JSON text (no structured content) is its value; a name that is no identifier.
    profile = await call(tool("profile"), account="INITECH")
    assert profile == {"account": "INITECH", "owner": "Lu Wen", "tier": "bronze", "open_tickets": 0}
    assert await call(tool("tickets", "tickets.count"), account="ACME") == 3
    assert await call(tool("lines")) == ["first", "second"]


async def test_an_error_result_is_a_refusal() -> None:
    with pytest.raises(ToolResultError) as info:
        await call(tool("refuse"), reason="credit limit exceeded")
    failure = classify_exception("refuse", info.value)
    assert failure.code is ErrorCode.BUSINESS_RULE
    assert failure.reason is not None and "credit limit exceeded" in failure.reason


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (-32602, ErrorCode.INVALID_ARGS),
        (-32603, ErrorCode.TRANSIENT),
        (-32601, ErrorCode.UNKNOWN_TOOL),
        (-32002, ErrorCode.NOT_FOUND),
        (-32050, ErrorCode.INTERNAL_ERROR),
    ],
)
async def test_json_rpc_errors_by_their_code(code: int, expected: ErrorCode) -> None:
    with pytest.raises(JsonRpcError) as info:
        await call(tool("rpc_error"), code=code)
    assert info.value.code == code and f"MCP error {code}" in info.value.raw
    assert classify_exception("rpc_error", info.value).code is expected


async def test_a_call_past_its_timeout_is_a_timeout_and_the_session_goes_on() -> None:
    slow = tool("sleep")
    started = time.monotonic()
    with pytest.raises(McpCallTimeout) as info:
        await call(slow, timeout_s=0.3, seconds=5)
    assert time.monotonic() - started < 3
    assert info.value.waited_s == 0.3
    assert classify_exception("sleep", info.value).code is ErrorCode.TIMEOUT
    assert await call(slow, seconds=0) == "awake"


# -- a server that cannot start, or dies ----------------------------------------------
async def test_a_call_the_host_never_answers_is_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host bounds each call; should its loop stall, the caller's own bound (the
    call's timeout and some slack) ends the call as a timeout all the same."""
    t = tool("sleep")

    def stalled(work: Coroutine[Any, Any, object]) -> concurrent.futures.Future[object]:
        work.close()  # never run: the host's loop stalled
        return concurrent.futures.Future()

    monkeypatch.setattr(mcp_tool, "SYNC_SLACK_S", 0.2)
    monkeypatch.setattr(mcp_host(), "submit", stalled)
    with pytest.raises(McpCallTimeout, match=r"did not answer within 0\.3s") as info:
        await call(t, timeout_s=0.3, seconds=0)
    assert info.value.waited_s == 0.3


def test_a_server_that_cannot_start_says_so_in_one_line(tmp_path: Path) -> None:
    missing = ToolSpec.model_validate(
        {"kind": "mcp", "server": {"command": str(tmp_path / "no-such-server")}}
    )
    with pytest.raises(ToolServerDown) as info:
        McpTool.load("x", missing)
    text = str(info.value)
    assert "could not start" in text and "no-such-server" in text and "\n" not in text
    script = "import sys; sys.stderr.write('boom: no config file\\n'); sys.exit(2)"
    exits = ToolSpec.model_validate(
        {"kind": "mcp", "server": {"command": sys.executable, "args": ["-c", script]}}
    )
    with pytest.raises(ToolServerDown) as info:
        McpTool.load("x", exits)
    assert "stderr: boom: no config file" in str(info.value) and "\n" not in str(info.value)


async def test_a_server_that_dies_is_gone_for_its_tools_until_they_load_again() -> None:
    crash = tool("crash", env={"WHICH": "dies"})
    account = tool("account", env={"WHICH": "dies"})
    with pytest.raises(ToolServerDown) as info:
        await call(crash)
    failure = classify_exception("crash", info.value)
    assert failure.code is ErrorCode.INFRA_FAULT and "is gone" in failure.raw
    with pytest.raises(ToolServerDown):  # every later call too, at once
        await call(account, account="ACME", field="owner")
    again = tool("account", env={"WHICH": "dies"})  # loading again starts it anew
    assert again.session is not account.session
    assert await call(again, account="ACME", field="tier") == "gold"


def test_the_ground_truth_call_works_from_inside_a_running_loop() -> None:
    t = tool("account")
    args = t.args_model.model_validate({"account": "ACME", "field": "owner"})

    async def inside() -> object:
        return t.call_sync(args, 10)

    assert asyncio.run(inside()) == "Dana Reyes"


# -- streamable HTTP ------------------------------------------------------------------
def _wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("the HTTP server did not start")


async def test_a_server_reached_over_streamable_http_and_killed() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(port, process)
        url = {"kind": "mcp", "server": {"url": f"http://127.0.0.1:{port}/mcp"}}
        t = McpTool.load("account", ToolSpec.model_validate(url))
        assert await call(t, account="GLOBEX", field="owner") == "Sam Okafor"
        with pytest.raises(JsonRpcError):
            await call(McpTool.load("rpc_error", ToolSpec.model_validate(url)), code=-32602)
    finally:
        process.kill()
        process.wait()
    with pytest.raises(ToolServerDown) as info:
        await call(t, account="ACME", field="owner")
    assert classify_exception("account", info.value).code is ErrorCode.INFRA_FAULT
    with pytest.raises(ToolServerDown) as info:  # nobody at the URL any more
        McpTool.load("account", ToolSpec.model_validate(url))
    assert "could not start" in str(info.value) and "\n" not in str(info.value)


def test_sessions_close_with_the_process_host() -> None:
    t = tool("account", env={"WHICH": "closed"})
    assert t.session.gone is None
    close_sessions()
    assert t.session.gone is not None
    assert mcp_host().session(t.session.server) is not t.session
