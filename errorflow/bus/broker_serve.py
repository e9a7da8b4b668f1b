"""Serving amqtt off the runner's event loop: in a thread of its own or a process.

`serve()` runs one amqtt broker on the current event loop until `stop` is set; the
embedded broker (`bus.broker`) runs it on the runner's loop, on a thread's own loop, or
here, as `python -m errorflow.bus.broker_serve`: the configuration (credential
included) arrives as one JSON line on stdin, never in argv; the port goes back as one
line on stdout; the broker stops when stdin closes (the runner stopped it, or died).
Ctrl-C goes to the whole terminal's process group: the child ignores it, so the broker
stays up while the runner shuts its run down cleanly, and leaves when the runner does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from amqtt.broker import Broker

# Deliveries amqtt gives up on are logged as errors with tracebacks; errorflow's own
# acks and resends recover them (errorflow.cli.main.configure_logging, the same).
for _name in ("amqtt", "transitions"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


async def serve(config: Any, ready: Callable[[int], None], stop: asyncio.Event) -> None:
    """amqtt with `config` on this loop: `ready(port)` once it listens, until `stop`."""
    broker = Broker(config)
    await broker.start()
    try:
        server = broker._servers["default"].instance  # amqtt keeps no public accessor
        ready(int(server.sockets[0].getsockname()[1]))
        await stop.wait()
    finally:
        await broker.shutdown()


def _stop_at_eof(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Blocks until stdin closes (a thread: stdin is the parent's lifeline)."""
    with contextlib.suppress(Exception):
        sys.stdin.buffer.read()
    loop.call_soon_threadsafe(stop.set)


async def _child() -> None:
    config = json.loads(sys.stdin.buffer.readline())
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    threading.Thread(target=_stop_at_eof, args=(loop, stop), daemon=True).start()

    def ready(port: int) -> None:
        sys.stdout.write(f"{port}\n")
        sys.stdout.flush()

    await serve(config, ready, stop)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(_child())
