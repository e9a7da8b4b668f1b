"""The MQTT transport: aiomqtt, MQTT 3.1.1, QoS 1, with reconnect and resubscribe.

One `MqttConnection` is one client session. Incoming messages go from paho's callback
straight to the connection's queue (`_Handoff`); when the broker goes away the
connection reconnects with capped exponential backoff and subscribes again to
everything it had. A publish during an
outage waits for the reconnect and is then sent (at least once; receivers drop
duplicates by sender and seq). Messages on topics we did not subscribe to are
dropped: amqtt may deliver retained messages for filters a client never asked for.

A connection may carry a last will (`will`: called at every connect, so each session
gets a fresh, freshly signed message): the broker publishes it when the session ends
without a clean disconnect (a killed process, a dropped network), and discards it on
`close()`. `offline_s()` says how long the broker has been unreachable, for the runner's
bound on an outage.

Client ids get a random suffix: a broker disconnects a session when another client
connects with its id, and amqtt does that before it checks the newcomer's credentials,
so an id anyone could guess (`{run}-{agent}`) would let any client knock an agent off.

`MqttBus` opens its sessions with aiomqtt (`MqttConnection`, here) or gmqtt
(`bus.gmqtt_transport.GmqttConnection`, same interface and guarantees): the URL's
`?client=`, else ERRORFLOW_MQTT_CLIENT, else `DEFAULT_CLIENT` (`client_of`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import secrets
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, cast

import aiomqtt

from errorflow.bus.aiomqtt_client import LoopClient
from errorflow.bus.inbox import Inbox
from errorflow.bus.lost_cancel import cancels, raise_lost_cancel
from errorflow.bus.reconnect import Backoff
from errorflow.bus.subscriptions import Subscriptions
from errorflow.bus.transport import WillFactory
from errorflow.bus.url import (
    CLIENT_ENV,
    CLIENTS,
    DEFAULT_CLIENT,
    BrokerURL,
)
from errorflow.core.errors import ErrorflowError

if TYPE_CHECKING:  # gmqtt is an optional extra: imported when a connection chooses it
    from errorflow.bus.gmqtt_transport import GmqttConnection

log = logging.getLogger(__name__)
# aiomqtt warns on every publish past 10 in flight; in-flight publishes are our design.
logging.getLogger("mqtt").setLevel(logging.ERROR)

#: How long a publish waits for the broker to come back before it fails.
PUBLISH_OUTAGE_LIMIT_S = 60.0
#: Nagle off: paho leaves it on, and small QoS 1 publishes then wait for delayed ACKs
#: (~40 ms on Linux), which would pace a run's messages.
NO_DELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
CLIENT_ID_SUFFIX_BYTES = 6


def client_of(url: BrokerURL | None, env: Mapping[str, str] | None = None) -> str:
    """The MQTT client library a connection to `url` uses (None: a URL naming none)."""
    env = os.environ if env is None else env
    chosen = (url.client if url else None) or env.get(CLIENT_ENV) or DEFAULT_CLIENT
    if chosen not in CLIENTS:
        raise ValueError(f"{CLIENT_ENV}={chosen!r}: expected one of {', '.join(CLIENTS)}")
    return chosen


class ClientMissing(ErrorflowError, RuntimeError):
    """The MQTT client library a connection chose is not installed."""


def gmqtt_connection() -> type[GmqttConnection]:
    """gmqtt's connection class: gmqtt is the `gmqtt` extra (its wheel also installs a
    top-level `tests` package, which must not land in every user's site-packages)."""
    try:
        module = importlib.import_module("errorflow.bus.gmqtt_transport")
    except ModuleNotFoundError as exc:
        if exc.name != "gmqtt":
            raise
        raise ClientMissing(
            "the gmqtt MQTT client is not installed: pip install 'errorflow[gmqtt]', "
            "or use --mqtt-client aiomqtt"
        ) from None
    return cast("type[GmqttConnection]", module.GmqttConnection)


def _tls_params(url: BrokerURL) -> aiomqtt.TLSParameters | None:
    if not url.tls:
        return None
    return aiomqtt.TLSParameters(
        ca_certs=url.ca_file,
        certfile=url.cert_file,
        keyfile=url.key_file,
        cert_reqs=ssl.CERT_REQUIRED,
        tls_version=ssl.PROTOCOL_TLS_CLIENT,
    )


def unguessable(client_id: str) -> str:
    return f"{client_id}-{secrets.token_hex(CLIENT_ID_SUFFIX_BYTES)}"


class MqttBus:
    def __init__(
        self,
        url: BrokerURL,
        *,
        description: str | None = None,
        publish_wait_s: float = PUBLISH_OUTAGE_LIMIT_S,
    ) -> None:
        self.url = url
        self.description = description or str(url)
        self.publish_wait_s = publish_wait_s
        self._conns: list[MqttConnection | GmqttConnection] = []

    async def connect(self, client_id: str) -> MqttConnection | GmqttConnection:
        """A new session; its MQTT client id is `client_id` and a random suffix."""
        conn = self.open(client_id)
        await conn.start()
        return conn

    def open(self, client_id: str) -> MqttConnection | GmqttConnection:
        """A session not connected yet (`start()` connects it): its will can be set
        first, once the participant that signs it exists."""
        kind = gmqtt_connection() if client_of(self.url) == "gmqtt" else MqttConnection
        conn = kind(self.url, unguessable(client_id), publish_wait_s=self.publish_wait_s)
        self._conns.append(conn)
        return conn

    async def close(self) -> None:
        for conn in self._conns:
            await conn.close()
        self._conns.clear()


