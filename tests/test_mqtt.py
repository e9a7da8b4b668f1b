"""The MQTT transport against the embedded broker and a real Mosquitto."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path

import aiomqtt
import pytest

from errorflow.bus import aiomqtt_client, gmqtt_transport
from errorflow.bus.gmqtt_transport import GmqttConnection
from errorflow.bus.mqtt import MqttBus, MqttConnection
from errorflow.bus.quick_ack import quick_ack
from errorflow.bus.transport import Bus, InProcessBus, offline_s
from errorflow.bus.url import BrokerURL
from tests.conftest import Mosquitto


async def _exchange(bus: Bus) -> list[tuple[str, bytes]]:
    sub = await bus.connect("sub")
    pub = await bus.connect("pub")
    await sub.subscribe("errorflow/r1/#")
    for i in range(50):
        await pub.publish(f"errorflow/r1/inbox/a{i % 3}", f"m{i}".encode())
    await pub.publish("errorflow/r2/inbox/a", b"other run")
    got: list[tuple[str, bytes]] = []

    async def collect() -> None:
        async for item in sub.messages():
            got.append(item)
            if len(got) == 50:
                return

    await asyncio.wait_for(collect(), 10)
    await bus.close()
    return got


async def test_in_process_bus_delivers_in_order_by_filter() -> None:
    got = await _exchange(InProcessBus())
    assert [p for _, p in got] == [f"m{i}".encode() for i in range(50)]


async def test_embedded_broker_qos1_in_order(embedded: BrokerURL) -> None:
    got = await _exchange(MqttBus(embedded))
    assert [p for _, p in got] == [f"m{i}".encode() for i in range(50)]
    assert all(t.startswith("errorflow/r1/") for t, _ in got)


@pytest.mark.mosquitto
async def test_mosquitto_qos1_in_order(mosquitto: Mosquitto) -> None:
    got = await _exchange(MqttBus(mosquitto.url))
    assert [p for _, p in got] == [f"m{i}".encode() for i in range(50)]


#: A publisher we did not write, at a steady rate: paho with its own network thread, in
#: a process of its own.
PACED_PUBLISHER = """
import socket, sys, time
import paho.mqtt.client as mqtt
port, count, rate = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="paced")
client.max_inflight_messages_set(100)
client.connect("127.0.0.1", port)
client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
client.loop_start()
start = time.monotonic()
sent = []
for i in range(count):
    sent.append(client.publish("burst/x", b"m%d" % i, qos=1))
    time.sleep(max(0.0, start + (i + 1) / rate - time.monotonic()))
for info in sent:
    info.wait_for_publish(30)
client.disconnect()
client.loop_stop()
"""


@pytest.mark.mosquitto
async def test_a_listener_on_a_busy_loop_keeps_up_with_a_steady_publisher(
    mosquitto: Mosquitto,
) -> None:
    """A connection that only listens, on an event loop whose every turn takes 1 ms,
    gets all of 2,000 messages sent at 4,000 a second. Reading one packet a turn (paho's
    own pace: 1,000 a second here) it fell behind, and Mosquitto, past its queue of 1,000
    messages a client, dropped the rest (issue #19: the recorder lost events)."""
    bus = MqttBus(mosquitto.url)
    conn = await bus.connect("listener")
    await conn.subscribe("burst/#")
    count = 2000
    busy = True

    async def work() -> None:  # the rest of a run: every turn of the loop does some
        while busy:
            time.sleep(0.001)
            await asyncio.sleep(0)

    worker = asyncio.create_task(work())
    publisher = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PACED_PUBLISHER, str(mosquitto.port), str(count), "4000"
    )
    got: list[bytes] = []
    incoming = aiter(conn.messages())
    try:
        while len(got) < count:
            _, payload = await asyncio.wait_for(anext(incoming), 5)  # quiet: the rest is lost
            got.append(payload)
    except TimeoutError:
        pass
    finally:
        busy = False
        await worker
        assert await publisher.wait() == 0
        await bus.close()
    assert len(got) == count
    assert got == [b"m%d" % i for i in range(count)]


async def test_connections_send_without_nagle_delay(embedded: BrokerURL) -> None:
    bus = MqttBus(embedded)
    conn = await bus.connect("fast")
    try:
        assert conn._client is not None
        sock = conn._client._client.socket()  # paho's socket: the only place to look
        assert isinstance(sock, socket.socket)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        await bus.close()


def _fileno(conn: object) -> int:
    """The socket of a connection on either client (each keeps it in its own place)."""
    if isinstance(conn, GmqttConnection):
        assert conn._client is not None
        sock = conn._client._connection._transport.get_extra_info("socket")
    else:
        assert isinstance(conn, MqttConnection) and conn._client is not None
        sock = conn._client._client.socket()
    assert sock is not None
    return int(sock.fileno())


