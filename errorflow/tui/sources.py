"""Where the TUI's envelopes come from: a run it starts, a run it attaches to, or SQLite.

The TUI is only ever a subscriber. Even the runs it starts itself are watched through
the bus (a connection subscribed to `errorflow/{run_id}/#` before the run begins), so
a run started here and one driven by another process look the same. Each source calls
`sink(envelope)` for every valid envelope, in arrival order, and returns when the
runner's `end` control message has been seen (or the stored run is exhausted).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from errorflow.bus.broker import EmbeddedBroker
from errorflow.bus.endpoint import Endpoint
from errorflow.bus.mqtt import MqttBus
from errorflow.bus.transport import Bus, Connection
from errorflow.bus.url import BrokerURL
from errorflow.protocol import signing, topics
from errorflow.protocol.envelope import Envelope
from errorflow.runtime.recorder import is_run_end
from errorflow.runtime.runner import RunOptions, new_run_id, run_scenario
from errorflow.scenario.overrides import with_settings
from errorflow.scenario.spec.model import Scenario
from errorflow.scenario.stored import load_stored
from errorflow.store.opening import connect_ro

Sink = Callable[[Envelope], None]

#: After the run returns, how long to wait for its `end` message to reach us.
END_GRACE_S = 5.0


class Source(Protocol):
    @property
    def run_id(self) -> str: ...

    @property
    def scenario(self) -> Scenario | None: ...

    async def run(self, sink: Sink) -> None: ...


class BusHolder:
    """One bus for the whole TUI session; the embedded broker starts on first use."""

    def __init__(self, broker: BrokerURL | None = None, bus: Bus | None = None) -> None:
        self.broker = broker
        self._bus = bus
        self._own: MqttBus | None = None
        self._embedded: EmbeddedBroker | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> Bus:
        async with self._lock:
            if self._bus is None:
                url = self.broker
                if url is None:
                    self._embedded = EmbeddedBroker()
                    url = await self._embedded.start()
                self._own = MqttBus(url, description=str(url))
                self._bus = self._own
            return self._bus

    async def close(self) -> None:
        if self._own is not None:
            await self._own.close()
            self._own = self._bus = None
        if self._embedded is not None:
            await self._embedded.stop()
            self._embedded = None


async def _subscribe(bus: Bus, run_id: str) -> Connection:
    conn = await bus.connect(f"{run_id}-tui-{id(bus) & 0xFFFF:x}")
    await conn.subscribe(topics.run_filter(run_id))
    return conn


async def _pump(
    conn: Connection, run_id: str, members: set[str] | None, sink: Sink, key: bytes | None
) -> None:
    # The endpoint drops invalid messages, other runs', duplicates (QoS 1 resends) and,
    # with the run key, unsigned or forged ones.
    endpoint = Endpoint(conn, run_id, "tui", members, key=key)
    async for env in endpoint.receive():
        try:
            sink(env)
        except Exception as exc:  # one message never stops the view
            endpoint.handler_failed(env, exc)
        if is_run_end(env):
            return


@dataclass
class LiveRun:
    """Starts a run of `scenario` on the session's bus and watches it."""

    scenario: Scenario
    holder: BusHolder
    db_path: Path
    run_id: str = ""
    key: bytes = field(default_factory=signing.new_key, repr=False)  # we run it: we verify

    def __post_init__(self) -> None:
        self.run_id = self.run_id or new_run_id(self.scenario.name)

    async def run(self, sink: Sink) -> None:
        bus = await self.holder.get()
        conn = await _subscribe(bus, self.run_id)
        members = set(self.scenario.agents) | {topics.RUNNER}
        reader = asyncio.create_task(_pump(conn, self.run_id, members, sink, self.key))
        try:
            options = RunOptions(
                bus=bus, run_id=self.run_id, db_path=self.db_path, run_key=self.key
            )
            await run_scenario(self.scenario, options)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reader), END_GRACE_S)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            await conn.close()


