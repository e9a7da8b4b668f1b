"""The gmqtt transport: what it adds to gmqtt (awaited acks, resends, its own reconnects,
wills, back-pressure), how it is chosen, and that a run on it ends as one on aiomqtt.

The shared MQTT tests (test_mqtt, test_broker, test_liveness, ...) run on both clients
(conftest `mqtt_client`); these are the ones that look inside a gmqtt session.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from errorflow.bus import gmqtt_transport
from errorflow.bus.gmqtt_transport import GmqttConnection
from errorflow.bus.mqtt import MqttBus, MqttConnection, client_of
from errorflow.bus.url import (
    CLIENT_ENV,
    BrokerURL,
    BrokerURLError,
    parse_broker_url,
)
from errorflow.runtime.runner import RunOptions, run_scenario
from tests.conftest import Mosquitto, scenario
from tests.test_runner import normalised
from tests.test_security import tls_broker
from tests.test_security import url as tls_url

__all__ = ["tls_broker"]  # a fixture, imported for the TLS test


def _sock(conn: GmqttConnection) -> socket.socket:
    client = conn._client
    assert client is not None
    sock = client._connection._transport.get_extra_info("socket")
    assert sock is not None
    return sock  # type: ignore[no-any-return]


async def _next(conn: Any, timeout: float = 5) -> tuple[str, bytes]:
    item: tuple[str, bytes] = await asyncio.wait_for(anext(aiter(conn.messages())), timeout)
    return item


@contextlib.asynccontextmanager
async def _sub_pub(url: BrokerURL, pattern: str) -> AsyncIterator[tuple[Any, GmqttConnection]]:
    """A subscriber to `pattern` and a publisher, both on gmqtt; the bus closed after."""
    bus = MqttBus(dataclasses.replace(url, client="gmqtt"))
    try:
        sub = await bus.connect("sub")
        await sub.subscribe(pattern)
        pub = await bus.connect("pub")
        assert isinstance(pub, GmqttConnection)
        yield sub, pub
    finally:
        await bus.close()


def test_the_url_the_environment_or_the_default_chooses_the_client(tmp_path: Path) -> None:
    url = parse_broker_url("mqtt://h:1883?client=gmqtt")
    assert url.client == "gmqtt" and str(url) == "mqtt://h:1883?client=gmqtt"
    assert client_of(url, env={CLIENT_ENV: "aiomqtt"}) == "gmqtt"  # the URL wins
    plain = parse_broker_url("mqtt://h:1883")
    assert client_of(plain, env={CLIENT_ENV: "gmqtt"}) == "gmqtt"
    assert client_of(plain, env={}) == "aiomqtt"
    with pytest.raises(BrokerURLError, match="client=paho"):
        parse_broker_url("mqtt://h:1883?client=paho")
    with pytest.raises(ValueError, match="paho"):
        client_of(plain, env={CLIENT_ENV: "paho"})


async def test_the_bus_opens_sessions_with_the_chosen_client(embedded: BrokerURL) -> None:
    for client, kind in (("gmqtt", GmqttConnection), ("aiomqtt", MqttConnection)):
        bus = MqttBus(dataclasses.replace(embedded, client=client))
        try:
            conn = await bus.connect("x")
            assert isinstance(conn, kind)
        finally:
            await bus.close()


async def test_a_wrong_credential_fails_the_first_connect(embedded: BrokerURL) -> None:
    bad = dataclasses.replace(embedded, password="wrong", client="gmqtt")
    with pytest.raises(ConnectionError, match="cannot connect"):
        await MqttBus(bad).connect("x")


async def test_publish_returns_on_the_puback_and_sends_nagle_free(embedded: BrokerURL) -> None:
    bus = MqttBus(dataclasses.replace(embedded, client="gmqtt"))
    try:
        conn = await bus.connect("fast")
        assert isinstance(conn, GmqttConnection)
        assert _sock(conn).getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        await asyncio.gather(*(conn.publish("errorflow/a/inbox/x", b"m") for _ in range(50)))
        assert conn._store.waiting == {}  # every PUBACK arrived and was consumed
    finally:
        await bus.close()


class _Socket:
    """A transport that notes each write (and whether it was closed)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info {name}"