async def test_a_read_that_nothing_answers_is_acknowledged_at_once(
    mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch, mqtt_client: str
) -> None:
    # Mosquitto's Nagle (its default) holds the next packet for a client until the
    # client ACKs the last, which Linux delays when the client sends nothing back.
    asked: list[int] = []

    def recorded(sock: socket.socket | None) -> None:
        if sock is not None:
            asked.append(sock.fileno())
        quick_ack(sock)

    monkeypatch.setattr(gmqtt_transport, "quick_ack", recorded)
    monkeypatch.setattr(aiomqtt_client, "quick_ack", recorded)
    bus = MqttBus(mosquitto.url)
    try:
        sub = await bus.connect("sub")
        pub = await bus.connect("pub")
        await sub.subscribe("errorflow/r1/#")
        asked.clear()
        await pub.publish("errorflow/r1/inbox/a", b"m")  # back when its PUBACK is read
        topic, _ = await asyncio.wait_for(anext(aiter(sub.messages())), 5)
        await asyncio.sleep(0.05)  # every turn that read something is over
        assert topic == "errorflow/r1/inbox/a"
        assert _fileno(pub) in asked  # a PUBACK: nothing to answer it with
        assert _fileno(sub) not in asked  # its PUBACK went out in the turn it read
    finally:
        await bus.close()


async def test_retained_messages_for_other_topics_are_filtered(embedded: BrokerURL) -> None:
    # amqtt may hand a new session retained messages it never subscribed to.
    async with aiomqtt.Client(
        embedded.host,
        embedded.port,
        username=embedded.username,
        password=embedded.password,
        protocol=aiomqtt.ProtocolVersion.V311,
    ) as raw:
        await raw.publish("errorflow/old/inbox/x", b"stale", qos=1, retain=True)
    bus = MqttBus(embedded)
    conn = await bus.connect("fresh")
    await conn.subscribe("errorflow/new/#")
    pub = await bus.connect("pub")
    await pub.publish("errorflow/new/inbox/x", b"fresh")
    topic, payload = await asyncio.wait_for(anext(aiter(conn.messages())), 5)
    assert (topic, payload) == ("errorflow/new/inbox/x", b"fresh")
    await bus.close()


@pytest.mark.mosquitto
async def test_reconnects_and_resubscribes_after_broker_restart(tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path)
    broker.start()
    bus = MqttBus(broker.url)
    try:
        sub = await bus.connect("sub")
        await sub.subscribe("errorflow/r/#")
        pub = await bus.connect("pub")
        assert offline_s(sub) == 0
        broker.stop()
        await asyncio.sleep(0.5)
        assert offline_s(sub) > 0  # the runner's bound on an outage counts from here
        broker.start()  # same port
        # The publish waits for the reconnect, the subscriber has resubscribed.
        for _ in range(50):
            await pub.publish("errorflow/r/inbox/x", b"after restart")
            try:
                _, payload = await asyncio.wait_for(anext(aiter(sub.messages())), 0.3)
                break
            except TimeoutError:
                continue
        else:
            raise AssertionError("no message after the broker came back")
        assert payload == b"after restart"
        assert sub.reconnects >= 1 and pub.reconnects >= 1
        assert offline_s(sub) == 0 and offline_s(pub) == 0
    finally:
        await bus.close()
        broker.stop()


async def test_an_in_process_connection_is_never_offline() -> None:
    conn = await InProcessBus().connect("x")
    assert offline_s(conn) == 0


@pytest.mark.mosquitto
async def test_a_will_is_published_when_a_session_drops_not_when_it_closes(
    mosquitto: Mosquitto,
) -> None:
    bus = MqttBus(mosquitto.url)
    try:
        sub = await bus.connect("sub")
        await sub.subscribe("errorflow/w/control/#")
        made = iter(range(100))
        conn = bus.open("agent")  # the will is set before the first session opens
        conn.will = lambda: ("errorflow/w/control/agent", f"gone {next(made)}".encode())
        await conn.start()
        # the network goes (as for a killed process): the broker publishes the will
        conn._client._client.socket().shutdown(socket.SHUT_RDWR)  # type: ignore[union-attr]
        incoming = aiter(sub.messages())
        assert await asyncio.wait_for(anext(incoming), 10) == (
            "errorflow/w/control/agent",
            b"gone 0",
        )
        for _ in range(100):  # it reconnects, with a will of its new session
            if conn.reconnects and offline_s(conn) == 0:
                break
            await asyncio.sleep(0.05)
        await conn.close()  # a clean disconnect: the broker discards the will
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(incoming), 1.0)
        assert next(made) == 2  # one will per session
    finally:
        await bus.close()
