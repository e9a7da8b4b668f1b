"""`errorflow --mqtt-client aiomqtt|gmqtt COMMAND ...`: the MQTT client library of every
connection the command makes (bus.mqtt `client_of`).

It sets ERRORFLOW_MQTT_CLIENT for this process, so the agent and worker processes a
command starts use the same one; a URL's `?client=` still wins for that URL.
"""

from __future__ import annotations

import argparse
import os

from errorflow.bus.url import (
    CLIENT_ENV,
    CLIENTS,
    DEFAULT_CLIENT,
    missing_client,
)
from errorflow.cli.errors import UsageError, shown


def add_mqtt_client_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mqtt-client",
        choices=CLIENTS,
        help=f"MQTT client library (default: ${CLIENT_ENV}, else {DEFAULT_CLIENT})",
    )


def apply_mqtt_client_option(args: argparse.Namespace) -> None:
    """The option, else the environment's choice, checked before any connection."""
    chosen: str | None = getattr(args, "mqtt_client", None)
    if chosen is not None:
        os.environ[CLIENT_ENV] = chosen
    named = os.environ.get(CLIENT_ENV)
    if named and named not in CLIENTS:
        raise UsageError(f"expected one of {', '.join(CLIENTS)}, found {shown(named)}", CLIENT_ENV)
    if named and (why := missing_client(named)):
        raise UsageError(why, "--mqtt-client" if chosen else CLIENT_ENV)
