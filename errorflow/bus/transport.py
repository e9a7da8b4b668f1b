"""The transport interface, and an in-process implementation of it.

A `Bus` hands out `Connection`s; a connection publishes bytes to a topic, subscribes
to topic filters and yields the messages that match. The MQTT transport
(`errorflow.bus.mqtt`) implements the same interface over a broker; the in-process
one is for unit tests and very large sweeps, where a broker would be the bottleneck.

On the in-process bus nobody outside the process can listen, so an endpoint hands its
receivers the envelope it built (`Posted`: the object and its JSON text, unsigned)
instead of bytes to decode, verify and validate again; bytes published on it are still
checked like bytes from a broker. Signing, verification and validation stay wherever
the bus leaves the process (the MQTT transports carry bytes only).

Liveness needs two things only a broker connection has: a last will (`WillFactory`, the
topic and bytes the broker publishes when a session ends without a goodbye) and
`offline_s()` (how long the broker has been unreachable). `offline_s(conn)` reads the
latter from any connection; one that cannot lose its broker (in-process) says 0.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Protocol, runtime_checkable

from errorflow.bus.inbox import Inbox
from errorflow.protocol.envelope import Envelope
from errorflow.protocol.topics import matches

#: Bounded queues: a slow subscriber applies back-pressure instead of eating memory.
QUEUE_LIMIT = 10_000


class Posted:
    """An envelope handed over inside the process: the object its sender built (frozen,
    validated when built, redacted) and its JSON text as the store keeps it. Receivers
    share the object: they read it, never change it."""

    __slots__ = ("clean", "env", "text")

    def __init__(self, env: Envelope, text: str, clean: bool) -> None:
        self.env = env
        self.text = text
        self.clean = clean  # its sender's redaction net found nothing left in `text`


#: What a connection yields: bytes off a wire, or an envelope posted in the process.
Delivery = bytes | Posted


class Connection(Protocol):
    client_id: str

    async def publish(self, topic: str, payload: bytes) -> None: ...

    async def subscribe(self, pattern: str) -> None: ...

    def messages(self) -> AsyncIterator[tuple[str, Delivery]]: ...

    async def close(self) -> None: ...


#: Builds a session's last will, (topic, payload); called again for every new session.
WillFactory = Callable[[], tuple[str, bytes]]


class Monitored(Protocol):
    """A connection that knows whether its broker is reachable."""

    def offline_s(self) -> float: ...


def offline_s(conn: object) -> float:
    """How long `conn` has been without its broker; 0 for one that cannot tell."""
    read = getattr(conn, "offline_s", None)  # not `isinstance` of a protocol: that walks
    return float(read()) if callable(read) else 0.0  # its members again on every call


class Queued(Protocol):
    """A connection that can say how many received messages wait for its reader."""

    def backlog(self) -> int: ...


def backlog(conn: object) -> int:
    """Messages `conn` has received and its reader has not taken yet (0: cannot tell)."""
    read = getattr(conn, "backlog", None)  # (asked once a trial: see `offline_s`)
    return int(read()) if callable(read) else 0


class PublishSoon(Protocol):
    """A broker connection's `publish` without a task (gmqtt's): the message written
    now, a future for its outcome; None when it must be `publish` (not connected)."""

    def __call__(self, topic: str, payload: bytes) -> asyncio.Future[None] | None: ...


def publish_soon(conn: object) -> PublishSoon | None:
    """`conn.publish_soon`, where the connection has it."""
    soon = getattr(conn, "publish_soon", None)
    return soon if callable(soon) else None


@runtime_checkable
class Local(Protocol):
    """A connection whose messages never leave the process: it takes `Posted` envelopes."""

    async def post(self, topic: str, posted: Posted) -> None: ...

    def post_nowait(self, topic: str, posted: Posted) -> bool: ...


class Bus(Protocol):
    description: str

    async def connect(self, client_id: str) -> Connection: ...

    async def close(self) -> None: ...


#: Topics whose subscribers are remembered at once; past it the table starts again (a
#: run has a few topics per agent, far fewer).
ROUTES_LIMIT = 4096


class InProcessBus:
    """A broker in a dict: same interface, same topic matching, no sockets.

    Routing is indexed: the connections a topic reaches are worked out once per topic
    (every connection's patterns matched, in connection order, each connection once)
    and kept until a subscription changes, so a publish costs a dict lookup and one
    queue put per subscriber, whatever the number of connections."""

    description = "in-process"

    def __init__(self) -> None:
        self._conns: list[InProcessConnection] = []
        self._routes: dict[str, tuple[InProcessConnection, ...]] = {}

    async def connect(self, client_id: str) -> InProcessConnection:
        conn = InProcessConnection(self, client_id)
        self._conns.append(conn)
        return conn

    def _route(self, topic: str) -> tuple[InProcessConnection, ...]:
        """The connections subscribed to `topic`: a dict lookup once worked out."""
        route = self._routes.get(topic)
        return route if route is not None else self._work_out(topic)

    def _work_out(self, topic: str) -> tuple[InProcessConnection, ...]:
        if len(self._routes) >= ROUTES_LIMIT:
            self._routes.clear()
        route = tuple(c for c in self._conns if any(matches(topic, p) for p in c.patterns))
        self._routes[topic] = route
        return route

    def changed(self) -> None:
        """A subscription was added or a connection left: routes are worked out again."""
        self._routes.clear()

    async def deliver(self, topic: str, payload: Delivery) -> None:
        route = self._route(topic)
        item = (topic, payload)
        for conn in route:
            try:
                conn.queue.put_nowait(item)
            except asyncio.QueueFull:  # a slow subscriber: wait for room (back-pressure)
                await conn.queue.put(item)

    def deliver_nowait(self, topic: str, payload: Delivery) -> bool:
        """Deliver at once if every subscriber has room; False (nothing delivered) if one
        has not, for the caller to wait with `deliver`."""
        route = self._route(topic)
        for conn in route:  # (a loop: `any` of a generator costs more than the put)
            if conn.queue.full():
                return False
        item = (topic, payload)
        for conn in route:
            conn.queue.put_nowait(item)
        return True

    def drop(self, conn: InProcessConnection) -> None:
        if conn in self._conns:
            self._conns.remove(conn)
            self.changed()

    async def close(self) -> None:
        for conn in list(self._conns):
            await conn.close()


def hears_all(recording: object, conn: object) -> bool:
    """Whether `recording` (subscribed to everything) gets every message `conn` does:
    both on one in-process bus, where a message reaches every subscriber (waiting for
    room, never dropped) and no broker can be lost in between."""
    return (
        isinstance(recording, InProcessConnection)
        and isinstance(conn, InProcessConnection)
        and recording.bus is conn.bus
    )


class InProcessConnection:
    def __init__(self, bus: InProcessBus, client_id: str) -> None:
        self.bus = bus
        self.client_id = client_id
        self.patterns: list[str] = []
        self.queue: Inbox[tuple[str, Delivery] | None] = Inbox(QUEUE_LIMIT)
        self._closed = False

    async def publish(self, topic: str, payload: bytes) -> None:
        await self.bus.deliver(topic, payload)

    async def post(self, topic: str, posted: Posted) -> None:
        await self.bus.deliver(topic, posted)

    def post_nowait(self, topic: str, posted: Posted) -> bool:
        return self.bus.deliver_nowait(topic, posted)

    async def subscribe(self, pattern: str) -> None:
        self.patterns.append(pattern)
        self.bus.changed()

    def backlog(self) -> int:
        return self.queue.qsize()

    async def messages(self) -> AsyncIterator[tuple[str, Delivery]]:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            yield item

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.bus.drop(self)
            with contextlib.suppress(asyncio.QueueFull):
                self.queue.put_nowait(None)
