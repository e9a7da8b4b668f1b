"""The lean floor: the per-trial work of `contamination` in plain asyncio and msgspec.

A reference for what one lean Python process can do, measured in the same run as
errorflow (bench/bench_floor_ratio.py). Per trial: the runner sends a task to the
researcher, whose paper search fails (HTTP 401); the researcher reports the failure to
the writer, who flags the gap or writes a confident report (a seeded choice); the runner
scores the writer's answer. 15 envelopes a trial (task, result, result, their 3 acks, 6
agent events, 2 labels and the trial's outcome), each encoded, HMAC-signed, verified,
validated against a msgspec schema with the envelope's constraints, deduplicated by id,
and stored by a writer thread in SQLite in batches, with the trials and labels.

It is a floor, not a copy: no resends, presence, policies, bus faults, root causes or
liveness. Both transports are here: an in-process bus (a queue per subscriber, one
reader task each) and Mosquitto through gmqtt (one connection per participant, QoS 1).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import os
import queue
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Unit = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Count = Annotated[int, msgspec.Meta(ge=0)]
KINDS = Literal["task", "result", "event", "control"]
STATUSES = Literal["ok", "partial_failure", "failed"]


class WireError(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    code: str
    origin: str
    tool: str | None = None
    message: Annotated[str, msgspec.Meta(max_length=2000)] = ""
    retryable: bool = False
    retry_after_s: Annotated[float, msgspec.Meta(ge=0)] | None = None
    suggestion: Annotated[str, msgspec.Meta(max_length=2000)] | None = None
    hops: Count = 0


class Envelope(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The envelope without its signature: `sig` is appended as the last member."""

    v: Literal[1]
    id: Id
    run_id: Name
    trial: Count
    seq: Count
    sender: Name
    recipient: Name
    kind: KINDS
    trace_id: Id
    derived_from: Annotated[list[str], msgspec.Meta(max_length=256)] = []
    status: STATUSES = "ok"
    confidence: Unit = 1.0
    errors: Annotated[list[WireError], msgspec.Meta(max_length=256)] = []
    payload: dict[str, Any] = {}
    ts: float = 0.0


_ENCODE = msgspec.json.Encoder().encode
_DECODE = msgspec.json.Decoder(Envelope).decode
_MEMBER = b',"sig":"'
_TAIL = len(_MEMBER) + 64 + 2
_TAG = os.urandom(4).hex()
_COUNT = itertools.count()


def new_id() -> str:
    return f"{time.time_ns():016x}{_TAG}{next(_COUNT) & 0xFFFFFFFF:08x}"


class Codec:
    """Encode + sign, verify + decode + validate, under one run key."""

    def __init__(self, key: bytes) -> None:
        self._mac = hmac.new(key, digestmod=hashlib.sha256)

    def encode(self, env: Envelope) -> bytes:
        body = _ENCODE(env)
        mac = self._mac.copy()
        mac.update(body)
        return body[:-1] + _MEMBER + mac.hexdigest().encode() + b'"}'

    def decode(self, raw: bytes) -> Envelope | None:
        cut = len(raw) - _TAIL
        if cut <= 0 or raw[cut : cut + len(_MEMBER)] != _MEMBER:
            return None
        mac = self._mac.copy()
        mac.update(memoryview(raw)[:cut])
        mac.update(b"}")
        if not hmac.compare_digest(mac.hexdigest().encode(), raw[cut + len(_MEMBER) : -2]):
            return None
        try:
            return _DECODE(raw[:cut] + b"}")
        except msgspec.ValidationError:
            return None


