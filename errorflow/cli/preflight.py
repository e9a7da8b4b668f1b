"""Checks made before anything starts, so a mistake leaves nothing in the store: the
database can be written, a `--run-id` is new, a broker URL is well formed, a port is free.
(A broker that is down fails in `run_scenario` itself, before the run is stored.)"""

from __future__ import annotations

import errno
import socket
from pathlib import Path

from errorflow.bus.url import BrokerURL, BrokerURLError, parse_broker_url
from errorflow.cli.errors import UsageError, db_option
from errorflow.store.opening import check_writable
from errorflow.store.readers import get_run
from errorflow.store.run_ids import run_exists


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
