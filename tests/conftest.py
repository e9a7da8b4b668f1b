"""Shared fixtures: brokers (embedded amqtt, a real Mosquitto) and bundled scenarios."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

# gmqtt's wheel installs a top-level `tests` package into site-packages; a regular
# package there beats this directory (a namespace package) for `from tests.conftest
# import ...`. Name this directory `tests` before any test module imports it.
if Path(getattr(sys.modules.get("tests"), "__file__", None) or "/").parent != Path(__file__).parent:
    _tests = types.ModuleType("tests")
    _tests.__path__ = [str(Path(__file__).parent)]
    sys.modules["tests"] = _tests

from errorflow.bus.broker import EmbeddedBroker
from errorflow.bus.url import BrokerURL
from errorflow.scenario.bundled import bundled
from errorflow.scenario.loader import load
from errorflow.scenario.spec.model import Scenario

IN_CI = bool(os.environ.get("CI"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_pydantic_ai() -> None:
    """pydantic-ai-slim (a core dependency): missing only in a broken install."""
    try:
        import pydantic_ai  # noqa: F401
    except ImportError:
        if IN_CI:
            pytest.fail("CI is set but pydantic-ai is not installed (pip install -e .)")
        pytest.skip("pydantic-ai not installed (pip install -e .)")


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


def external_port() -> int | None:
    """The broker .ci/run started, for the first (or only) pytest-xdist worker. Other
    workers start their own: tests use fixed topics and client ids, and one worker's
    test must not hear another's."""
    port = os.environ.get("ERRORFLOW_TEST_MQTT_PORT")
    first = os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0"
    return int(port) if port and first else None


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    port = external_port()
    broker = ExternalMosquitto(port) if port else Mosquitto(tmp_path_factory.mktemp("mosquitto"))
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
BROKER_FIXTURES = MOSQUITTO_FIXTURES | {"embedded"}


#: The broker-facing test modules run against both MQTT client libraries (bus.mqtt
#: `client_of`): their async tests and those on a broker, each once per client.
MQTT_CLIENT_MODULES = frozenset(
    {"test_mqtt", "test_endpoint", "test_broker", "test_liveness", "test_bus_security"}
    | {"test_agent_process"}
)
MQTT_CLIENTS = ("aiomqtt", "gmqtt")
#: Tests that look inside paho's client (aiomqtt only; test_gmqtt_transport has gmqtt's).
PAHO_ONLY = frozenset(
    {
        "test_connections_send_without_nagle_delay",
        "test_a_will_is_published_when_a_session_drops_not_when_it_closes",
        "test_a_listener_on_a_busy_loop_keeps_up_with_a_steady_publisher",  # paho's read pace
    }
)


def _both_clients(metafunc: pytest.Metafunc) -> bool:
    if metafunc.module.__name__.rsplit(".", 1)[-1] not in MQTT_CLIENT_MODULES:
        return False
    if metafunc.function.__name__ in PAHO_ONLY:
        return False
    on_broker = bool(BROKER_FIXTURES & set(metafunc.fixturenames))
    marked = metafunc.definition.get_closest_marker("mosquitto") is not None
    return on_broker or marked or asyncio.iscoroutinefunction(metafunc.function)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Other tests keep their ids: only these get a [aiomqtt]/[gmqtt] parameter.
    if "mqtt_client" in metafunc.fixturenames and _both_clients(metafunc):
        metafunc.parametrize("mqtt_client", MQTT_CLIENTS, indirect=True)


def _errorflow_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("ERRORFLOW_")}


@pytest.fixture(autouse=True)
def environment_left_as_found() -> Iterator[None]:
    """A test leaves errorflow's variables as it found them (monkeypatch's undo comes
    first). Under pytest-xdist a leaked one (ERRORFLOW_MQTT_CLIENT=gmqtt) changed the
    tests its worker ran next; the leak is undone here and fails its own test."""
    before = _errorflow_environment()
    yield
    after = _errorflow_environment()
    if after != before:
        for name in after.keys() - before.keys():
            del os.environ[name]
        os.environ.update(before)
        changed = sorted(k for k in after.keys() | before.keys() if after.get(k) != before.get(k))
        pytest.fail(f"the test left the environment changed: {', '.join(changed)}")


@pytest.fixture(autouse=True)
def mqtt_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The client library this test's connections use (ERRORFLOW_MQTT_CLIENT, which
    agent processes started by the test inherit); None: the default."""
    client: str | None = getattr(request, "param", None)
    if client is not None:
        monkeypatch.setenv("ERRORFLOW_MQTT_CLIENT", client)
    return client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if MOSQUITTO_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.mosquitto)
