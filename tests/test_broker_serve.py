"""The embedded broker off the runner's loop: in a thread or a process of its own, the
same credential and loopback binding, and a clean stop (nothing left running)."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import socket
import threading

import pytest

from errorflow.bus.broker import EmbeddedBroker, _InProcess
from errorflow.bus.mqtt import MqttBus

MODES = ("process", "thread", "loop")


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("mode", MODES)
async def test_each_mode_serves_the_run_and_stops_cleanly(mode: str) -> None:
    threads = set(threading.enumerate())
    broker = EmbeddedBroker(mode=mode)
    url = await broker.start()
    assert url.host == "127.0.0.1" and url.password == broker.credential.password
    bus = MqttBus(url)
    try:
        sub = await bus.connect("sub")
        await sub.subscribe("errorflow/m/#")
        pub = await bus.connect("pub")
        await pub.publish("errorflow/m/inbox/x", b"hello")
        assert await asyncio.wait_for(anext(aiter(sub.messages())), 5) == (
            "errorflow/m/inbox/x",
            b"hello",
        )
    finally:
        await bus.close()
    await broker.stop()
    await broker.stop()  # twice is harmless
    assert not _listening(url.port)
    assert not {t for t in threading.enumerate() if t.name == "errorflow-broker"} - threads


@pytest.mark.parametrize("mode", ["process", "thread"])
async def test_off_the_loop_only_the_credential_gets_in(mode: str) -> None:
    async with EmbeddedBroker(mode=mode) as url:
        with pytest.raises(ConnectionError):
            await MqttBus(dataclasses.replace(url, password="wrong")).connect("x")


async def test_the_broker_process_leaves_when_its_parent_goes() -> None:
    broker = EmbeddedBroker(mode="process")
    url = await broker.start()
    running = broker._running
    assert isinstance(running, _InProcess) and running._proc is not None
    proc = running._proc
    assert proc.stdin is not None
    proc.stdin.close()  # what a killed runner's exit does to the pipe
    assert await asyncio.to_thread(proc.wait, 10) == 0
    assert not _listening(url.port)
    await broker.stop()


async def test_ctrl_c_to_the_process_group_leaves_the_broker_up() -> None:
    broker = EmbeddedBroker(mode="process")
    url = await broker.start()
    try:
        running = broker._running
        assert isinstance(running, _InProcess) and running._proc is not None
        running._proc.send_signal(signal.SIGINT)  # the runner shuts its run down first
        await asyncio.sleep(0.3)
        assert running._proc.poll() is None and _listening(url.port)
    finally:
        await broker.stop()


def test_an_unknown_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERRORFLOW_EMBEDDED_BROKER", "fork")
    with pytest.raises(ValueError, match="fork"):
        EmbeddedBroker()


@pytest.mark.parametrize(("client", "mode"), [("gmqtt", "process"), ("aiomqtt", "process")])
def test_the_default_mode_is_a_process_of_its_own(
    client: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ERRORFLOW_EMBEDDED_BROKER", raising=False)
    monkeypatch.setenv("ERRORFLOW_MQTT_CLIENT", client)
    assert EmbeddedBroker().mode == mode
    monkeypatch.setenv("ERRORFLOW_EMBEDDED_BROKER", "thread")  # told: as told
    assert EmbeddedBroker().mode == "thread"