class ToolFailed(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


def search_papers(query: str) -> list[dict[str, str]]:
    raise ToolFailed(401, "HTTP 401 Unauthorized: API key expired (key=[REDACTED_KEY])")


Publish = Callable[[str, str, bytes], None]  # sender, topic, wire bytes


@dataclass
class Participant:
    """One sender: numbers its envelopes, signs them, keeps the ids it has seen."""

    name: str
    run_id: str
    codec: Codec
    publish: Publish
    seq: itertools.count[int] = field(default_factory=itertools.count)
    seen: set[str] = field(default_factory=set)

    def send(self, recipient: str, kind: KINDS, trial: int, topic: str, **kw: Any) -> str:
        env = Envelope(
            v=1,
            id=new_id(),
            run_id=self.run_id,
            trial=trial,
            seq=next(self.seq),
            sender=self.name,
            recipient=recipient,
            kind=kind,
            trace_id=f"{self.run_id}-t{trial}",
            ts=time.time(),
            **kw,
        )
        self.publish(self.name, topic, self.codec.encode(env))
        return env.id

    def event(self, trial: int, payload: dict[str, Any]) -> None:
        self.send(
            "observers", "event", trial, f"r/{self.run_id}/event/{self.name}", payload=payload
        )

    def receive(self, raw: bytes) -> Envelope | None:
        env = self.codec.decode(raw)
        if env is None or env.id in self.seen:
            return None
        self.seen.add(env.id)
        if len(self.seen) > 4096:  # ids of finished trials: bounded memory
            self.seen.clear()
            self.seen.add(env.id)
        return env

    def ack(self, env: Envelope) -> None:
        self.send(
            env.sender,
            "control",
            env.trial,
            f"r/{self.run_id}/ack/{env.sender}",
            payload={"action": "ack", "of": env.id},
        )


def costs(rng: random.Random) -> dict[str, float]:
    tokens = 400 + rng.randrange(100)
    return {
        "model_calls": 1.0,
        "input_tokens": float(tokens),
        "output_tokens": 40.0,
        "retries": 0.0,
        "sim_seconds": 0.05,
    }


class Researcher(Participant):
    def handle(self, env: Envelope, rng: random.Random) -> None:
        if env.kind != "task":
            return
        self.ack(env)
        t = env.trial
        self.event(
            t, {"type": "agent_start", "agent": self.name, "inputs": [env.sender], "at": 0.0}
        )
        spent = costs(rng)
        self.event(
            t,
            {
                "type": "model_call",
                "agent": self.name,
                "input_tokens": spent["input_tokens"],
                "output_tokens": 40,
                "calls": 1,
                "final": False,
                "stop_reason": "tool_use",
            },
        )
        try:
            search_papers("transformer attention")
            raise AssertionError("the search cannot succeed")
        except ToolFailed as exc:
            error = WireError(
                code="permission_denied",
                origin=self.name,
                tool="search_papers",
                message="search_papers: permission_denied",
            )
            self.event(
                t,
                {
                    "type": "tool_call",
                    "agent": self.name,
                    "tool": "search_papers",
                    "args": {"query": "transformer attention"},
                    "ok": False,
                    "code": "permission_denied",
                    "http_status": exc.status,
                    "error": str(exc),
                    "at": 0.05,
                },
            )
        self.event(
            t,
            {
                "type": "loop_stop",
                "agent": self.name,
                "code": "permission_denied",
                "stopped": "unrecoverable:permission_denied",
                "steps": 1,
            },
        )
        answer = {
            "claims": [],
            "abstained": False,
            "flags": [],
            "unresolved": ["papers"],
            "text": "stopped: unrecoverable:permission_denied",
        }
        self.send(
            "writer",
            "result",
            t,
            f"r/{self.run_id}/inbox/writer",
            derived_from=[env.id],
            status="failed",
            confidence=0.4,
            errors=[error],
            payload={"role": "researcher", "answer": answer, "trace": {"costs": spent}},
        )


class Writer(Participant):
    p_heed = 0.85

    def handle(self, env: Envelope, rng: random.Random) -> None:
        if env.kind != "result":
            return
        self.ack(env)
        t = env.trial
        self.event(
            t, {"type": "agent_start", "agent": self.name, "inputs": [env.sender], "at": 0.0}
        )
        spent = costs(rng)
        self.event(
            t,
            {
                "type": "model_call",
                "agent": self.name,
                "input_tokens": spent["input_tokens"],
                "output_tokens": 40,
                "calls": 1,
                "final": True,
                "stop_reason": "end_turn",
            },
        )
        heeds = env.status != "ok" and rng.random() < self.p_heed
        if heeds:
            answer = {"claims": [], "flags": ["papers"], "text": "the search failed: no report"}
            status, conf, errors = "partial_failure", 0.3, list(env.errors)
        else:
            answer = {
                "claims": [{"need": "papers", "value": "no papers on transformer attention"}],
                "flags": [],
                "text": "A confident report.",
            }
            status, conf, errors = "ok", 0.9, []
        self.send(
            "runner",
            "result",
            t,
            f"r/{self.run_id}/inbox/runner",
            derived_from=[env.id],
            status=status,
            confidence=conf,
            errors=errors,
            payload={"role": "writer", "answer": answer, "trace": {"costs": spent}},
        )


class Runner(Participant):
    def __init__(self, *args: Any, store: Store, done: Callable[[int], None], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.store = store
        self.done = done
        self.outcomes: dict[str, int] = {}

    def start(self, trial: int) -> None:
        self.send(
            "researcher",
            "task",
            trial,
            f"r/{self.run_id}/inbox/researcher",
            payload={
                "prompt": "Write a short literature report on transformer attention.",
                "needs": ["papers"],
            },
        )

    def handle(self, env: Envelope, rng: random.Random) -> None:
        if env.kind != "result":
            return
        self.ack(env)
        t = env.trial
        flagged = bool(env.payload["answer"]["flags"])
        claimed = bool(env.payload["answer"]["claims"])
        outcome = "contained" if flagged else "contaminated" if claimed else "failed"
        for agent, label in (("researcher", "failed_explicit"), ("writer", outcome)):
            self.event(t, {"type": "label", "agent": agent, "label": label})
        self.event(t, {"type": "trial_outcome", "outcome": outcome, "confidence": env.confidence})
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.store.trial(self.run_id, t, outcome)
        self.done(t)


class Store:
    """A writer thread that stores rows in batches (one transaction per batch)."""

    BATCH = 512

    def __init__(self, path: str) -> None:
        self.path = path
        self.q: queue.SimpleQueue[tuple[str, list[tuple[Any, ...]]] | None] = queue.SimpleQueue()
        self.rows: dict[str, list[tuple[Any, ...]]] = {"messages": [], "events": [], "trials": []}
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _write(self) -> None:
        conn = sqlite3.connect(self.path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(
            "CREATE TABLE messages (run_id, id PRIMARY KEY, trial, seq, sender, "
            "recipient, kind, status, envelope, received)"
        )
        conn.execute(
            "CREATE TABLE events (run_id, id PRIMARY KEY, trial, seq, sender, type, "
            "envelope, received)"
        )
        conn.execute("CREATE TABLE trials (run_id, trial, outcome, PRIMARY KEY (run_id, trial))")
        sql = {
            "messages": "INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?,?)",
            "events": "INSERT INTO events VALUES (?,?,?,?,?,?,?,?)",
            "trials": "INSERT INTO trials VALUES (?,?,?)",
        }
        while (item := self.q.get()) is not None:
            table, rows = item
            with conn:
                conn.executemany(sql[table], rows)
        conn.close()

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        rows = self.rows[table]
        rows.append(row)
        if len(rows) >= self.BATCH:
            self.q.put((table, rows))
            self.rows[table] = []

    def trial(self, run_id: str, trial: int, outcome: str) -> None:
        self.add("trials", (run_id, trial, outcome))

    def close(self) -> None:
        for table, rows in self.rows.items():
            if rows:
                self.q.put((table, rows))
        self.q.put(None)
        self.thread.join()


class Recorder(Participant):
    def __init__(self, *args: Any, store: Store, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.store = store
        self.count = 0

    def handle_raw(self, raw: bytes) -> None:
        env = self.receive(raw)
        if env is None:
            return
        self.count += 1
        now = time.time()
        text = raw.decode()
        if env.kind == "event":
            row = (
                env.run_id,
                env.id,
                env.trial,
                env.seq,
                env.sender,
                env.payload["type"],
                text,
                now,
            )
            self.store.add("events", row)
        else:
            self.store.add(
                "messages",
                (
                    env.run_id,
                    env.id,
                    env.trial,
                    env.seq,
                    env.sender,
                    env.recipient,
                    env.kind,
                    env.status,
                    text,
                    now,
                ),
            )


@dataclass
class FloorResult:
    trials: int
    envelopes: int
    wall: float
    outcomes: dict[str, int]


class Floor:
    """One run: `trials` trials, at most `window` in flight, over a `publish` the
    transport provides; `deliver(topic, raw)` is what the transport calls on receipt."""

    def __init__(self, trials: int, seed: int, db: str, window: int = 64) -> None:
        self.trials, self.seed, self.window = trials, seed, window
        run_id = f"floor-{os.urandom(4).hex()}"
        codec = Codec(os.urandom(32))
        self.store = Store(db)
        self.finished = asyncio.Event()
        self.next_trial = 0
        self.ended = 0
        self.rngs: dict[int, random.Random] = {}
        pub: Publish = self._publish
        self.researcher = Researcher("researcher", run_id, codec, pub)
        self.writer = Writer("writer", run_id, codec, pub)
        self.runner = Runner("runner", run_id, codec, pub, store=self.store, done=self._done)
        self.recorder = Recorder("recorder", run_id, codec, pub, store=self.store)
        self.run_id = run_id
        self.transport_publish: Publish = lambda sender, topic, raw: None

    def _publish(self, sender: str, topic: str, raw: bytes) -> None:
        self.transport_publish(sender, topic, raw)

    def deliver_to(self, who: Participant, raw: bytes) -> None:
        env = who.receive(raw)
        if env is None or env.kind == "control":
            return
        rng = self.rngs.get(env.trial)
        if rng is not None:
            who.handle(env, rng)  # type: ignore[attr-defined]

    def _start_next(self) -> None:
        t = self.next_trial
        self.next_trial += 1
        self.rngs[t] = random.Random(self.seed * 1_000_003 + t)  # one stream per trial
        self.runner.start(t)

    def _done(self, trial: int) -> None:
        del self.rngs[trial]
        self.ended += 1
        if self.next_trial < self.trials:
            self._start_next()
        elif self.ended == self.trials:
            self.finished.set()

    async def run(self) -> FloorResult:
        t0 = time.perf_counter()
        for _ in range(min(self.window, self.trials)):
            self._start_next()
        await self.finished.wait()
        return FloorResult(self.trials, 0, time.perf_counter() - t0, dict(self.runner.outcomes))


async def run_in_process(trials: int, seed: int, db: str) -> FloorResult:
    """The in-process bus: every publish goes to the recipient's queue and the
    recorder's; one reader task per participant."""
    floor = Floor(trials, seed, db)
    queues: dict[str, asyncio.Queue[bytes]] = {
        n: asyncio.Queue() for n in ("researcher", "writer", "runner", "recorder")
    }

    def publish(sender: str, topic: str, raw: bytes) -> None:
        queues["recorder"].put_nowait(raw)
        name = topic.rsplit("/", 1)[1]
        if "/event/" not in topic:
            queues[name].put_nowait(raw)

    async def reader(name: str) -> None:
        q = queues[name]
        if name == "recorder":
            while True:
                floor.recorder.handle_raw(await q.get())
        who = {"researcher": floor.researcher, "writer": floor.writer, "runner": floor.runner}[name]
        while True:
            floor.deliver_to(who, await q.get())

    floor.transport_publish = publish
    tasks = [asyncio.create_task(reader(n)) for n in queues]
    t0 = time.perf_counter()
    result = await floor.run()
    while not queues["recorder"].empty():
        await asyncio.sleep(0)
    for t in tasks:
        t.cancel()
    floor.store.close()  # the last batches stored: part of the run's time
    result.wall = time.perf_counter() - t0
    result.envelopes = floor.recorder.count
    return result


async def run_mosquitto(trials: int, seed: int, db: str, host: str, port: int) -> FloorResult:
    """Mosquitto through gmqtt: one connection per participant, QoS 1 both ways."""
    import gmqtt  # type: ignore[import-untyped]

    floor = Floor(trials, seed, db)
    clients: dict[str, Any] = {}
    who = {"researcher": floor.researcher, "writer": floor.writer, "runner": floor.runner}
    for name in ("researcher", "writer", "runner", "recorder"):
        client = gmqtt.Client(f"{floor.run_id}-{name}-{os.urandom(3).hex()}")
        if name == "recorder":
            client.on_message = _on_message(lambda raw: floor.recorder.handle_raw(raw))
        else:
            client.on_message = _on_message(lambda raw, w=who[name]: floor.deliver_to(w, raw))
        await client.connect(host, port, keepalive=60)
        pattern = f"r/{floor.run_id}/#" if name == "recorder" else f"r/{floor.run_id}/+/{name}"
        client.subscribe(pattern, qos=1)
        clients[name] = client
    await asyncio.sleep(0.2)  # the SUBACKs

    def publish(sender: str, topic: str, raw: bytes) -> None:
        clients[sender].publish(topic, raw, qos=1)

    floor.transport_publish = publish
    t0 = time.perf_counter()
    result = await floor.run()
    expected = trials * 15
    while floor.recorder.count < expected and time.perf_counter() - t0 < 600:
        await asyncio.sleep(0.005)
    for c in clients.values():
        await c.disconnect()
    floor.store.close()
    result.wall = time.perf_counter() - t0
    result.envelopes = floor.recorder.count
    return result


def _on_message(handle: Callable[[bytes], None]) -> Callable[..., int]:
    def on_message(client: Any, topic: str, payload: bytes, qos: int, properties: Any) -> int:
        handle(payload)
        return 0

    return on_message
