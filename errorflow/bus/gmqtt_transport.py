"""The MQTT transport on gmqtt: asyncio-native, the same `Connection` as `bus.mqtt`.

gmqtt parses MQTT in the event loop's own protocol callbacks (no paho, no loop thread,
no per-message futures in a wrapper), which makes it the fastest of the Python clients
compared in bench/RESULTS.md. It gives less than we need out of the box, so this adapter adds it:

- **Awaited publish acks.** gmqtt's `publish()` returns at once; it hands every QoS 1
  packet to its `persistent_storage` and removes it there on PUBACK. `_AckStore` is that
  storage: it learns each publish's packet id and resolves the publisher's future on
  the PUBACK, so `publish()` returns once the broker has the message, as aiomqtt's does.
  A PUBACK later than `ACK_TIMEOUT_S`, or a session lost on the way, sends it again.
  `publish_soon()` is the same without a task: the PUBLISH written at once, a future
  settled on the PUBACK, late ones found by one sweep per connection.
- **Our own reconnects.** gmqtt reconnects with `clean_session=False` and the will of
  its first session; we want a clean session and a freshly signed will every time, so
  `_Session` turns gmqtt's reconnect off and the connection's loop opens a new client
  with capped exponential backoff and subscribes again (as `bus.mqtt` does).
- **Awaited subscriptions.** `subscribe()` returns on the SUBACK, so a participant is
  subscribed before it says it is present.
- **One send per turn of the loop.** gmqtt writes every packet (each PUBLISH, each
  PUBACK) to the socket at once, a `send` system call each; `_Corked` collects what one
  session writes during a turn of the event loop and sends it as one write at the end
  of the turn (same bytes, same order); a read that turn answers with nothing is
  acknowledged at once (`bus.quick_ack`: a broker's Nagle waits for that ACK).
- **Back-pressure.** Incoming messages go to a bounded inbox; past `QUEUE_LIMIT` the
  socket stops being read (the broker holds the rest) until the consumer catches up.
  A consumer stalled for two keepalives loses its session as a dead one would; the
  reconnect and the end-to-end resends cover it.

MQTT 3.1.1, QoS 1, TLS from `mqtts://...?ca=FILE`, credentials from the URL, unguessable
client ids (`bus.mqtt.unguessable`) and the last will all behave as in `bus.mqtt`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Any, Protocol

import gmqtt  # type: ignore[import-untyped]  # no type hints
from gmqtt.mqtt.constants import MQTTv311  # type: ignore[import-untyped]

from errorflow.bus.inbox import Inbox
from errorflow.bus.lost_cancel import cancels, raise_lost_cancel
from errorflow.bus.quick_ack import quick_ack
from errorflow.bus.reconnect import Backoff
from errorflow.bus.subscriptions import Subscriptions
from errorflow.bus.transport import QUEUE_LIMIT, WillFactory
from errorflow.bus.url import BrokerURL

log = logging.getLogger(__name__)
# gmqtt logs every lost connection with a traceback at WARNING; ours says it once.
logging.getLogger("gmqtt").setLevel(logging.ERROR)

PUBLISH_OUTAGE_LIMIT_S = 60.0
KEEPALIVE_S = 15
#: CONNECT to CONNACK, SUBSCRIBE to SUBACK, PUBLISH to PUBACK: aiomqtt's `timeout`.
ACK_TIMEOUT_S = 10.0
#: Publishes awaiting their PUBACK at once, on each of the two paths (`publish`,
#: `publish_soon`): packet ids are 16 bits, and this bounds memory.
INFLIGHT_LIMIT = 4096
#: How often a connection looks for late PUBACKs of what `publish_soon` wrote: one is
#: sent again between `ACK_TIMEOUT_S` and `ACK_TIMEOUT_S + SWEEP_S` after it was written.
SWEEP_S = 1.0


class _Session(gmqtt.Client):  # type: ignore[misc]  # gmqtt has no type hints
    """One broker session. Never reconnects by itself: a lost session ends, and the
    connection opens a new one (clean session, fresh will)."""

    async def reconnect(self, delay: bool = False) -> None:
        return None


class _Awaiting(Protocol):
    """What waits for a PUBACK: a publisher's future, or a `_Soon`."""

    def done(self) -> bool: ...

    def set_result(self, result: None) -> None: ...

    def set_exception(self, exception: BaseException) -> None: ...


