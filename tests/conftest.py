"""Shared fixtures: brokers (embedded amqtt, a real Mosquitto) and bundled scenarios."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from errorflow.bus.broker import EmbeddedBroker
from errorflow.bus.url import BrokerURL
from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import load
from errorflow.scenario.model import Scenario

IN_CI = bool(os.environ.get("CI"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mosquitto_binary() -> str | None:
    return shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
    )


def require_mosquitto() -> str:
    binary = mosquitto_binary()
    if binary is None:
        if IN_CI:
            pytest.fail("CI is set but mosquitto is not installed (apt-get install mosquitto)")
        pytest.skip("mosquitto not installed")
    return binary


class Mosquitto:
    """A Mosquitto broker on a loopback port, with a config we write."""

    def __init__(self, tmp: Path, extra_config: str = "", port: int | None = None) -> None:
        self.binary = require_mosquitto()
        self.port = port or free_port()
        self.tmp = tmp
        self.conf = tmp / f"mosquitto-{self.port}.conf"
        self.extra = extra_config
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        default = (
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n"
            if not self.extra
            else self.extra
        )
        self.conf.write_text(f"persistence false\n{default}")
        # Its log goes to a file: a pipe nobody reads fills up (every connection logs a
        # line) and then blocks the broker, which stops answering CONNECTs mid-suite.
        self.log = self.tmp / f"mosquitto-{self.port}.log"
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(self.conf)],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("wb"),
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {self.log.read_text(errors='replace')}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    @property
    def url(self) -> BrokerURL:
        return BrokerURL("127.0.0.1", self.port)


class ExternalMosquitto(Mosquitto):
    """The broker .ci/run started (ERRORFLOW_TEST_MQTT_PORT): used, never stopped."""

    def __init__(self, port: int) -> None:
        self.binary = require_mosquitto()
        self.port = port
        self.proc = None

    def start(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=5):
            pass

    def stop(self) -> None:
        pass


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    port = os.environ.get("ERRORFLOW_TEST_MQTT_PORT")
    broker = (
        ExternalMosquitto(int(port)) if port else Mosquitto(tmp_path_factory.mktemp("mosquitto"))
    )
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
async def embedded() -> AsyncIterator[BrokerURL]:
    broker = EmbeddedBroker()
    url = await broker.start()
    yield url
    await broker.stop()


def scenario(name: str, **update: object) -> Scenario:
    s = load(bundled()[name])
    if update:
        s = Scenario.model_validate({**s.model_dump(), **update})
    return s


#: Fixtures that start or use a real Mosquitto: their tests carry the `mosquitto` marker
#: (`pytest -m "not mosquitto"` runs the rest on a machine without one).
MOSQUITTO_FIXTURES = frozenset({"mosquitto", "tls_broker"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if MOSQUITTO_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.mosquitto)
