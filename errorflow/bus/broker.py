"""The embedded broker: amqtt on 127.0.0.1 and a free port, for zero-setup runs.

amqtt speaks MQTT 3.1.1 only and gives anonymous sessions no offline queue, so every
participant subscribes before the runner publishes anything (the presence handshake
in the runner guarantees it). Its own logging is loud; we keep it at WARNING.

Only the run's own participants get in: the broker is created with one credential
(a fresh random one unless given), and `start()` returns a URL that carries it, so
every client of that URL (runner, recorder, in-process agents, the TUI) connects with
it; a client without it, or with a wrong one, is refused (CONNACK "not authorized").
It listens on the loopback interface only: it is for one machine's runs, and
`errorflow broker-config` writes a Mosquitto configuration for runs across machines.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any, TypedDict

from amqtt.broker import Broker
from amqtt.plugins.base import BaseAuthPlugin
from amqtt.session import Session

from errorflow.bus.url import BrokerURL

for _name in ("amqtt", "transitions"):
    logging.getLogger(_name).setLevel(logging.ERROR)

LOOPBACK = "127.0.0.1"


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
    def __init__(
        self, host: str = LOOPBACK, port: int = 0, credential: Credential | None = None
    ) -> None:
        _require_loopback(host)
        self.host = host
        self._port = port
        self.credential = credential or Credential.new()
        self._broker: Any = None
        self.port = 0

    def _config(self) -> _AmqttConfig:
        """amqtt's configuration: one TCP listener, our authentication plugin only."""
        users = {self.credential.username: self.credential.password}
        return {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self._port}"}},
            "plugins": {f"{__name__}.{RunCredentialAuth.__name__}": {"users": users}},
        }

    async def start(self) -> BrokerURL:
        self._broker = Broker(self._config())
        await self._broker.start()
        server = self._broker._servers["default"].instance  # amqtt keeps no public accessor
        self.port = server.sockets[0].getsockname()[1]
        return BrokerURL(
            self.host,
            self.port,
            username=self.credential.username,
            password=self.credential.password,
        )

    async def stop(self) -> None:
        if self._broker is not None:
            await self._broker.shutdown()
            self._broker = None

    async def __aenter__(self) -> BrokerURL:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
