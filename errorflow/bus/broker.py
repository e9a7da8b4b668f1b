"""The embedded broker: amqtt on 127.0.0.1 and a free port, for zero-setup runs.

amqtt speaks MQTT 3.1.1 only and gives anonymous sessions no offline queue, so every
participant subscribes before the runner publishes anything (the presence handshake
in the runner guarantees it). Its own logging is loud; the CLI silences it unless -v
(errorflow.cli.main).

It can run off the runner's event loop (`EmbeddedBroker.mode`): in a process
of its own (the default, `default_mode`), where its work neither waits behind the
runner's nor shares its GIL, or in a thread.

Only the run's own participants get in: the broker is created with one credential
(a fresh random one unless given), and `start()` returns a URL that carries it, so
every client of that URL (runner, recorder, in-process agents, the TUI) connects with
it; a client without it, or with a wrong one, is refused (CONNACK "not authorized").
It listens on the loopback interface only: it is for one machine's runs, and
`errorflow broker-config` writes a Mosquitto configuration for runs across machines.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

from amqtt.plugins.base import BaseAuthPlugin
from amqtt.session import Session

from errorflow.bus.broker_serve import serve
from errorflow.bus.url import BrokerURL

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
MODE_ENV = "ERRORFLOW_EMBEDDED_BROKER"
MODES = ("process", "thread", "loop")
STOP_TIMEOUT_S = 10.0


def default_mode() -> str:
    """Where amqtt runs unless told: in its own process, whichever the client. Its work
    then neither waits behind the runner's nor shares its GIL; a client keeps up with it
    because the aiomqtt adapter reads every ready packet (`bus.aiomqtt_client`), so a
    broker ahead of it stays within amqtt's 5 s PUBACK limit (bench/RESULTS.md)."""
    return "process"


@dataclass(frozen=True)
class Credential:
    """A username and password for one run's broker. `repr` never shows the password."""

    username: str
    password: str = field(repr=False)

    @classmethod
    def new(cls, username: str = "errorflow") -> Credential:
        return cls(username, secrets.token_urlsafe(24))


class RunCredentialAuth(BaseAuthPlugin):  # type: ignore[misc]  # amqtt has no type hints
    """amqtt authentication: a session gets in only with one of the configured
    username/password pairs (no anonymous sessions). Configured by dotted class path
    under the broker config's "plugins"; the users dict is this broker's alone."""

    @dataclass
    class Config:
        users: dict[str, str] = field(default_factory=dict)

    async def authenticate(self, *, session: Session) -> bool:
        username, password = session.username, session.password
        if not username or password is None:
            return False
        expected: str | None = self.config.users.get(username)
        if expected is None:
            return False
        given = password.encode() if isinstance(password, str) else bytes(password)
        return hmac.compare_digest(expected.encode(), given)


class _Listener(TypedDict):
    type: str
    bind: str


class _AuthConfig(TypedDict):
    users: dict[str, str]


class _AmqttConfig(TypedDict):
    """The part of amqtt's configuration we set."""

    listeners: dict[str, _Listener]
    plugins: dict[str, _AuthConfig]


def _require_loopback(host: str) -> None:
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"the embedded broker listens on loopback only, not {host!r}")


class EmbeddedBroker:
    """amqtt for one run. `mode` (else ERRORFLOW_EMBEDDED_BROKER, else `default_mode()`):
    "process" (a child process: its own interpreter and core), "thread" (its own event
    loop in a thread of this process) or "loop" (on the caller's event loop, nothing of
    its own to start). Off the caller's loop, the broker's work does not queue behind the
    runner's, and in a process it does not share the GIL either."""

    def __init__(
        self,
        host: str = LOOPBACK,
        port: int = 0,
        credential: Credential | None = None,
        mode: str | None = None,
    ) -> None:
        _require_loopback(host)
        self.host = host
        self._port = port
        self.credential = credential or Credential.new()
        self.mode = mode or os.environ.get(MODE_ENV) or default_mode()
        if self.mode not in MODES:
            raise ValueError(f"{MODE_ENV}={self.mode!r}: expected one of {', '.join(MODES)}")
        self._running: _Running | None = None
        self.port = 0

    def _config(self) -> _AmqttConfig:
        """amqtt's configuration: one TCP listener, our authentication plugin only."""
        users = {self.credential.username: self.credential.password}
        return {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self._port}"}},
            "plugins": {f"{__name__}.{RunCredentialAuth.__name__}": {"users": users}},
        }

    async def start(self) -> BrokerURL:
        starts: dict[str, type[_Running]] = {
            "process": _InProcess,
            "thread": _InThread,
            "loop": _OnLoop,
        }
        running = starts[self.mode]()
        self.port = await running.start(self._config())
        self._running = running
        return BrokerURL(
            self.host,
            self.port,
            username=self.credential.username,
            password=self.credential.password,
        )

    async def stop(self) -> None:
        running, self._running = self._running, None
        if running is not None:
            await running.stop()

    async def __aenter__(self) -> BrokerURL:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class _Running(Protocol):
    async def start(self, config: _AmqttConfig) -> int: ...

    async def stop(self) -> None: ...


class _OnLoop:
    """On the caller's loop (mode "loop"): its work queues behind the caller's."""

    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, config: _AmqttConfig) -> int:
        port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(serve(config, port.set_result, self._stop))
        waits: set[asyncio.Future[object]] = {port, self._task}  # type: ignore[arg-type]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if not port.done():
            self._task.result()  # raises the broker's failure
        return port.result()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task


class _InThread:
    """Its own event loop in a daemon thread; stopped from ours, thread-safely."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    async def start(self, config: _AmqttConfig) -> int:
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._serve, args=(config, ready), name="errorflow-broker", daemon=True
        )
        self._thread.start()
        return await asyncio.wrap_future(ready)

    def _serve(self, config: _AmqttConfig, ready: concurrent.futures.Future[int]) -> None:
        async def main() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            await serve(config, ready.set_result, self._stop)

        try:
            asyncio.run(main())
        except BaseException as exc:  # handed to the starter, not lost
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.error("embedded broker thread failed: %s", exc)

    async def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # its loop already closed
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, STOP_TIMEOUT_S)


class _InProcess:
    """`python -m errorflow.bus.broker_serve`: the credential on its stdin, its port on
    its stdout, and it leaves when its stdin closes (see bus.broker_serve)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None

    async def start(self, config: _AmqttConfig) -> int:
        proc = subprocess.Popen(
            [sys.executable, "-m", "errorflow.bus.broker_serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(config).encode() + b"\n")
        proc.stdin.flush()
        line = await asyncio.to_thread(proc.stdout.readline)
        if not line.strip().isdigit():
            await self.stop()
            raise RuntimeError(f"the embedded broker did not start (exit {proc.returncode})")
        return int(line)

    async def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # its lifeline: it shuts down and exits
        try:
            await asyncio.to_thread(proc.wait, STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait)
        if proc.stdout is not None:
            proc.stdout.close()
