"""Broker URLs: `mqtt://[user:pass@]host[:port]` or `mqtts://...` for TLS.

Credentials may also come from ERRORFLOW_MQTT_USERNAME / ERRORFLOW_MQTT_PASSWORD, so
they stay out of shell history. TLS options ride in the query string:
`mqtts://host:8883?ca=ca.pem&cert=client.pem&key=client.key`. `str()` of a parsed URL
never shows the password.

`?client=gmqtt` (or `aiomqtt`) picks the MQTT client library of every connection made
from this URL (`bus.mqtt.client_of`; else ERRORFLOW_MQTT_CLIENT, else the default).

A URL comes from the user, so it is checked whole before anything uses it, and every
problem is a one-line `URLError`: at most `MAX_URL_CHARS` of printable text, a host that
is a name, an IPv4 address or a bracketed IPv6 one, a port from 1 to 65535 (`:0` is not
"the default"), TLS files that are regular files of a sensible size. `check_http_url`
applies the same to an HTTP server's URL (a model server's `base_url`, an OTLP receiver).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

from errorflow.core.errors import InputError
from errorflow.core.regular_file import FileRefused, regular_stat

USER_ENV = "ERRORFLOW_MQTT_USERNAME"
PASSWORD_ENV = "ERRORFLOW_MQTT_PASSWORD"
#: The MQTT client libraries a connection can use (`?client=`).
CLIENTS = ("aiomqtt", "gmqtt")
CLIENT_ENV = "ERRORFLOW_MQTT_CLIENT"
#: Longer URLs are refused before they are parsed (no host, port and options need more).
MAX_URL_CHARS = 2048
#: CA, certificate and key files (`?ca=`): PEM bundles are kilobytes; a system bundle is
#: a few hundred.
MAX_TLS_FILE_BYTES = 4 * 1024 * 1024
#: MQTT's limit on a user name and on a password (a two-byte length prefix).
MAX_CREDENTIAL_BYTES = 65_535
_HOST_PORT = re.compile(
    r"(?:(?P<name>[A-Za-z0-9_][A-Za-z0-9_.\-]{0,252})|\[(?P<ip6>[0-9A-Fa-f:.]+(?:%[\w.\-]+)?)\])"
    r"(?::(?P<port>[^:]*))?"
)

#: The client library when neither the URL nor the environment names one (README,
#: "MQTT clients": why this one).
DEFAULT_CLIENT = "aiomqtt"


def missing_client(client: str) -> str | None:
    """Why `client` cannot be used here (None: it can). gmqtt is an optional extra."""
    if importlib.util.find_spec(client) is not None:
        return None
    return f"the {client} MQTT client is not installed: pip install 'errorflow[{client}]'"


class URLError(InputError, ValueError):
    """A URL that names no server (said in one line)."""


class BrokerURLError(URLError):
    where = "--broker"


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
        user = f"{_shown(self.username)}:***@" if self.username else ""
        client = f"?client={self.client}" if self.client else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{user}{host}:{self.port}{client}"

    def __repr__(self) -> str:
        return f"BrokerURL({self})"


def parse_broker_url(url: str, env: Mapping[str, str] | None = None) -> BrokerURL:
    env = os.environ if env is None else env
    parts = _split(url, _BROKER)
    if parts.scheme not in ("mqtt", "mqtts", "tcp", "ssl"):
        raise BrokerURLError(
            f"broker URL must start with mqtt:// or mqtts://, got {_shown(url.split('://')[0])!r}"
        )
    tls = parts.scheme in ("mqtts", "ssl")
    host, port = _host_port(parts.netloc, 8883 if tls else 1883, _BROKER)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {"ca", "cert", "key", "client"}
    if unknown:
        names = ", ".join(_shown(name) for name in sorted(unknown))
        raise BrokerURLError(f"unknown broker URL option(s): {names}")
    for option in ("ca", "cert", "key"):
        if option in query:
            _check_tls_file(option, query[option])
    client = query.get("client")
    if client is not None and client not in CLIENTS:
        raise BrokerURLError(
            f"broker URL option client={_shown(client)}: expected one of {CLIENTS}"
        )
    if client is not None and (why := missing_client(client)):
        raise BrokerURLError(f"broker URL option client={client}: {why}")
    username = unquote(parts.username) if parts.username else env.get(USER_ENV) or None
    password = unquote(parts.password) if parts.password else env.get(PASSWORD_ENV) or None
    _check_credential("user name", username)
    _check_credential("password", password)
    return BrokerURL(
        host=host,
        port=port,
        username=username,
        password=password,
        tls=tls or "ca" in query,
        ca_file=query.get("ca"),
        cert_file=query.get("cert"),
        key_file=query.get("key"),
        client=client,
    )


def check_http_url(url: str) -> None:
    """An HTTP server's URL (a model server's `base_url`, an OTLP receiver), checked as a
    broker URL is: short printable text, a valid host and a port from 1 to 65535.
    Raises URLError."""
    parts = _split(url, _HTTP)
    if parts.scheme not in ("http", "https"):
        raise URLError(
            f"URL must start with http:// or https://, got {_shown(url.split('://')[0])!r}"
        )
    _host_port(parts.netloc, 443 if parts.scheme == "https" else 80, _HTTP)


@dataclass(frozen=True)
class _Kind:
    """What kind of URL a message is about, and the error it raises."""

    name: str  # `broker URL`
    form: str  # `mqtt://HOST:PORT`
    error: type[URLError]


_BROKER = _Kind("broker URL", "mqtt://HOST:PORT", BrokerURLError)
_HTTP = _Kind("URL", "http://HOST:PORT", URLError)


def _split(url: str, kind: _Kind) -> SplitResult:
    """The parts of a URL that is short printable text: `urlsplit` silently drops tabs
    and newlines, and a host of a megabyte is no host."""
    if len(url) > MAX_URL_CHARS:
        raise kind.error(
            f"expected a {kind.name} of at most {MAX_URL_CHARS} characters, found {len(url):,}"
        )
    bad = next((c for c in url if not c.isprintable() or c.isspace()), None)
    if bad is not None:
        raise kind.error(
            f"{kind.name} holds the character U+{ord(bad):04X} (a space or a control "
            f"character); expected {kind.form} with any such character %-escaped"
        )
    try:
        return urlsplit(url)
    except ValueError as exc:  # an unclosed `[`: "Invalid IPv6 URL"
        raise kind.error(f"not a {kind.name} ({exc}); expected {kind.form}") from None


def _host_port(netloc: str, default_port: int, kind: _Kind) -> tuple[str, int]:
    """HOST[:PORT] of a URL: a name, an IPv4 address or a bracketed IPv6 one, and a port
    from 1 to 65535 (none: the scheme's)."""
    hostport = netloc.rpartition("@")[2]
    match = _HOST_PORT.fullmatch(hostport)
    if match is None:
        raise kind.error(
            f"{kind.name} has no valid host, found {_shown(hostport)!r} (expected "
            f"{kind.form}, a name, an IPv4 address or an IPv6 one in brackets)"
        )
    host, port_text = match["name"] or match["ip6"], match["port"]
    if match["ip6"] is not None:
        import ipaddress  # only here: every command's start-up imports this module

        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise kind.error(f"{kind.name} host [{_shown(host)}] is no IPv6 address") from None
    if not port_text:
        return host.lower(), default_port
    port = int(port_text) if port_text.isascii() and port_text.isdigit() else 0
    if not 1 <= port <= 65535 or len(port_text) > 5:
        raise kind.error(
            f"{kind.name} port is not a number in 1-65535, found {_shown(port_text)!r}"
        )
    return host.lower(), port


def _check_tls_file(option: str, path: str) -> None:
    """A CA, certificate or key file: a regular file of a sensible size, looked at now
    (a FIFO or a device named here would hang or flood the TLS setup later)."""
    try:
        regular_stat(Path(path), MAX_TLS_FILE_BYTES)
    except FileRefused as exc:
        raise BrokerURLError(f"broker URL option {option}={_shown(path)}: {exc}") from None


def _check_credential(what: str, value: str | None) -> None:
    """MQTT carries a user name and a password of at most 65,535 bytes."""
    if value is not None and len(value.encode("utf-8", "surrogatepass")) > MAX_CREDENTIAL_BYTES:
        raise BrokerURLError(
            f"broker {what} is longer than MQTT allows ({MAX_CREDENTIAL_BYTES:,} bytes)"
        )


def _shown(text: str) -> str:
    """A piece of a URL as a message shows it: whole, or (a hostile one of kilobytes)
    its first 60 characters and its length."""
    return text if len(text) <= 200 else f"{text[:60]}... ({len(text):,} characters)"
