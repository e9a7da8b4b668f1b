"""Checks made before anything starts, so a mistake leaves nothing in the store: the
database can be written, a `--run-id` is new, the broker answers, a port is free."""

from __future__ import annotations

import asyncio
import errno
import socket
import uuid
from pathlib import Path

from errorflow.bus.mqtt import MqttBus
from errorflow.bus.url import BrokerURL, BrokerURLError, parse_broker_url
from errorflow.cli.errors import RunFailure, UsageError, db_option
from errorflow.runtime.store import check_writable, get_run, run_exists

#: How long the broker check waits for a CONNACK (aiomqtt's own timeout is longer).
BROKER_CHECK_S = 10.0


def broker_of(url: str | None, option: str = "--broker") -> BrokerURL | None:
    """The parsed `--broker` URL (None: the embedded broker); a malformed one is bad input."""
    if not url:
        return None
    try:
        return parse_broker_url(url)
    except BrokerURLError as exc:
        raise UsageError(str(exc), where=f"{option} {url}") from None


def writable_db(db: str) -> None:
    check_writable(Path(db))


def run_id_is_new(db: str, run_id: str | None) -> None:
    """A `--run-id` already in the store would mix two runs' rows."""
    if run_id and run_exists(Path(db), run_id):
        stored = get_run(Path(db), run_id)
        status = stored["status"] if stored else "stored"
        hint = (
            f"; `errorflow run --resume {run_id}{db_option(db)}` finishes it"
            if status == "interrupted"
            else ""
        )
        raise UsageError(
            f"a run with this id is in {db} already ({status}); expected a new id{hint}",
            where=f"--run-id {run_id}",
        )


def broker_answers(url: BrokerURL | None) -> None:
    """Connect once to an external broker: a broker that is down fails here, with one
    line and exit code 1, before a run is registered (nothing is left `interrupted`)."""
    if url is not None:
        asyncio.run(_connect_once(url))


async def _connect_once(url: BrokerURL) -> None:
    bus = MqttBus(url)
    try:
        client_id = f"errorflow-check-{uuid.uuid4().hex[:8]}"
        await asyncio.wait_for(bus.connect(client_id), BROKER_CHECK_S)
    except TimeoutError:
        raise RunFailure(f"the MQTT broker {url} did not answer in {BROKER_CHECK_S:g}s") from None
    finally:
        await bus.close()


def free_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # as a server binds: a port left in TIME_WAIT is free, a listening one is not
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                other = port + 1 if port < 65535 else port - 1
                raise UsageError(
                    f"already in use on {host}; expected a free port (e.g. --port {other})",
                    where=f"--port {port}",
                ) from None
            raise UsageError(
                f"cannot listen on {host}:{port}: {exc.strerror}", where=f"--port {port}"
            ) from None
