"""A synchronous call of the user's code (a Python tool), awaited from the event loop.

`asyncio.to_thread` runs it on the loop's default executor, whose threads the loop joins
when it closes (`asyncio.run` does) and the interpreter joins at exit: a call that never
returns (a blocking read with no timeout) held the run's end forever after its trial had
been scored, and a handful of them took every worker, so later calls queued behind them.
Here each call has a daemon thread of its own: its caller stops waiting at its timeout,
the thread is abandoned, and the process still ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


async def in_daemon_thread(fn: Callable[..., _T], /, **kwargs: object) -> _T:
    """`fn(**kwargs)` in a daemon thread of its own (with the caller's context)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[_T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: _T | None, error: BaseException | None) -> None:
        if done.done():  # the caller gave up (its timeout, a cancel)
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            result = context.run(fn, **kwargs)
        except StopIteration as exc:  # a future cannot hold one (`next()` of nothing)
            error = RuntimeError(f"StopIteration: {exc}")
            error.__cause__ = exc
            outcome: tuple[_T | None, BaseException | None] = (None, error)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome = (None, exc)
        else:
            outcome = (result, None)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, name=f"errorflow-call-{getattr(fn, '__name__', 'fn')}",
                     daemon=True).start()  # fmt: skip
    return await done
