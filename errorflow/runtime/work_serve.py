"""The worker's side of trials handed out through the broker (`errorflow worker`).

A worker takes work items through the shared subscription (the broker gives each item to
one member of the group) and runs them one at a time, holding at most one more (so it
never waits for the runner between batches): an item that arrives while it holds one is
put back on the items topic for another member, after a short pause, so an idle worker
is never left waiting behind a busy one (Mosquitto gives shared messages round-robin,
whoever is busy). It says when it takes an item, so the runner knows whose batches to
hand out again if it vanishes. It runs each batch exactly as a local `--workers` shard
runs (`workers.run_shard`: an in-process bus, a store of its own, the run's id and key),
then publishes the batch's scores and the shard's store, compressed, in signed parts.
Every second it says it is alive (and what it runs); its last will says it is gone, so
the runner hands a killed worker's batch to another at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiomqtt
from aiomqtt import Client

from errorflow.bus.url import BrokerURL
from errorflow.core.redact import redact
from errorflow.runtime import work_wire as wire
from errorflow.runtime.workers import (
    Report,
    Shard,
    ShardResult,
    run_shard,
)
from errorflow.scenario.run_plan import PlanDamaged, RunPlan
from errorflow.scoring.score import TrialScore

HEARTBEAT_S = 1.0
#: How long a busy worker holds an item before it puts it back (no storm of bounces
#: when every worker is busy).
BOUNCE_S = 0.1


@dataclass
class Worker:
    """One worker's session: who it is, what it serves, what it is doing."""

    client: Client
    key: bytes
    name: str
    run_id: str | None  # None: any run under its key
    tmp: Path
    say: Callable[[str], None]
    busy: tuple[str, int, str] | None = None  # run, batch, attempt
    #: The item held while one runs (at most one: more are put back).
    held: asyncio.Queue[wire.Doc] = field(default_factory=lambda: asyncio.Queue(1))
    batches: int = 0
    ignored: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def spawn(self, work: asyncio.Task[None]) -> None:
        self.tasks.add(work)
        work.add_done_callback(self.tasks.discard)