class _Handoff(asyncio.Queue["aiomqtt.Message"]):
    """Stands in for aiomqtt's incoming-message queue: each message goes on to the
    connection in paho's callback and is never kept here. aiomqtt's own iterator makes
    a task and an `asyncio.wait` per message, one message per turn of the event loop or
    less: a participant that hears everything (the recorder) would fall behind the run,
    with a backlog growing as long as the run."""

    def __init__(self, deliver: Callable[[aiomqtt.Message], None]) -> None:
        super().__init__()
        self._deliver = deliver

    def put_nowait(self, item: aiomqtt.Message) -> None:
        self._deliver(item)


class MqttConnection:
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
        # Filled from paho's callback, which cannot wait: unbounded, as aiomqtt's own
        # queue is (aiomqtt has no way to stop reading the socket).
        self.queue: Inbox[tuple[str, bytes] | None] = Inbox()
        self.reconnects = 0
        self._client: aiomqtt.Client | None = None
        self._connected = asyncio.Event()
        self._offline_since: float | None = None  # loop time the broker went away
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._first = asyncio.get_running_loop().create_future()

    def _new_client(self) -> aiomqtt.Client:
        will = None
        if self.will is not None:
            topic, payload = self.will()
            will = aiomqtt.Will(topic, payload, qos=1, retain=False)
        return LoopClient(
            self.url.host,
            self.url.port,
            identifier=self.client_id,
            username=self.url.username,
            password=self.url.password,
            protocol=aiomqtt.ProtocolVersion.V311,
            tls_params=_tls_params(self.url),
            keepalive=15,
            timeout=10,
            clean_session=True,
            socket_options=[NO_DELAY],
            will=will,
            queue_type=cast("type[asyncio.Queue[aiomqtt.Message]]", self._handoff),
        )

    def _handoff(self, maxsize: int = 0) -> _Handoff:
        return _Handoff(self._deliver)

    def _deliver(self, message: aiomqtt.Message) -> None:
        topic = message.topic.value
        if not self.subscribed.wanted(topic):
            return
        payload = message.payload
        data = payload if isinstance(payload, bytes) else str(payload).encode()
        self.queue.put_nowait((topic, data))

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"mqtt-{self.client_id}")
        await self._first  # raises if the very first connect fails

    async def _run(self) -> None:
        backoff = Backoff(self.client_id, log)
        while not self._closing:
            client = self._new_client()
            try:
                async with client:
                    self._client = client
                    for pattern in self.subscribed:
                        await client.subscribe(pattern, qos=1)
                    self._connected.set()
                    self._offline_since = None
                    if self.reconnects:
                        log.warning("%s: reconnected (%d)", self.client_id, self.reconnects)
                    if not self._first.done():
                        self._first.set_result(None)
                    backoff.connected()
                    # Messages go to our queue in paho's callback (`_Handoff`), so this
                    # only waits for the session to end: aiomqtt raises MqttError then.
                    async for _ in client.messages:
                        pass
            except aiomqtt.MqttError as exc:
                self._connected.clear()
                self._client = None
                if self._offline_since is None:
                    self._offline_since = asyncio.get_running_loop().time()
                if not self._first.done():
                    self._first.set_exception(
                        ConnectionError(f"cannot connect to MQTT broker {self.url}: {exc}")
                    )
                    return
                if self._closing:
                    break
                self.reconnects += 1
                await backoff.wait(exc)
        self._connected.clear()

    def backlog(self) -> int:
        return self.queue.qsize()

    def offline_s(self) -> float:
        """How long the broker has been unreachable (0 while connected)."""
        since = self._offline_since
        return 0.0 if since is None else asyncio.get_running_loop().time() - since

    async def publish(self, topic: str, payload: bytes) -> None:
        deadline = asyncio.get_running_loop().time() + self.publish_wait_s
        while True:
            client = self._client
            if client is not None and self._connected.is_set():
                before = cancels()
                try:
                    await client.publish(topic, payload, qos=1)
                    raise_lost_cancel(before)  # one aiomqtt's wait_for dropped (3.11)
                    return
                except aiomqtt.MqttError:
                    # A publish cut off by an outage: send again once we are connected
                    # (receivers drop the duplicate). Only the reader task decides whether
                    # the current client is connected; the deadline still holds.
                    if asyncio.get_running_loop().time() > deadline:
                        raise ConnectionError(
                            f"{self.client_id}: broker unavailable, publish failed"
                        ) from None
                    await asyncio.sleep(0.05)
                    continue
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0 or self._closing:
                raise ConnectionError(f"{self.client_id}: broker unavailable, publish failed")
            before = cancels()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._connected.wait(), timeout=min(remaining, 1.0))
            raise_lost_cancel(before)

    async def subscribe(self, pattern: str) -> None:
        self.subscribed.add(pattern)
        client = self._client
        if client is not None and self._connected.is_set():
            await client.subscribe(pattern, qos=1)

    async def messages(self) -> AsyncIterator[tuple[str, bytes]]:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            yield item

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(None)