class _AckStore:
    """gmqtt's `persistent_storage` for one session: QoS 1 packet id -> what waits for
    its PUBACK, resolved then. Nothing is stored for replay: a new session is clean and
    `publish()` sends again what a lost one did not confirm."""

    def __init__(self) -> None:
        self.last_mid = 0
        self.waiting: dict[int, _Awaiting] = {}

    def push_message(self, mid: int, raw_package: bytes) -> None:
        self.last_mid = mid

    def remove_message_by_mid(self, mid: int) -> None:
        fut = self.waiting.pop(mid, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    @property
    def is_empty(self) -> bool:
        return True  # nothing to replay on a (clean) session

    async def wait_empty(self) -> None:
        return None

    def get_all(self) -> list[tuple[int, bytes]]:
        return []

    def clear(self) -> None:
        return None

    def fail(self) -> None:
        """The session is gone: every publish still waiting is sent again elsewhere."""
        waiting, self.waiting = self.waiting, {}
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError("session lost before PUBACK"))


class _Corked:
    """A session's socket transport whose writes during one turn of the event loop go
    out together, in order, in one `write` at the end of the turn (gmqtt writes each
    packet by itself: a PUBACK for every message received, a PUBLISH for every send).
    Everything else is the transport's own; `close` sends what is collected first."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self._pending: list[bytes] = []
        self._socket = transport.get_extra_info("socket")

    def read_done(self) -> None:
        """After a read: a quick ACK unless this turn writes something to carry one."""
        if not self._pending:
            quick_ack(self._socket)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending = []
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _cork(client: _Session) -> None:
    """Route a connected session's writes (gmqtt's connection and protocol each hold
    the transport) through one `_Corked`, which also sees each read end."""
    connection = client._connection
    corked = _Corked(connection._transport)
    connection._transport = corked
    protocol = connection._protocol
    protocol._transport = corked
    parse = protocol._read_packet  # the read loop's: every whole packet read, handled

    def read_packets(data: bytes) -> int:
        parsed: int = parse(data)
        corked.read_done()
        return parsed

    protocol._read_packet = read_packets


def _ssl_context(url: BrokerURL) -> ssl.SSLContext | bool:
    if not url.tls:
        return False
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=url.ca_file)
    if url.cert_file:
        ctx.load_cert_chain(url.cert_file, url.key_file)
    return ctx


def _expire(fut: _Awaiting) -> None:
    if not fut.done():
        fut.set_exception(ConnectionError(f"no PUBACK within {ACK_TIMEOUT_S:g}s"))


class _Soon:
    """A publish sent without a task of its own (`GmqttConnection.publish_soon`): it
    waits for its PUBACK in the session's `_AckStore` in place of a future and settles
    `result`; lost on the way (no PUBACK in time, the session gone), it becomes an
    ordinary `publish`, which sends it again once connected, within the same deadline."""

    __slots__ = ("conn", "due", "mid", "payload", "result", "settled", "store", "topic")

    def __init__(
        self, conn: GmqttConnection, store: _AckStore, topic: str, payload: bytes, due: float
    ) -> None:
        self.conn, self.store, self.topic, self.payload = conn, store, topic, payload
        self.mid = store.last_mid
        self.due = due  # its PUBACK is late from then (`GmqttConnection._sweep`)
        self.result: asyncio.Future[None] = conn.loop.create_future()
        self.settled = False  # its PUBACK came, or it was handed to `publish`

    def done(self) -> bool:
        return self.settled

    def set_result(self, result: None) -> None:
        self.settled = True
        if not self.result.done():  # cancelled by a caller that stopped waiting
            self.result.set_result(None)

    def set_exception(self, exception: BaseException) -> None:
        self.settled = True
        if self.store.waiting.get(self.mid) is self:
            del self.store.waiting[self.mid]
        if self.result.done():
            return
        again = asyncio.create_task(self.conn.publish(self.topic, self.payload))
        again.add_done_callback(self._again)

    def _again(self, task: asyncio.Task[None]) -> None:
        if self.result.done():
            return
        if task.cancelled():
            self.result.cancel()
        elif (exc := task.exception()) is not None:
            self.result.set_exception(exc)
        else:
            self.result.set_result(None)


class GmqttConnection:
    def __init__(
        self,
        url: BrokerURL,
        client_id: str,
        *,
        will: WillFactory | None = None,
        publish_wait_s: float = PUBLISH_OUTAGE_LIMIT_S,
    ) -> None:
        self.url = url
        self.client_id = client_id
        self.will = will
        self.publish_wait_s = publish_wait_s
        self.subscribed = Subscriptions()
        self.reconnects = 0
        self._client: _Session | None = None  # the session, once connected
        self._current: _Session | None = None  # the session being opened or open
        self._store = _AckStore()
        self._subacks: dict[int, asyncio.Future[None]] = {}
        # Unbounded as a queue, bounded by reading: past QUEUE_LIMIT the socket pauses.
        self.queue: Inbox[tuple[str, bytes] | None] = Inbox()
        self._paused = False
        self._inflight = asyncio.Semaphore(INFLIGHT_LIMIT)
        self._connected = asyncio.Event()
        self._lost = asyncio.Event()
        self._offline_since: float | None = None
        self._closing = False
        self._ssl = _ssl_context(url)
        self._task: asyncio.Task[None] | None = None
        self.loop = asyncio.get_running_loop()
        self._first = self.loop.create_future()
        self._sweeper: asyncio.TimerHandle | None = None  # for late PUBACKs of `publish_soon`

    # -- sessions -------------------------------------------------------------------

    def _new_client(self) -> _Session:
        will = None
        if self.will is not None:
            topic, payload = self.will()
            will = gmqtt.Message(topic, payload, qos=1, retain=False)
        self._store = _AckStore()
        client = _Session(
            self.client_id, clean_session=True, will_message=will, persistent_storage=self._store
        )
        if self.url.username is not None:
            client.set_auth_credentials(self.url.username, self.url.password)
        client.on_message = self._on_message
        client.on_disconnect = self._on_disconnect
        client.on_subscribe = self._on_subscribe
        self._current = client
        self._lost.clear()
        self._paused = False
        return client

    async def _open(self, client: _Session) -> None:
        """CONNECT (and CONNACK), then SUBSCRIBE again to everything we had."""
        await asyncio.wait_for(
            client.connect(
                self.url.host, self.url.port, ssl=self._ssl, keepalive=KEEPALIVE_S, version=MQTTv311
            ),
            ACK_TIMEOUT_S,
        )
        _cork(client)
        self._client = client
        for pattern in self.subscribed:
            await self._subscribe(client, pattern)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"gmqtt-{self.client_id}")
        await self._first  # raises if the very first connect fails

    async def _run(self) -> None:
        backoff = Backoff(self.client_id, log)
        while not self._closing:
            client = self._new_client()
            try:
                await self._open(client)
                self._connected.set()
                self._offline_since = None
                if self.reconnects:
                    log.warning("%s: reconnected (%d)", self.client_id, self.reconnects)
                if not self._first.done():
                    self._first.set_result(None)
                backoff.connected()
                await self._lost.wait()
                raise ConnectionError("connection lost")
            except (OSError, TimeoutError, gmqtt.MQTTConnectError) as exc:
                self._session_ended()
                await self._drop(client)
                if not self._first.done():
                    self._first.set_exception(
                        ConnectionError(f"cannot connect to MQTT broker {self.url}: {exc}")
                    )
                    return
                if self._closing:
                    break
                self.reconnects += 1
                await backoff.wait(exc)
            finally:
                if self._closing:
                    await self._goodbye(client)
        self._connected.clear()

    def _session_ended(self) -> None:
        self._connected.clear()
        self._client = None
        if self._offline_since is None:
            self._offline_since = asyncio.get_running_loop().time()
        self._fail_pending()

    def _fail_pending(self) -> None:
        """The session is gone: publishes and subscriptions waiting on it try again."""
        self._store.fail()
        subacks, self._subacks = self._subacks, {}
        for fut in subacks.values():
            if not fut.done():
                fut.set_exception(ConnectionError("session lost before SUBACK"))

    async def _goodbye(self, client: _Session) -> None:
        """A clean DISCONNECT: the broker discards the will."""
        if client._connection is not None and client.is_connected:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.disconnect(), 2.0)
        await self._drop(client)  # closed mid-connect: no session to end, a socket to close
        self._fail_pending()

    @staticmethod
    async def _drop(client: _Session) -> None:
        """Close a session's socket without a DISCONNECT (a lost or half-open one)."""
        if client._connection is not None and not client._connection.is_closing():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client._connection.close(), 1.0)

    # -- gmqtt callbacks ------------------------------------------------------------

    def _on_disconnect(self, client: _Session, *args: Any) -> None:
        if client is self._current:
            self._connected.clear()
            self._fail_pending()
            self._lost.set()

    def _on_subscribe(self, client: _Session, mid: int, qos: Any, *args: Any) -> None:
        fut = self._subacks.pop(mid, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _on_message(self, client: _Session, topic: Any, payload: bytes, *args: Any) -> None:
        # amqtt may deliver retained messages for filters a client never asked for.
        if not isinstance(topic, str) or not self.subscribed.wanted(topic):
            return
        self.queue.put_nowait((topic, bytes(payload)))
        if self.queue.qsize() >= QUEUE_LIMIT and not self._paused:
            self._reading(client, False)

    def _reading(self, client: _Session | None, on: bool) -> None:
        """Back-pressure: stop (or start again) reading this session's socket."""
        transport = getattr(getattr(client, "_connection", None), "_transport", None)
        if transport is None or transport.is_closing():
            return
        self._paused = not on
        if on:
            transport.resume_reading()
        else:
            transport.pause_reading()

    # -- the Connection interface ---------------------------------------------------

    def backlog(self) -> int:
        return self.queue.qsize()

    def offline_s(self) -> float:
        """How long the broker has been unreachable (0 while connected)."""
        since = self._offline_since
        return 0.0 if since is None else asyncio.get_running_loop().time() - since

    async def _publish_once(self, client: _Session, topic: str, payload: bytes) -> None:
        async with self._inflight:
            store = self._store
            client.publish(topic, payload, qos=1)
            fut = asyncio.get_running_loop().create_future()
            mid = store.last_mid
            store.waiting[mid] = fut
            timer = asyncio.get_running_loop().call_later(ACK_TIMEOUT_S, _expire, fut)
            try:
                await fut
            finally:
                timer.cancel()
                if store.waiting.get(mid) is fut:
                    del store.waiting[mid]

    def publish_soon(self, topic: str, payload: bytes) -> asyncio.Future[None] | None:
        """`publish` without a task while the session is up: the PUBLISH is written now,
        after every one written before it, and the future it returns settles as
        `publish` would return or raise (lost on the way, it is sent again within the
        same deadline). None when the session is not up, or when `INFLIGHT_LIMIT`
        publishes of this path wait for their PUBACK: then `publish`."""
        client, store = self._client, self._store
        if client is None or not self._connected.is_set() or len(store.waiting) >= INFLIGHT_LIMIT:
            return None
        client.publish(topic, payload, qos=1)
        soon = _Soon(self, store, topic, payload, self.loop.time() + ACK_TIMEOUT_S)
        store.waiting[soon.mid] = soon
        if self._sweeper is None:
            self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)
        return soon.result

    def _sweep(self) -> None:
        """What `publish_soon` wrote and has had no PUBACK for `ACK_TIMEOUT_S` is sent
        again: one timer a connection, not one a publish. The store keeps the order
        they were written in, so the first one not due ends the look."""
        self._sweeper = None
        now, waiting, late = self.loop.time(), self._store.waiting, []
        left = False
        for awaiting in waiting.values():
            if isinstance(awaiting, _Soon):
                if awaiting.due > now:
                    left = True
                    break
                late.append(awaiting)
        for soon in late:
            _expire(soon)
        if left:
            self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)

    async def publish(self, topic: str, payload: bytes) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.publish_wait_s
        while True:
            client = self._client
            if client is not None and self._connected.is_set():
                try:
                    await self._publish_once(client, topic, payload)
                    return
                except ConnectionError:
                    # Cut off by an outage (or no PUBACK): send again once connected;
                    # receivers drop the duplicate. The deadline still holds.
                    if loop.time() > deadline:
                        raise ConnectionError(
                            f"{self.client_id}: broker unavailable, publish failed"
                        ) from None
                    await asyncio.sleep(0.05)
                    continue
            remaining = deadline - loop.time()
            if remaining <= 0 or self._closing:
                raise ConnectionError(f"{self.client_id}: broker unavailable, publish failed")
            before = cancels()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._connected.wait(), timeout=min(remaining, 1.0))
            raise_lost_cancel(before)

    async def _subscribe(self, client: _Session, pattern: str) -> None:
        mid = client.subscribe(pattern, qos=1)
        fut = asyncio.get_running_loop().create_future()
        self._subacks[mid] = fut
        before = cancels()
        try:
            await asyncio.wait_for(fut, ACK_TIMEOUT_S)
        except TimeoutError:
            raise ConnectionError(f"{self.client_id}: no SUBACK for {pattern}") from None
        raise_lost_cancel(before)

    async def subscribe(self, pattern: str) -> None:
        self.subscribed.add(pattern)
        client = self._client
        if client is not None and self._connected.is_set():
            # Lost on the way: the next session subscribes to every pattern again.
            with contextlib.suppress(ConnectionError):
                await self._subscribe(client, pattern)

    async def messages(self) -> AsyncIterator[tuple[str, bytes]]:
        queue = self.queue
        while True:
            item = await queue.get()
            if self._paused and queue.qsize() <= QUEUE_LIMIT // 2:
                self._reading(self._client, True)
            if item is None:
                return
            yield item

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self.queue.put_nowait(None)
