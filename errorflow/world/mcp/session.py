"""One connection to one MCP server, living on the host's event loop (errorflow.world.mcp.
host): started, its handshake made and its tools listed once, then reused by every call.

A task of its own holds the transport and the SDK's `ClientSession` open (the SDK's
cancel scopes must be entered and left by one task) until the session is closed or the
transport fails; calls are other tasks on the same loop, so a transport that crashes
fails them with an error instead of cancelling its callers.

What a call's failure is: the server's JSON-RPC error (`JsonRpcError`, by its code), no
answer within the call's timeout (`McpCallTimeout`), or the server gone (`ToolServerDown`:
the connection closed under the call and a ping finds nobody), which is errorflow's
infrastructure failing, not the experiment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import anyio

from errorflow.core.tool_errors import CallTimeout, JsonRpcError, ToolServerDown
from errorflow.scenario.spec.mcp_model import McpServer
from errorflow.world.mcp import sdk

#: How long a ping may take to say whether a server whose connection closed is still there.
PING_TIMEOUT_S = 5.0
#: Most pages of `tools/list` read (a server that pages forever is cut off there).
MAX_PAGES = 100
#: How much of a server's stderr a message quotes.
STDERR_TAIL = 300


#: What a transport that broke raises into a call (the SDK turns most into an error response).
_BROKEN = (
    OSError,
    EOFError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
)


class McpCallTimeout(CallTimeout, TimeoutError):
    """The server did not answer a call within its timeout: a TimeoutError, and
    errorflow's own CallTimeout (with `waited_s`), as a Python tool's timeout is."""

    @classmethod
    def of(cls, tool: str, timeout_s: float) -> McpCallTimeout:
        return cls(f"TimeoutError: MCP tool {tool} did not answer within {timeout_s:g}s",
                   waited_s=timeout_s)  # fmt: skip


class McpSession:
    def __init__(self, server: McpServer) -> None:
        self.server = server
        #: The server's tools by name, as `tools/list` gave them (wire form).
        self.tools: dict[str, dict[str, Any]] = {}
        #: Why the session is over (None while it serves).
        self.gone: str | None = None
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None
        # The server's stderr (its last line is quoted when it fails); open while it runs.
        self._errlog: IO[str] = tempfile.TemporaryFile(  # noqa: SIM115
            "w+", encoding="utf-8", errors="replace"
        )
        self._rpc_error: type[Exception] = Exception

    # -- life ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect, shake hands and list the tools; ToolServerDown (one line) if not."""
        sdk.sdk()
        self._rpc_error = sdk.rpc_error_type()
        self._stop = asyncio.Event()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._holder = asyncio.create_task(self._hold(ready), name=f"mcp {self.server.label}")
        await ready

    async def close(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._holder is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._holder), timeout=15)
        self._errlog.close()

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        assert self._stop is not None
        try:
            async with self._connected() as session:
                self._session = session
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            reason = self._why(exc)
            if not ready.done():
                ready.set_exception(ToolServerDown(f"{self.name} could not start: {reason}"))
            else:
                self.gone = self.gone or reason
            if isinstance(exc, asyncio.CancelledError) and _cancelling():
                raise
        finally:
            self.gone = self.gone or "it was closed"
            self._session = None

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[Any]:
        server = self.server
        mcp = sdk.sdk()
        async with contextlib.AsyncExitStack() as stack:
            if server.url is not None:
                streams = sdk.http_streams(server.url)
            else:
                assert server.command is not None
                command = server_command(server.command)
                streams = sdk.stdio_streams(
                    command, server.args, server.env, server.cwd, self._errlog
                )
            read, write = await stack.enter_async_context(streams)
            session = await stack.enter_async_context(mcp.ClientSession(read, write))
            try:
                async with asyncio.timeout(server.startup_timeout_s):
                    await session.initialize()
                    self.tools = await self._list(session)
            except TimeoutError:
                raise TimeoutError(
                    f"no answer to the handshake within {server.startup_timeout_s:g}s"
                ) from None
            yield session

    async def _list(self, session: Any) -> dict[str, dict[str, Any]]:
        tools: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = sdk.wire(await sdk.list_page(session, cursor))
            for tool in page.get("tools") or []:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    tools.setdefault(tool["name"], tool)
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return tools

    # -- calls --------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """`tools/call` once; the result in wire form (`content`, `structuredContent`,
        `isError`). Raises JsonRpcError, McpCallTimeout or ToolServerDown."""
        session = self._session
        if self.gone is not None or session is None:
            raise ToolServerDown(self._down())
        deadline = asyncio.timeout(timeout_s)
        try:
            async with deadline:
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise McpCallTimeout.of(tool, timeout_s) from None
        except self._rpc_error as exc:
            code = sdk.rpc_code(exc)
            if code == sdk.CONNECTION_CLOSED and not await self._alive(session):
                raise ToolServerDown(self._down()) from None
            raise JsonRpcError(
                f"MCP error {code}: {sdk.rpc_message(exc)}", code=code if code is not None else 0
            ) from None
        except _BROKEN as exc:  # the transport broke under the call: nothing more goes through
            self.gone = self.gone or f"its connection broke ({type(exc).__name__}: {exc})"
            raise ToolServerDown(self._down()) from None
        return sdk.wire(result)

    async def _alive(self, session: Any) -> bool:
        """Whether the server still answers: a ping that gets any answer (an error
        response too) or none in time (busy) says yes; a closed connection says no."""
        if self.gone is not None:
            return False
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await session.send_ping()
            return True
        except TimeoutError:
            return True
        except self._rpc_error as exc:
            if sdk.rpc_code(exc) != sdk.CONNECTION_CLOSED:
                return True
        except Exception:  # the transport itself is broken
            pass
        self.gone = self.gone or "it closed the connection (exited or crashed)"
        return False

    # -- words --------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"MCP server {self.server.label!r}"

    def _down(self) -> str:
        return f"{self.name} is gone: {self.gone or 'not connected'}{self._stderr()}"

    def _why(self, exc: BaseException) -> str:
        """What ended a connection, in one line: the first real failure of a group (a
        transport's task group wraps it), the server's last words on stderr."""
        cause = _root(exc)
        if cause is None:
            return "it was cancelled"
        code = sdk.rpc_code(cause)
        if code == sdk.CONNECTION_CLOSED:
            text = "it closed the connection before answering (exited or crashed)"
        else:
            text = " ".join(f"{type(cause).__name__}: {cause}".split())
        return text[:400] + self._stderr()

    def _stderr(self) -> str:
        """The last line the server wrote to stderr, if any (`; stderr: ...`)."""
        if self.server.url is not None or self._errlog.closed:
            return ""
        try:
            self._errlog.flush()
            self._errlog.seek(0, os.SEEK_END)
            size = self._errlog.tell()
            self._errlog.seek(max(0, size - 4096))
            lines = [ln.strip() for ln in self._errlog.read().splitlines() if ln.strip()]
        except (OSError, ValueError):
            return ""
        return f"; stderr: {lines[-1][-STDERR_TAIL:]}" if lines else ""


def _root(exc: BaseException) -> BaseException | None:
    """The first exception of a (nested) group that is not a cancellation."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _root(inner)
            if found is not None:
                return found
        return None
    if isinstance(exc, asyncio.CancelledError):
        return None
    return exc


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


#: `python`, `python3`, `python3.11`: the interpreter a server command names.
_PYTHON = re.compile(r"python(3(\.\d+)?)?")


def server_command(command: str) -> str:
    """The program a stdio server is started with. `python` (or `python3`...) is the
    Python errorflow runs in, whatever PATH says: a server module installed beside
    errorflow (`python -m errorflow.examples.inventory_mcp`) is importable there even
    when errorflow was started by path and PATH's `python` is another one. Another bare
    name is looked for beside that Python first (where `pip install` put a server's
    script), then on PATH; a path is taken as it is."""
    if os.sep in command or (os.altsep is not None and os.altsep in command):
        return command
    if _PYTHON.fullmatch(command):
        return sys.executable
    return shutil.which(command, path=str(Path(sys.executable).parent)) or command
