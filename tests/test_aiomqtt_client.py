"""aiomqtt's client with socket I/O fitted to the event loop: writes without a wait for
writability while the socket takes them, and a full socket still drains."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiomqtt
import pytest

from errorflow.bus.aiomqtt_client import LoopClient
from errorflow.bus.mqtt import MqttConnection
from tests.conftest import Mosquitto


async def _connect(mosquitto: Mosquitto, name: str) -> MqttConnection:
    conn = MqttConnection(mosquitto.url, name)  # aiomqtt, whatever the environment says
    await conn.start()
    return conn


def _count_writers(client: aiomqtt.Client | None) -> list[int]:
    """Every `add_writer` of the client's loop (a wait for writability) is counted."""
    assert isinstance(client, LoopClient)
    loop: Any = client._loop
    calls: list[int] = []
    add_writer: Callable[..., None] = loop.add_writer

    def counted(fd: int, *args: Any) -> None:
        calls.append(fd)
        add_writer(fd, *args)

    loop.add_writer = counted  # the instance's attribute: looked up at every call
    return calls


async def _take(conn: MqttConnection, n: int) -> list[bytes]:
    got: list[bytes] = []
    incoming: AsyncIterator[tuple[str, bytes]] = aiter(conn.messages())
    while len(got) < n:
        _, payload = await asyncio.wait_for(anext(incoming), 10)
        got.append(payload)
    return got


@pytest.mark.mosquitto
async def test_publishes_go_out_without_waiting_for_the_socket(mosquitto: Mosquitto) -> None:
    """One at a time, 50 QoS 1 publishes and their PUBACKs: no publish asked the loop to
    watch the socket (aiomqtt's own path did, once per publish)."""
    sub = await _connect(mosquitto, "w-sub")
    pub = await _connect(mosquitto, "w-pub")
    try:
        await sub.subscribe("w/#")
        writers = _count_writers(pub._client)
        for i in range(50):
            await pub.publish("w/x", b"m%d" % i)
        assert await _take(sub, 50) == [b"m%d" % i for i in range(50)]
        assert writers == []
        assert pub._client is not None and pub._client._pending_publishes == {}
    finally:
        await pub.close()
        await sub.close()


async def test_a_full_socket_waits_until_it_is_writable() -> None:
    """20 MiB published in one turn to a broker that reads nothing for a moment: the
    socket's buffers fill, the rest waits for writability, and every byte arrives."""
    received = 0
    done = asyncio.Event()
    bodies = [bytes([i]) * 262_144 for i in range(80)]

    async def slow_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal received
        await reader.read(1024)  # CONNECT
        writer.write(b"\x20\x02\x00\x00")  # CONNACK, accepted
        await asyncio.sleep(0.5)  # the client's publishes meet a full socket
        while chunk := await reader.read(1 << 20):
            received += len(chunk)
            if received >= sum(map(len, bodies)):
                done.set()

    server = await asyncio.start_server(slow_broker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with LoopClient("127.0.0.1", port, identifier="f", timeout=30) as client:
            writers = _count_writers(client)
            await asyncio.wait_for(
                asyncio.gather(*(client.publish("f/x", body, qos=0) for body in bodies)), 30
            )
            await asyncio.wait_for(done.wait(), 30)
            assert writers, "the socket never filled: this test did not reach the slow path"
    finally:
        server.close()


async def test_a_publish_without_puback_times_out_and_leaves_nothing_pending() -> None:
    """A broker that accepts the session and then never acknowledges: the publish fails
    with aiomqtt's timeout error, and nothing of it stays registered."""
    sessions: list[asyncio.StreamWriter] = []

    async def silent_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)  # CONNECT
        writer.write(b"\x20\x02\x00\x00")  # CONNACK, accepted; nothing after that
        sessions.append(writer)
        while await reader.read(65536):
            pass

    server = await asyncio.start_server(silent_broker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with LoopClient("127.0.0.1", port, identifier="t", timeout=5) as client:
            with pytest.raises(aiomqtt.MqttError, match="timed out"):
                await client.publish("t/x", b"never acked", qos=1, timeout=0.2)
            assert client._pending_publishes == {}
            for writer in sessions:
                writer.close()  # lets the client's disconnect end at once
    except aiomqtt.MqttError:
        pass  # leaving a session the broker already closed
    finally:
        server.close()