async def serve(
    url: BrokerURL,
    key: bytes,
    name: str,
    run_id: str | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> int:
    """Take and run batches until the run ends (`run_id`) or for ever; returns how many
    batches it ran."""
    gone = wire.seal(key, {"t": "gone", "worker": name})
    will = (wire.worker_topic(key, name), gone)
    with tempfile.TemporaryDirectory(prefix="errorflow-worker-") as tmp:
        async with wire.mqtt_client(url, f"errorflow-worker-{name}", will) as client:
            worker = Worker(client, key, name, run_id, Path(tmp), say)
            await client.subscribe(wire.items_filter(key, run_id), qos=1)
            if run_id is not None:
                await client.subscribe(wire.run_topic(key, run_id, "end"), qos=1)
            worker.spawn(asyncio.create_task(_heartbeat(worker)))
            worker.spawn(asyncio.create_task(_run_items(worker)))
            say(f"worker {name}: taking trials of {run_id or 'any run'} on {url}")
            try:
                await _take(worker)
            finally:
                for task in list(worker.tasks):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
                with contextlib.suppress(Exception):  # a clean goodbye discards the will
                    await client.publish(wire.worker_topic(key, name), gone, qos=1)
    return worker.batches


async def _take(worker: Worker) -> None:
    async for message in worker.client.messages:
        raw = message.payload if isinstance(message.payload, bytes) else b""
        doc = wire.unseal(worker.key, raw)
        if doc is None:
            worker.ignored += 1
            if worker.ignored == 1:
                worker.say(f"worker {worker.name}: ignored a message not signed with the run key")
            continue
        if doc["t"] == "end" and doc.get("run") == worker.run_id:
            worker.say(f"worker {worker.name}: run {worker.run_id} is over")
            return
        if doc["t"] != "item" or worker.run_id not in (None, doc.get("run")):
            continue
        if worker.held.full():
            worker.spawn(asyncio.create_task(_bounce(worker, str(message.topic), raw)))
            continue
        worker.held.put_nowait(doc)
        worker.spawn(asyncio.create_task(_taken(worker, doc)))


async def _taken(worker: Worker, item: wire.Doc) -> None:
    doc = {"t": "taken", "run": item["run"], "batch": item["batch"],
           "attempt": item["attempt"], "worker": worker.name}  # fmt: skip
    topic = wire.run_topic(worker.key, item["run"], "taken")
    await worker.client.publish(topic, wire.seal(worker.key, doc), qos=1)


async def _run_items(worker: Worker) -> None:
    while True:
        item = await worker.held.get()
        worker.busy = (item["run"], item["batch"], item["attempt"])
        try:
            await _work(worker, item)
        finally:
            worker.busy = None


async def _bounce(worker: Worker, topic: str, raw: bytes) -> None:
    await asyncio.sleep(BOUNCE_S)
    await worker.client.publish(topic, raw, qos=1)


async def _heartbeat(worker: Worker) -> None:
    topic = wire.worker_topic(worker.key, worker.name)
    while True:
        doc = {"t": "alive", "worker": worker.name, "for": worker.run_id,
               "busy": list(worker.busy) if worker.busy else None}  # fmt: skip
        await worker.client.publish(topic, wire.seal(worker.key, doc), qos=1)
        await asyncio.sleep(HEARTBEAT_S)


async def _work(worker: Worker, item: wire.Doc) -> None:
    """Run one item's batch; its results are sent while the next batch runs."""
    run_id, batch, attempt = item["run"], int(item["batch"]), str(item["attempt"])
    db = worker.tmp / f"batch-{batch}-{attempt}.db"
    started = time.perf_counter()
    try:
        meta, store = await asyncio.to_thread(_run_batch, item, db, worker.key)
        blob = await asyncio.to_thread(wire.pack, meta, store)
    finally:
        for path in worker.tmp.glob(f"batch-{batch}-{attempt}.db*"):
            path.unlink(missing_ok=True)
    ran = time.perf_counter() - started
    head = {"run": run_id, "batch": batch, "attempt": attempt, "worker": worker.name}
    worker.spawn(
        asyncio.create_task(
            _send(worker, head, blob, f"{len(item['trials'])} trials in {ran:.2f}s")
        )
    )


async def _send(worker: Worker, head: wire.Doc, blob: bytes, what: str) -> None:
    key, run_id = worker.key, head["run"]
    started = time.perf_counter()
    try:
        for part in wire.parts_of(blob, head):
            await worker.client.publish(
                wire.run_topic(key, run_id, "parts"), wire.seal(key, part), qos=1
            )
    except aiomqtt.MqttError as exc:  # the session is gone: the runner hears our will
        worker.say(f"worker {worker.name}: could not send batch {head['batch']}: {exc}")
        return
    worker.batches += 1
    sent = time.perf_counter() - started
    worker.say(
        f"worker {worker.name}: run {run_id} batch {head['batch']}: {what}, sent in {sent:.2f}s"
    )


def _run_batch(item: wire.Doc, db: Path, key: bytes) -> tuple[wire.Doc, bytes]:
    """The batch run as a local shard is: its header (scores, rejects, fault counts,
    the error if it failed: the runner fails the run with it) and the bytes of its store."""
    try:
        return _shard_of(item, db, key)
    except Exception as exc:  # an item this worker cannot run (another version?)
        error = redact(f"{type(exc).__name__}: {exc}")[:500]
        return _meta(ShardResult(int(item["batch"]), error=error), []), b""


def _shard_of(item: wire.Doc, db: Path, key: bytes) -> tuple[wire.Doc, bytes]:
    try:  # the plan the runner made, rebuilt: its checks ran there, its digest says so
        plan = RunPlan.from_wire(wire.unbox(key, item["scenario"]), item["sha"])
    except PlanDamaged as exc:
        return _meta(ShardResult(int(item["batch"]), error=str(exc)), []), b""
    shard = Shard(
        index=int(item["batch"]),
        plan=plan,
        run_id=item["run"],
        trials=tuple(int(t) for t in item["trials"]),
        db_path=db,
        key=key,
        keep_messages=False,
        trial_timeout_s=float(item["trial_timeout_s"]),
        presence_timeout_s=float(item["presence_timeout_s"]),
    )
    scores: list[TrialScore] = []

    def report(r: Report) -> None:
        if r[0] == "trial":
            scores.append(r[2])

    result = run_shard(shard, report)
    if not db.exists():
        return _meta(result, scores), b""
    with contextlib.closing(sqlite3.connect(db)) as conn:  # one file, nothing left in a WAL
        conn.execute("PRAGMA journal_mode=DELETE")
    return _meta(result, scores), db.read_bytes()


def _meta(result: ShardResult, scores: list[TrialScore]) -> wire.Doc:
    return {
        "scores": [wire.score_doc(s) for s in scores],
        "rejects": result.rejects,
        "error": result.error,
        "extra": list(result.extra),
        "fault_counts": result.fault_counts,
    }
