"""A run's trials handed to `errorflow worker` processes through the broker, on any
number of machines, with the results one process gives.

The runner cuts the trials still to run into contiguous batches and publishes each as a
signed work item (the trial numbers, the validated scenario and its digest, the run id
and timeouts; never the key) to the run's items topic, which workers take through an
MQTT shared subscription: the broker gives each item to one worker of the group. A
worker runs a batch exactly as a local `--workers` shard runs (errorflow/runtime/
work_serve.py) and publishes the batch's scores and the rows it stored (the shard's
store itself, compressed, in signed parts under the bus's message size limit). The
runner checks every message against the run key (a client without it can inject
nothing: what fails the check is counted as `forged_worker_message` and dropped), keeps
each batch's store as it arrives, and at the end merges them in batch order, so the
user's store holds the run in trial order, then records root causes and the summary as
for any run (`workers.close_run`).

At most two items per live worker are out (the one it runs, the one it holds), so a
batch waits on the runner, not behind a busy worker. A batch is handed out again when
its worker vanishes (its last will, or no heartbeat for `LOST_S`) or when nobody took it
within `TAKE_S`; the first complete result of a batch is kept, a late duplicate ignored.
What cannot be split over processes (`workers.refusal`) is refused. The scenario travels
encrypted under the run key (errorflow/runtime/work_wire.py), the key itself never.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import aiosqlite
from aiomqtt import Client

from errorflow.bus.url import BrokerURL
from errorflow.core.errors import ErrorflowError
from errorflow.protocol.envelope import MAX_MESSAGE_BYTES
from errorflow.runtime import work_wire as wire
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.run_result import RunResult, new_run_id
from errorflow.runtime.workers import (
    KEPT,
    ShardFailed,
    ShardResult,
    WorkersRefused,
    close_run,
    merge,
    result_of,
    take_over,
)
from errorflow.runtime.workers import refusal as local_refusal
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import TrialScore
from errorflow.scoring.summary import RunSummary
from errorflow.store.opening import open_db

#: An item nobody said they took within this long is published again.
TAKE_S = 5.0
#: A worker without a heartbeat this long is gone (its batch is handed out again).
LOST_S = 10.0
POLL_S = 0.25
#: Batches per worker waited for: small enough to even out, large enough that a batch's
#: start (a store, a bus: about 0.1 s, the time of 25 trials) is a small part of it.
BATCHES_PER_WORKER = 4
MIN_BATCH = 50
MAX_BATCH = 500
#: Items out per live worker: the one it runs and the one it holds.
PER_WORKER = 2
FORGED = "forged_worker_message"


class NoWorkers(ErrorflowError, RuntimeError):
    """No `errorflow worker` of the run (or too few) turned up in time."""


@dataclass(frozen=True)
class Remote:
    """How a run is handed out: the broker, how many workers to wait for before it
    starts (more may join), the batch size (None: from the trials and `ready`)."""

    url: BrokerURL
    ready: int = 1
    batch_trials: int | None = None
    wait_s: float = 60.0
    #: Called as a worker takes a batch (batch, worker name): for tests and progress.
    on_taken: Callable[[int, str], None] | None = None


def refusal(scenario: Scenario, options: RunOptions) -> str | None:
    """Why this run cannot be handed to workers on the broker (None: it can)."""
    return local_refusal(scenario, replace(options, broker=None))


def batch_size(todo: int, ready: int) -> int:
    even = math.ceil(todo / (max(1, ready) * BATCHES_PER_WORKER))
    return max(1, min(MAX_BATCH, todo, max(MIN_BATCH, even)))


def batches_of(todo: list[int], size: int) -> list[tuple[int, ...]]:
    """`todo` cut into contiguous batches of `size` (the last one shorter), in order."""
    return [tuple(todo[i : i + size]) for i in range(0, len(todo), size)]


async def run(plan: RunPlan, options: RunOptions, remote: Remote) -> RunResult:
    """One run, its trials run by `errorflow worker`s on `remote.url`."""
    scenario = plan.scenario
    why = refusal(scenario, options)
    if why is not None:
        raise WorkersRefused(f"{scenario.name} cannot be handed to workers on the broker: {why}")
    if options.run_key is None:
        raise WorkersRefused("the workers need the run key: give the runner and each worker one")
    run_id = options.run_id or new_run_id(scenario.name)
    broker = f"{remote.url}, errorflow workers"
    # The run's `end` is also the runner's last will: the broker says it for a runner
    # that died (even by SIGKILL), and workers of this run leave instead of waiting.
    end = wire.seal(options.run_key, {"t": "end", "run": run_id})
    will = (wire.run_topic(options.run_key, run_id, "end"), end)
    async with wire.mqtt_client(remote.url, f"errorflow-runner-{run_id}", will) as client:
        hand = Handout(client, options.run_key, run_id, plan, options, remote)
        await hand.listen()
        try:
            await hand.wait_ready()
            scores, done, summary = await _run_batches(hand, plan, options, broker)
        finally:
            await hand.stop()
    result = result_of(plan, run_id, broker, scores, done, summary)
    if hand.forged:
        result.rejects[FORGED] = hand.forged
    return result


async def _run_batches(
    hand: Handout, plan: RunPlan, options: RunOptions, broker: str
) -> tuple[dict[int, TrialScore], dict[int, ShardResult], RunSummary]:
    """Every batch run by the workers and merged; the scores, the batches' results (and
    a resumed run's kept trials' at `KEPT`) and the run's summary."""
    db = await open_db(options.db_path)
    try:
        scores, kept = await take_over(db, plan, hand.run_id, options, broker)
        hand.scores = scores
        todo = [t for t in range(plan.trials) if t not in scores]
        size = hand.remote.batch_trials or batch_size(len(todo), hand.remote.ready)
        folder = options.db_path.resolve().parent
        with tempfile.TemporaryDirectory(prefix=".errorflow-workers-", dir=folder) as tmp:
            hand.start(batches_of(todo, size), Path(tmp))
            status = "interrupted"
            try:
                await hand.finish(db)
                failed = [r.error for r in hand.done.values() if r.error is not None]
                failed += [f"its summary has {', '.join(r.extra)}"
                           for r in hand.done.values() if r.extra]  # fmt: skip
                if failed:
                    raise ShardFailed(f"run {hand.run_id}: a worker's batch failed ({failed[0]})")
                status = "finished"
            finally:
                done = hand.done if kept is None else {**hand.done, KEPT: kept}
                summary = await close_run(db, hand.run_id, hand.paths(), scores, done, status)
    finally:
        await db.close()
    return scores, done, summary


