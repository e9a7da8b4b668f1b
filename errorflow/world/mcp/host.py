"""The MCP sessions of this process, on an event loop of their own.

One session per server and process: the first run (or ground truth) that loads a
server's tools starts it, every agent and trial of the process shares it, and it is
closed when the process ends (or by `close_sessions`). A session that is gone (its
server exited) stays gone for the tools loaded from it: their calls are the
infrastructure's failures until tools are loaded again, which starts a fresh one.

The loop runs in a daemon thread, so a session serves callers on any loop, in any
thread, and the synchronous ground-truth call alike (the SDK's sessions are bound to
the loop that opened them).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from errorflow.core.tool_errors import ToolServerDown
from errorflow.scenario.spec.mcp_model import McpServer
from errorflow.world.mcp.session import McpSession

_T = TypeVar("_T")
#: Beyond a server's own startup timeout, how long starting it may take in all.
START_SLACK_S = 15.0
#: How long closing every session may take when the process ends.
CLOSE_TIMEOUT_S = 20.0


class McpHost:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sessions: dict[str, McpSession] = {}
        self._pid = os.getpid()

    def session(self, server: McpServer) -> McpSession:
        """The server's live session, started (and its tools listed) if there is none;
        ToolServerDown, in one line, when it cannot start."""
        with self._lock:
            loop = self._running_loop()
            current = self._sessions.get(server.key)
            if current is not None and current.gone is None:
                return current
            session = McpSession(server)
            future = asyncio.run_coroutine_threadsafe(session.start(), loop)
            try:
                future.result(timeout=server.startup_timeout_s + START_SLACK_S)
            except concurrent.futures.TimeoutError:
                future.cancel()
                self.submit(session.close())
                raise ToolServerDown(
                    f"{session.name} could not start within {server.startup_timeout_s:g}s"
                ) from None
            except BaseException:
                self.submit(session.close())
                raise
            self._sessions[server.key] = session
            return session

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        """Run `coro` on the sessions' loop."""
        return asyncio.run_coroutine_threadsafe(coro, self._running_loop())

    def close(self) -> None:
        """Close every session (their servers stop) and the loop."""
        with self._lock:
            loop, thread, sessions = self._loop, self._thread, list(self._sessions.values())
            self._sessions.clear()
            self._loop = self._thread = None
        if loop is None or thread is None or self._pid != os.getpid():
            return

        async def close_all() -> None:
            await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)

        # A server that will not stop: the process ends anyway.
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(close_all(), loop).result(CLOSE_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._pid != os.getpid():  # a forked child: the parent's thread is not here
            self._loop = self._thread = None
            self._sessions = {}
            self._pid = os.getpid()
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=_serve, args=(loop,), name="errorflow-mcp", daemon=True
            )
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


_HOST = McpHost()
atexit.register(_HOST.close)


def mcp_host() -> McpHost:
    """This process's sessions."""
    return _HOST


def close_sessions() -> None:
    """Stop every MCP server this process started (the next load starts them again)."""
    _HOST.close()
