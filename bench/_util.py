"""Shared helpers for the benchmarks: brokers on 127.0.0.1, scenarios, timing, output.

Run a benchmark as `python bench/NAME.py [--quick]` from the repository root; Python
puts bench/ first on sys.path, which is how the scripts find this module. Every figure
a benchmark prints is a ratio of two measurements taken in the same run, next to the
absolute values, because the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from errorflow.bus.broker import EmbeddedBroker
from errorflow.bus.url import BrokerURL
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import load
from errorflow.scenario.spec.model import Scenario

HOST = "127.0.0.1"
BENCH_DIR = Path(__file__).resolve().parent


def parse_args(doc: str | None, extra: list[tuple[str, dict[str, Any]]] = ()) -> argparse.Namespace:  # type: ignore[assignment]
    p = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes: under a minute")
    for flag, kwargs in extra:
        p.add_argument(flag, **kwargs)
    return p.parse_args()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def mosquitto_binary() -> str | None:
    return shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
    )


@contextlib.contextmanager
def mosquitto(nodelay: bool = False) -> Iterator[BrokerURL]:
    """A Mosquitto broker on a free loopback port, with a temporary config; stopped after.
    nodelay: `set_tcp_nodelay true` (Nagle off on the broker's client sockets)."""
    binary = mosquitto_binary()
    if binary is None:
        raise SystemExit("mosquitto is not installed (apt-get install mosquitto)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="errorflow-bench-") as tmp:
        conf = Path(tmp) / "mosquitto.conf"
        # max_queued_messages 0 = unlimited: a benchmark burst must not be dropped by
        # the broker's per-client queue (default 1000), or we would measure loss.
        conf.write_text(
            f"persistence false\nlistener {port} {HOST}\nallow_anonymous true\n"
            "max_queued_messages 0\nmax_inflight_messages 0\n"
            + ("set_tcp_nodelay true\n" if nodelay else "")
        )
        proc = subprocess.Popen(
            [binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                if proc.poll() is not None:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"mosquitto exited: {err}")
                try:
                    with socket.create_connection((HOST, port), timeout=0.2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("mosquitto did not start listening") from None
                    time.sleep(0.05)
            yield BrokerURL(HOST, port)
        finally:
            stop_process(proc)


@contextlib.asynccontextmanager
async def embedded() -> AsyncIterator[BrokerURL]:
    broker = EmbeddedBroker(HOST)
    url = await broker.start()
    try:
        yield url
    finally:
        await broker.stop()


@contextlib.asynccontextmanager
async def broker(kind: str) -> AsyncIterator[BrokerURL]:
    """kind: 'embedded' (amqtt in this process), 'mosquitto' (a subprocess), or
    'mosquitto+nodelay' (candidate: `set_tcp_nodelay true` in Mosquitto's config; our own
    MQTT clients already set TCP_NODELAY, errorflow/bus/mqtt.py `_no_delay`)."""
    if kind == "embedded":
        async with embedded() as url:
            yield url
    elif kind == "mosquitto":
        with mosquitto() as url:
            yield url
    elif kind == "mosquitto+nodelay":
        with mosquitto(nodelay=True) as url:
            yield url
    else:
        raise ValueError(kind)


def no_delay(sock: Any) -> None:
    """TCP_NODELAY on a raw paho/aiomqtt client socket, as errorflow's MqttConnection does,
    so a raw baseline is not slowed down by Nagle where errorflow's path is not."""
    if isinstance(sock, socket.socket):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def scenario(ref: str, **overrides: Any) -> Scenario:
    from errorflow.scenario.overrides import apply

    s = load(resolve(ref) if not Path(ref).exists() else Path(ref))
    return apply(s, overrides) if overrides else s


@contextlib.contextmanager
def temp_db() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="errorflow-bench-db-") as tmp:
        yield Path(tmp) / "bench.db"


def count_recorded(db: Path, run_ids: list[str] | None = None) -> dict[str, int]:
    """Messages and events the recorder stored (optionally for some runs only)."""
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        where, params = "", ()
        if run_ids is not None:
            where = f" WHERE run_id IN ({','.join('?' * len(run_ids))})"
            params = tuple(run_ids)
        total = "SELECT count(*), coalesce(sum(length(envelope)), 0) FROM"
        msgs = conn.execute(f"{total} messages{where}", params).fetchone()
        evts = conn.execute(f"{total} events{where}", params).fetchone()
        return {
            "messages": int(msgs[0]),
            "events": int(evts[0]),
            "bytes": int(msgs[1]) + int(evts[1]),
        }
    finally:
        conn.close()


def unrecorded(db: Path) -> int:
    """Envelopes published but not stored. Every participant numbers what it publishes
    one by one (`seq`), so a gap in a sender's stored seqs is an envelope the recorder
    never got. The count stored is no such check: it differs between runs of one seed
    with nothing lost, because agents answer every roll call they hear (one or two
    `hello`s, by start-up timing) and a message resent after a late ack is acked again.
    (In-process agents only: an `errorflow agent`'s last will takes a seq unpublished.)"""
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        (missing,) = conn.execute(
            "SELECT coalesce(sum(hi - lo + 1 - n), 0) FROM (SELECT max(seq) hi, min(seq) lo,"
            " count(DISTINCT seq) n FROM (SELECT sender, seq FROM messages UNION ALL"
            " SELECT sender, seq FROM events) GROUP BY sender)"
        ).fetchone()
        return int(missing)
    finally:
        conn.close()


def quiet_logs() -> None:
    import logging

    for name in ("amqtt", "transitions", "mqtt", "errorflow"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def row(label: str, *cells: str, width: int = 34) -> str:
    return f"  {label:<{width}}" + "  ".join(cells)


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def run(coro: Any) -> Any:
    quiet_logs()
    return asyncio.run(coro)


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """Terminate a child process if it still runs; kill it if it will not go."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