@dataclass
class Attempt:
    """One hand-out of a batch: its id, when it was published, who took it."""

    id: str
    sent: float
    worker: str | None = None


class Handout:
    """The runner's side of the work channel: items out, heartbeats and results in."""

    def __init__(
        self,
        client: Client,
        key: bytes,
        run_id: str,
        plan: RunPlan,
        options: RunOptions,
        remote: Remote,
    ) -> None:
        self.client, self.key, self.run_id = client, key, run_id
        self.options, self.remote = options, remote
        self.item = {
            "t": "item",
            "run": run_id,
            "scenario": wire.box(key, plan.to_wire()),
            "sha": plan.sha,
            "trial_timeout_s": options.trial_timeout_s,
            "presence_timeout_s": options.presence_timeout_s,
        }
        self.batches: list[tuple[int, ...]] = []
        self.tmp = Path(".")
        self.pending: deque[int] = deque()
        self.flying: dict[int, Attempt] = {}
        self.done: dict[int, ShardResult] = {}
        self.parts: dict[tuple[int, str], dict[int, wire.Doc]] = {}
        self.seen: dict[str, float] = {}  # worker -> loop time of its last sign of life
        self.scores: dict[int, TrialScore] = {}
        self.forged = 0
        self.requeued: list[tuple[int, str | None]] = []
        self.failure: str | None = None
        self.changed = asyncio.Event()
        self.reader: asyncio.Task[None] | None = None
        self.idle_since: float | None = None
        self.merged = 0  # batches below this one are in the run's store

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def live(self) -> int:
        now = self.now()
        return sum(1 for t in self.seen.values() if now - t <= LOST_S)

    async def listen(self) -> None:
        await self.client.subscribe(wire.run_filter(self.key, self.run_id), qos=1)
        await self.client.subscribe(wire.workers_filter(self.key), qos=1)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.client.messages:
            raw = message.payload if isinstance(message.payload, bytes) else b""
            self.handle(raw)
            self.changed.set()

    async def _tick(self) -> None:
        """Wait for news (or `POLL_S`); a dead reader is a lost broker."""
        if self.reader is not None and self.reader.done():
            exc = self.reader.exception() if not self.reader.cancelled() else None
            raise ShardFailed(f"run {self.run_id}: the broker connection was lost ({exc})")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(POLL_S):
                await self.changed.wait()
        self.changed.clear()

    async def wait_ready(self) -> None:
        deadline = self.now() + self.remote.wait_s
        while self.live() < self.remote.ready:
            if self.now() > deadline:
                raise NoWorkers(
                    f"{self.live()} of {self.remote.ready} workers for run {self.run_id} "
                    f"on {self.remote.url} after {self.remote.wait_s:g}s: start them with "
                    f"`errorflow worker --broker URL --run {self.run_id}` (or `--run any`) "
                    "and the run key"
                )
            await self._tick()

    def start(self, batches: list[tuple[int, ...]], tmp: Path) -> None:
        self.batches, self.tmp = batches, tmp
        self.pending = deque(range(len(batches)))

    def paths(self) -> list[Path]:
        """The stores of the batches not merged yet, in batch order."""
        return [self.tmp / f"batch-{b}.db" for b in range(self.merged, len(self.batches))]

    async def finish(self, db: aiosqlite.Connection) -> None:
        """Hand out every batch and wait for all their results, merging each batch's
        store as soon as every batch before it is merged (trial order, and the merge
        overlaps the workers' work instead of following it)."""
        while len(self.done) < len(self.batches):
            if self.failure is not None:
                raise ShardFailed(f"run {self.run_id}: {self.failure}")
            self._check_lost()
            await self._top_up()
            await self._tick()
            while self.merged in self.done and self.merged < len(self.batches):
                path = self.tmp / f"batch-{self.merged}.db"
                await merge(db, path)
                path.unlink(missing_ok=True)
                self.merged += 1

    async def stop(self) -> None:
        """Say the run is over (workers of this run leave) and stop listening."""
        with contextlib.suppress(Exception):
            end = wire.seal(self.key, {"t": "end", "run": self.run_id})
            await self.client.publish(wire.run_topic(self.key, self.run_id, "end"), end, qos=1)
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.reader

    # -- hand-outs ------------------------------------------------------------------------

    async def _top_up(self) -> None:
        window = PER_WORKER * max(1, self.live()) if self.batches else 0
        while self.pending and len(self.flying) < window:
            b = self.pending.popleft()
            attempt = Attempt(secrets.token_hex(4), self.now())
            self.flying[b] = attempt
            doc = {**self.item, "batch": b, "attempt": attempt.id, "trials": list(self.batches[b])}
            raw = wire.seal(self.key, doc)
            if len(raw) > MAX_MESSAGE_BYTES:
                raise ShardFailed(f"run {self.run_id}: a work item is {len(raw):,} bytes")
            await self.client.publish(wire.items_topic(self.key, self.run_id), raw, qos=1)

    def _check_lost(self) -> None:
        now = self.now()
        for b, a in list(self.flying.items()):
            if a.worker is None:
                lost = now - a.sent > TAKE_S
            else:
                lost = now - self.seen.get(a.worker, -math.inf) > LOST_S
            if lost:
                self._requeue(b)
        self.idle_since = None if self.live() else (self.idle_since or now)
        if self.idle_since is not None and now - self.idle_since > self.remote.wait_s:
            self.failure = f"no worker left after {self.remote.wait_s:g}s"

    def _requeue(self, b: int) -> None:
        attempt = self.flying.pop(b)
        self.pending.appendleft(b)
        self.requeued.append((b, attempt.worker))

    # -- what comes in --------------------------------------------------------------------

    def handle(self, raw: bytes) -> None:
        doc = wire.unseal(self.key, raw)
        if doc is None:
            self.forged += 1
            return
        t, worker = doc["t"], str(doc.get("worker"))
        if t == "alive":
            if doc.get("for") in (None, self.run_id):
                self.seen[worker] = self.now()
        elif t == "gone":
            self.seen.pop(worker, None)
            for b in [b for b, a in self.flying.items() if a.worker == worker]:
                self._requeue(b)
        elif doc.get("run") != self.run_id:
            return
        elif t == "taken":
            self._taken(doc, worker)
        elif t == "part":
            try:
                self._part(doc)
            except (KeyError, TypeError, ValueError) as exc:
                self.failure = f"a worker's results could not be read ({type(exc).__name__})"

    def _taken(self, doc: wire.Doc, worker: str) -> None:
        self.seen[worker] = self.now()
        b = doc.get("batch")
        attempt = self.flying.get(b) if isinstance(b, int) else None
        if attempt is not None and attempt.id == doc.get("attempt"):
            attempt.worker = worker
            if self.remote.on_taken is not None:
                assert isinstance(b, int)
                self.remote.on_taken(b, worker)

    def _part(self, doc: wire.Doc) -> None:
        b = doc["batch"]
        if not isinstance(b, int) or not 0 <= b < len(self.batches) or b in self.done:
            return  # a late duplicate
        parts = self.parts.setdefault((b, str(doc["attempt"])), {})
        parts[int(doc["i"])] = doc
        blob = wire.joined(parts)
        if blob is not None:
            del self.parts[(b, str(doc["attempt"]))]
            self._store(b, blob)

    def _store(self, b: int, blob: bytes) -> None:
        """A batch complete: its store kept for the merge, its scores counted."""
        meta, store = wire.unpack(blob)
        scores = sorted((wire.score_of(d) for d in meta["scores"]), key=lambda s: s.trial)
        error = meta["error"]
        if error is None and [s.trial for s in scores] != list(self.batches[b]):
            error = "a worker returned other trials than it was given"
        if store:
            (self.tmp / f"batch-{b}.db").write_bytes(store)
        self.done[b] = ShardResult(
            b, dict(meta["rejects"]), error=error, extra=tuple(meta["extra"]),
            fault_counts=meta["fault_counts"],
        )  # fmt: skip
        self.flying.pop(b, None)
        if b in self.pending:
            self.pending.remove(b)
        for score in scores:
            self.scores[score.trial] = score
            if self.options.on_trial is not None:
                self.options.on_trial(score)