@dataclass
class Attach:
    """Watches a run another process drives."""

    run_id: str
    holder: BusHolder
    scenario: Scenario | None = None
    key: bytes | None = field(default=None, repr=False)  # None: nothing can be verified

    async def run(self, sink: Sink) -> None:
        conn = await _subscribe(await self.holder.get(), self.run_id)
        members = set(self.scenario.agents) | {topics.RUNNER} if self.scenario else None
        try:
            await _pump(conn, self.run_id, members, sink, self.key)
        finally:
            await conn.close()


@dataclass
class Replay:
    """Hands a stored run over in its recorded order, all at once: the app's pace
    (errorflow.tui.pace) decides how fast it is shown, as for a live run."""

    db_path: Path
    run_id: str
    scenario: Scenario | None = None
    rows: list[tuple[float, str]] = field(default_factory=list, repr=False)

    async def run(self, sink: Sink) -> None:
        if not self.rows:
            self.rows = await asyncio.to_thread(stored_envelopes, self.db_path, self.run_id)
        for i, (_, text) in enumerate(self.rows):
            if i % 500 == 499:
                await asyncio.sleep(0)  # let the UI breathe while a long run is read
            sink(Envelope.model_validate_json(text))


@dataclass(frozen=True)
class StoredRun:
    run_id: str
    scenario: Scenario
    seed: int
    trials: int
    propagation: str
    status: str


def find_run(db_path: Path, run_id: str) -> StoredRun | None:
    """A stored run by id or unique id prefix."""
    with contextlib.closing(connect_ro(db_path)) as conn:
        rows = conn.execute(
            "SELECT run_id, scenario_json, seed, trials, propagation, status FROM runs"
            " WHERE run_id = ? OR run_id LIKE ? ORDER BY run_id = ? DESC, started DESC",
            (run_id, run_id + "%", run_id),
        ).fetchall()
    if not rows or (rows[0]["run_id"] != run_id and len(rows) > 1):
        return None
    return _stored(rows[0])


def find_arm(db_path: Path, like: StoredRun, propagation: str) -> StoredRun | None:
    """The latest finished run of the same scenario, seed and trials with `propagation`."""
    with contextlib.closing(connect_ro(db_path)) as conn:
        rows = conn.execute(
            "SELECT run_id, scenario_json, seed, trials, propagation, status FROM runs"
            " WHERE seed = ? AND trials = ? AND propagation = ? AND status = 'finished'"
            " ORDER BY started DESC",
            (like.seed, like.trials, propagation),
        ).fetchall()
    for row in rows:
        stored = _stored(row)
        same = stored.scenario.model_dump(exclude={"propagation"}) == like.scenario.model_dump(
            exclude={"propagation"}
        )
        if same:
            return stored
    return None


def _stored(row: sqlite3.Row) -> StoredRun:
    return StoredRun(
        row["run_id"],
        load_stored(row["scenario_json"], f"stored run {row['run_id']}"),
        int(row["seed"]),
        int(row["trials"]),
        str(row["propagation"]),
        str(row["status"]),
    )


def stored_envelopes(db_path: Path, run_id: str) -> list[tuple[float, str]]:
    """Every stored message and event of a run, in the order the recorder received them."""
    with contextlib.closing(connect_ro(db_path)) as conn:
        rows = conn.execute(
            "SELECT received, envelope FROM ("
            " SELECT received, envelope, 0 AS src, rowid AS r FROM messages WHERE run_id = ?"
            " UNION ALL"
            " SELECT received, envelope, 1 AS src, rowid AS r FROM events WHERE run_id = ?"
            ") ORDER BY received, src, r",
            (run_id, run_id),
        ).fetchall()
    return [(float(r[0]), str(r[1])) for r in rows]


def flipped(scenario: Scenario) -> Scenario:
    other = "implicit" if scenario.propagation == "explicit" else "explicit"
    return with_settings(scenario, propagation=other)