async def test_writes_of_one_turn_of_the_loop_go_out_as_one_in_order() -> None:
    sock = _Socket()
    corked = gmqtt_transport._Corked(sock)  # type: ignore[arg-type]
    for part in (b"a", bytearray(b"b"), b"c"):
        corked.write(part)
    assert sock.writes == []  # nothing sent during the turn
    await asyncio.sleep(0)
    assert sock.writes == [b"abc"]
    corked.write(b"d")
    corked.close()  # what was collected goes out before the close
    assert sock.writes == [b"abc", b"d"] and sock.closed
    assert corked.get_extra_info("socket") == "info socket"  # the rest is the transport's
    corked.write(b"e")
    await asyncio.sleep(0)
    assert sock.writes == [b"abc", b"d"]  # nothing written to a closed transport


async def test_a_session_writes_through_one_corked_transport(embedded: BrokerURL) -> None:
    bus = MqttBus(dataclasses.replace(embedded, client="gmqtt"))
    try:
        conn = await bus.connect("corked")
        assert isinstance(conn, GmqttConnection) and conn._client is not None
        connection = conn._client._connection
        assert isinstance(connection._transport, gmqtt_transport._Corked)
        assert connection._protocol._transport is connection._transport
    finally:
        await bus.close()


@pytest.mark.mosquitto
@pytest.mark.parametrize("way", ["publish", "publish_soon"])
async def test_a_publish_without_its_puback_is_sent_again(
    mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    monkeypatch.setattr(gmqtt_transport, "ACK_TIMEOUT_S", 0.3)
    monkeypatch.setattr(gmqtt_transport, "SWEEP_S", 0.1)  # publish_soon's look for late ones
    async with _sub_pub(mosquitto.url, "errorflow/p/#") as (sub, pub):
        lost = pub._store.remove_message_by_mid
        dropped: list[int] = []

        def drop_first(mid: int) -> None:  # the first PUBACK never reaches the publisher
            if not dropped:
                dropped.append(mid)
                return
            lost(mid)

        monkeypatch.setattr(pub._store, "remove_message_by_mid", drop_first)
        if way == "publish":
            await asyncio.wait_for(pub.publish("errorflow/p/inbox/x", b"once"), 5)
        else:
            written = pub.publish_soon("errorflow/p/inbox/x", b"once")
            assert written is not None
            await asyncio.wait_for(written, 5)  # settled by the copy sent again
        assert dropped and pub._store.waiting == {}
        # at least once: the broker had it, and got it again (receivers drop the copy)
        assert await _next(sub) == ("errorflow/p/inbox/x", b"once")
        assert await _next(sub) == ("errorflow/p/inbox/x", b"once")


async def test_publish_soon_writes_in_order_and_settles_on_the_puback(
    embedded: BrokerURL,
) -> None:
    async with _sub_pub(embedded, "errorflow/s/#") as (sub, pub):
        written = [pub.publish_soon("errorflow/s/inbox/x", b"%d" % i) for i in range(20)]
        await pub.publish("errorflow/s/inbox/x", b"last")  # after them, as written
        assert all(w is not None for w in written)
        await asyncio.wait_for(asyncio.gather(*(w for w in written if w is not None)), 5)
        assert pub._store.waiting == {}  # every PUBACK consumed
        got = [(await _next(sub))[1] for _ in range(21)]
        assert got == [b"%d" % i for i in range(20)] + [b"last"]
    assert pub.publish_soon("errorflow/s/inbox/x", b"x") is None  # closed: `publish` says


@pytest.mark.mosquitto
async def test_publish_soon_of_a_lost_session_is_sent_on_the_next(
    mosquitto: Mosquitto,
) -> None:
    async with _sub_pub(mosquitto.url, "errorflow/l/#") as (sub, pub):
        written = pub.publish_soon("errorflow/l/inbox/x", b"kept")
        assert written is not None
        assert pub._client is not None
        pub._client._connection._transport.abort()  # lost before it left the process
        await asyncio.wait_for(written, 10)  # settled on the next session
        assert pub.reconnects == 1
        assert await _next(sub) == ("errorflow/l/inbox/x", b"kept")


@pytest.mark.mosquitto
async def test_a_will_per_session_is_published_when_it_drops_not_when_it_closes(
    mosquitto: Mosquitto,
) -> None:
    bus = MqttBus(dataclasses.replace(mosquitto.url, client="gmqtt"))
    try:
        sub = await bus.connect("sub")
        await sub.subscribe("errorflow/w/control/#")
        made = iter(range(100))
        conn = bus.open("agent")
        conn.will = lambda: ("errorflow/w/control/agent", f"gone {next(made)}".encode())
        await conn.start()
        assert isinstance(conn, GmqttConnection)
        _sock(conn).shutdown(socket.SHUT_RDWR)  # the network goes, as for a killed process
        assert await _next(sub, 10) == ("errorflow/w/control/agent", b"gone 0")
        for _ in range(100):  # our own reconnect: a new session with a fresh will
            if conn._connected.is_set() and conn.reconnects:
                break
            await asyncio.sleep(0.1)
        assert conn.reconnects == 1
        await conn.close()  # a clean goodbye: the broker discards the will
        await conn.close()
        with pytest.raises(TimeoutError):
            await _next(sub, 1)
    finally:
        await bus.close()


async def test_a_full_inbox_stops_reading_until_the_consumer_catches_up(
    embedded: BrokerURL, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gmqtt_transport, "QUEUE_LIMIT", 20)
    bus = MqttBus(dataclasses.replace(embedded, client="gmqtt"))
    try:
        sub = await bus.connect("slow")
        assert isinstance(sub, GmqttConnection)
        await sub.subscribe("errorflow/b/#")
        pub = await bus.connect("pub")
        for i in range(200):
            await pub.publish("errorflow/b/inbox/x", f"{i}".encode())
        for _ in range(50):
            if sub._paused:
                break
            await asyncio.sleep(0.05)
        assert sub._paused and sub.queue.qsize() < 200  # the rest waits at the broker
        got = []
        async for _, payload in sub.messages():
            got.append(int(payload))
            if len(got) == 200:
                break
        assert got == list(range(200)) and not sub._paused
    finally:
        await bus.close()


@pytest.mark.mosquitto
def test_tls_with_a_client_certificate(tls_broker: Mosquitto) -> None:
    async def exchange() -> tuple[str, bytes]:
        bus = MqttBus(parse_broker_url(tls_url(tls_broker) + "&client=gmqtt"))
        try:
            sub = await bus.connect("sub")
            assert isinstance(sub, GmqttConnection)
            await sub.subscribe("errorflow/t/#")
            pub = await bus.connect("pub")
            await pub.publish("errorflow/t/inbox/x", b"over tls")
            return await _next(sub)
        finally:
            await bus.close()

    assert asyncio.run(exchange()) == ("errorflow/t/inbox/x", b"over tls")
    wrong = parse_broker_url(tls_url(tls_broker, password="wrong") + "&client=gmqtt")
    with pytest.raises(ConnectionError):
        asyncio.run(MqttBus(wrong).connect("x"))


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_a_run_on_gmqtt_ends_trial_by_trial_as_one_on_aiomqtt(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    s = scenario("contamination", trials=40, propagation="explicit")
    runs = {}
    for client in ("aiomqtt", "gmqtt"):
        url = dataclasses.replace(mosquitto.url, client=client)
        runs[client] = await run_scenario(
            s, RunOptions(broker=url, db_path=tmp_path / f"{client}.db")
        )
    assert [x.outcome for x in runs["gmqtt"].scores] == [x.outcome for x in runs["aiomqtt"].scores]
    assert normalised(runs["gmqtt"]) == normalised(runs["aiomqtt"])


async def test_a_topic_dropped_before_a_subscription_is_delivered_after_it(
    embedded: BrokerURL,
) -> None:
    bus = MqttBus(dataclasses.replace(embedded, client="gmqtt"))
    try:
        conn = await bus.connect("x")
        assert isinstance(conn, GmqttConnection)
        await conn.subscribe("errorflow/a/#")
        conn._on_message(conn._current, "errorflow/b/inbox/x", b"not ours")  # type: ignore[arg-type]
        await conn.subscribe("errorflow/b/#")
        conn._on_message(conn._current, "errorflow/b/inbox/x", b"ours now")  # type: ignore[arg-type]
        assert await _next(conn) == ("errorflow/b/inbox/x", b"ours now")
    finally:
        await bus.close()


async def test_a_cancel_lost_on_the_way_is_raised_and_a_cleanup_is_left_alone() -> None:
    async def lost() -> str:
        before = gmqtt_transport.cancels()
        # what Python 3.11's wait_for does when its inner await wins the race:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(10)
        gmqtt_transport.raise_lost_cancel(before)
        return "went on"

    task = asyncio.create_task(lost())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async def goodbye() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:  # cancelled: a goodbye is still published
            before = gmqtt_transport.cancels()
            await asyncio.sleep(0)
            gmqtt_transport.raise_lost_cancel(before)
            return "said goodbye"
        return "not cancelled"

    task = asyncio.create_task(goodbye())
    await asyncio.sleep(0)
    task.cancel()
    assert await task == "said goodbye"
