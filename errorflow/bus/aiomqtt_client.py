"""aiomqtt's client with socket I/O fitted to a busy event loop.

aiomqtt drives paho from asyncio callbacks. Two of them cost a participant of a run more
than the message itself:

- Reading: paho's `loop_read` reads one packet when nothing of ours is in flight, so a
  participant that mostly listens (the recorder, an attached TUI) would read one message
  per turn of the event loop, fall behind the run, and Mosquitto would drop QoS 1
  messages for it past its queue limit (1,000 by default). `LoopClient` reads every packet the
  socket holds (up to `READ_BURST`) each time it is readable.
- Writing: aiomqtt has every publish (and every PUBACK paho answers with) ask the loop
  for a writer through `call_soon_threadsafe` (a write to the loop's wake-up pipe); the
  next turn adds the socket to epoll, the turn after that writes and removes it: three
  system calls and two turns per burst of packets on a socket that is nearly always
  writable. `LoopClient` writes what paho queued in one callback on the next turn
  (`call_soon`: everything published in the same turn goes together), and waits for
  the socket to be writable only when the kernel's buffer is full; a read that turn
  answers with nothing is acknowledged at once (`bus.quick_ack`).
- Awaiting a PUBACK: aiomqtt's `publish` wraps an `asyncio.Event` in `asyncio.wait_for`
  (a task per publish on Python 3.11) and scans every pending call twice per publish
  (quadratic in what is in flight). `LoopClient.publish` waits on one future with a
  timer, with aiomqtt's errors and timeout.

All three replace private callbacks of aiomqtt 2.x (pinned `>=2.5,<3`) with the same error
handling: a failed read or write ends the session. Calls from another thread (paho's
connect runs in an executor) keep aiomqtt's thread-safe path.
"""

from __future__ import annotations

import asyncio
import math
import select
import socket
import threading
from typing import Any, cast

import aiomqtt
import paho.mqtt.client as paho
from aiomqtt.exceptions import MqttCodeError
from aiomqtt.types import PahoSocket, PayloadType

from errorflow.bus.quick_ack import quick_ack

#: Packets paho reads at most per readable socket, per turn of the event loop.
READ_BURST = 256


class LoopClient(aiomqtt.Client):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop_thread = threading.get_ident()
        self._write_due = False  # a write is scheduled for the next turn

    def _failed(self, exc: Exception) -> None:
        """As aiomqtt's own callbacks: the connection broke, the session ends."""
        if not self._disconnected.done():
            self._disconnected.set_exception(exc)

    def _on_socket_open(self, client: paho.Client, userdata: Any, sock: PahoSocket) -> None:
        super()._on_socket_open(client, userdata, sock)
        fd = sock.fileno()
        ready = select.poll()
        ready.register(fd, select.POLLIN)

        def read_burst() -> None:
            try:
                for _ in range(READ_BURST):
                    client.loop_read()
                    now = client.socket()
                    if now is None:
                        return
                    pending = getattr(now, "pending", None)  # TLS: bytes already decrypted
                    if not (pending is not None and pending() > 0) and not ready.poll(0):
                        break
            except Exception as exc:
                self._failed(exc)
                return
            if not self._write_due:  # nothing to carry its ACK this turn
                quick_ack(cast("socket.socket | None", client.socket()))  # a TCP socket

        # After aiomqtt's own add_reader (it is scheduled the same way): replaces it.
        self._loop.call_soon_threadsafe(self._loop.add_reader, fd, read_burst)

    def _on_socket_register_write(
        self, client: paho.Client, userdata: Any, sock: PahoSocket
    ) -> None:
        if threading.get_ident() != self._loop_thread:
            super()._on_socket_register_write(client, userdata, sock)
            return
        if not self._write_due:
            self._write_due = True
            self._loop.call_soon(self._write, client)

    def _write(self, client: paho.Client) -> None:
        self._write_due = False
        try:
            client.loop_write()
        except Exception as exc:
            self._failed(exc)
            return
        # Still holding packets: the socket's buffer is full. paho thinks a writer is
        # registered (it asked us), so wait for writability as aiomqtt does; paho's
        # unregister callback removes the writer once everything is out.
        sock = client.socket()
        if client.want_write() and sock is not None:
            super()._on_socket_register_write(client, None, sock)

    async def publish(  # aiomqtt's signature, without its semaphore wrapper
        self,
        /,
        topic: str,
        payload: PayloadType = None,
        qos: int = 0,
        retain: bool = False,
        properties: Any = None,
        *args: Any,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        if self._outgoing_calls_sem:  # a limit on concurrent calls: aiomqtt's path
            await super().publish(
                topic, payload, qos, retain, properties, *args, timeout=timeout, **kwargs
            )
            return
        info = self._client.publish(topic, payload, qos, retain, properties, *args, **kwargs)
        if info.rc != paho.MQTT_ERR_SUCCESS:
            broke = self._disconnected.exception() if self._disconnected.done() else None
            raise MqttCodeError(info.rc, "Could not publish message") from broke
        if info.is_published():
            return
        confirmed = _Confirmation(self._loop.create_future())
        # aiomqtt's `_on_publish` pops the mid and calls `.set()` when the PUBACK is in.
        self._pending_publishes[info.mid] = confirmed  # type: ignore[assignment]
        limit = self.timeout if timeout is None else timeout
        timer = None if limit == math.inf else self._loop.call_later(limit, confirmed.expire)
        try:
            await confirmed.future
        finally:
            if timer is not None:
                timer.cancel()
            self._pending_publishes.pop(info.mid, None)


class _Confirmation:
    """What aiomqtt's PUBACK callback sets, as it sets its `asyncio.Event`."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future

    def set(self) -> None:
        if not self.future.done():
            self.future.set_result(None)

    def expire(self) -> None:
        if not self.future.done():
            self.future.set_exception(aiomqtt.MqttError("Operation timed out"))
