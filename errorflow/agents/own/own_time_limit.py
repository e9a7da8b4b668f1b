"""How long a python agent's own code may run: its time, not its tool and model calls'.

A callable that never returns (it awaits a reply of its own service that never comes,
an event nobody sets) kept its trial from ending, and the runner gave the trial up as a
bus fault: the bus had lost nothing. So the callable runs under a deadline of
`function_timeout_s` seconds; past it, it is cancelled and the agent fails with a
`timeout`, as a callable that raised TimeoutError does, and its result says so.

The deadline stops while the callable is inside errorflow's gates (`ctx.call_tool`,
`ctx.model.complete`): each call there is bounded by its own timeouts (a tool's
`per_call_timeout_s`, a model's `--model-timeout` and the waits for its server), and a
callable making many calls is no slower for it. Calls made at once (`asyncio.gather`)
stop it once; while any is in flight the deadline is stopped for all of the callable's
code, work of its own beside the call included. Built on `asyncio.timeout`'s
reschedule, so nothing runs while the code runs: no task, no watcher.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from errorflow.core.errors import ErrorflowError


class OwnTimeLimit:
    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._timeout: asyncio.Timeout | None = None
        self._inside = 0  # gate calls in progress
        self._left = limit_s  # what was left when the deadline stopped

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The callable's run: raises `OwnCodeTimeout` once its own time is up."""
        try:
            async with asyncio.timeout(self.limit_s) as timeout:
                self._timeout = timeout
                try:
                    yield
                finally:
                    self._timeout = None
        except TimeoutError as exc:
            if not timeout.expired():  # the callable's own TimeoutError
                raise
            raise OwnCodeTimeout(self.limit_s) from exc

    @contextmanager
    def paused(self) -> Iterator[None]:
        """A gate call: the deadline does not run while it does."""
        timeout = self._timeout
        if timeout is None or timeout.expired():  # not running (a call left behind)
            yield
            return
        loop = asyncio.get_running_loop()
        if self._inside == 0:
            when = timeout.when()
            self._left = self.limit_s if when is None else when - loop.time()
            timeout.reschedule(None)
        self._inside += 1
        try:
            yield
        finally:
            self._inside -= 1
            if self._inside == 0 and self._timeout is timeout and not timeout.expired():
                timeout.reschedule(loop.time() + max(self._left, 0.0))


class OwnCodeTimeout(ErrorflowError, TimeoutError):
    """The callable's own time ran out (classified `timeout`, as any TimeoutError)."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(
            f"the agent's function did not return within {limit_s:g}s of its own time "
            "(its tool and model calls not counted; function_timeout_s)"
        )
