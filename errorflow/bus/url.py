"""Broker URLs: `mqtt://[user:pass@]host[:port]` or `mqtts://...` for TLS.

Credentials may also come from ERRORFLOW_MQTT_USERNAME / ERRORFLOW_MQTT_PASSWORD, so
they stay out of shell history. TLS options ride in the query string:
`mqtts://host:8883?ca=ca.pem&cert=client.pem&key=client.key`. `str()` of a parsed URL
never shows the password.

`?client=gmqtt` (or `aiomqtt`) picks the MQTT client library of every connection made
from this URL (`bus.mqtt.client_of`; else ERRORFLOW_MQTT_CLIENT, else the default).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

USER_ENV = "ERRORFLOW_MQTT_USERNAME"
PASSWORD_ENV = "ERRORFLOW_MQTT_PASSWORD"
#: The MQTT client libraries a connection can use (`?client=`).
CLIENTS = ("aiomqtt", "gmqtt")
CLIENT_ENV = "ERRORFLOW_MQTT_CLIENT"
#: The client library when neither the URL nor the environment names one (README,
#: "MQTT clients": why this one).
DEFAULT_CLIENT = "aiomqtt"


class BrokerURLError(ValueError):
    pass


@dataclass(frozen=True)
class BrokerURL:
    host: str
    port: int
    username: str | None = None
    password: str | None = None
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    client: str | None = None  # None: ERRORFLOW_MQTT_CLIENT, else the default

    def __str__(self) -> str:
        scheme = "mqtts" if self.tls else "mqtt"
        user = f"{self.username}:***@" if self.username else ""
        client = f"?client={self.client}" if self.client else ""
        return f"{scheme}://{user}{self.host}:{self.port}{client}"

    def __repr__(self) -> str:
        return f"BrokerURL({self})"


def parse_broker_url(url: str, env: Mapping[str, str] | None = None) -> BrokerURL:
    env = os.environ if env is None else env
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "mqtts", "tcp", "ssl"):
        raise BrokerURLError(
            f"broker URL must start with mqtt:// or mqtts://, got {url.split('://')[0]!r}"
        )
    if not parts.hostname:
        raise BrokerURLError("broker URL has no host (expected mqtt://HOST:PORT)")
    tls = parts.scheme in ("mqtts", "ssl")
    try:
        port = parts.port or (8883 if tls else 1883)
    except ValueError:
        raise BrokerURLError("broker URL port is not a number in 1-65535") from None
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {"ca", "cert", "key", "client"}
    if unknown:
        raise BrokerURLError(f"unknown broker URL option(s): {', '.join(sorted(unknown))}")
    for option in ("ca", "cert", "key"):
        if option in query and not os.path.isfile(query[option]):
            raise BrokerURLError(f"broker URL option {option}={query[option]}: no such file")
    client = query.get("client")
    if client is not None and client not in CLIENTS:
        raise BrokerURLError(f"broker URL option client={client}: expected one of {CLIENTS}")
    username = unquote(parts.username) if parts.username else env.get(USER_ENV) or None
    password = unquote(parts.password) if parts.password else env.get(PASSWORD_ENV) or None
    return BrokerURL(
        host=parts.hostname,
        port=port,
        username=username,
        password=password,
        tls=tls or "ca" in query,
        ca_file=query.get("ca"),
        cert_file=query.get("cert"),
        key_file=query.get("key"),
        client=client,
    )
