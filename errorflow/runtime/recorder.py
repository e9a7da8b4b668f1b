"""The recorder: subscribes to everything of a run and writes it to SQLite.

Batched: rows collect in memory and are committed every `BATCH` rows or `FLUSH_S`
seconds, whichever comes first, by one writer. Bad messages are stored in `rejects`
with their reason, never dropped silently. The runner's `end` control message is the
recorder's cue that everything before it is in: it commits and reports.

The first write the store fails (the disk full, an I/O error, the file read-only,
removed or replaced) is the last one tried: the recorder keeps the failure (`failure`),
the runner stops the run on seeing it, and what was stored before stays as it was, for
`--resume`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter

import aiosqlite

from errorflow.bus.admission import admission
from errorflow.bus.own_copies import OWN_COPIES
from errorflow.bus.seen_seqs import CompactSeenSet
from errorflow.bus.transport import Connection, Delivery, Posted, backlog
from errorflow.core.redact import redact
from errorflow.protocol import topics
from errorflow.protocol.control import (
    Bye,
    End,
    is_ack,
    parse_control,
)
from errorflow.protocol.envelope import (
    Envelope,
    Kind,
    RejectedMessage,
)
from errorflow.protocol.events import event_type
from errorflow.protocol.result import Readings
from errorflow.store import root_causes
from errorflow.store.batch_insert import Batch, insert_rows
from errorflow.store.failures import (
    StoreFailed,
    StoreFile,
    check_in_place,
    store_fault,
    store_file,
)
from errorflow.store.rows import (
    EventRow,
    LabelRow,
    MessageRow,
    RejectRow,
    TrialRow,
)
from errorflow.store.trial_causes import TrialCauses

log = logging.getLogger(__name__)

BATCH = 2000
FLUSH_S = 0.2
DRAIN_QUIET_S = 0.5  # only when an agent left without saying bye
DRAIN_MAX_S = 3.0


class Recorder:
    def __init__(
        self,
        db: aiosqlite.Connection,
        conn: Connection,
        run_id: str,
        members: set[str],
        agents: set[str] | None = None,
        key: bytes | None = None,
        causes: TrialCauses | None = None,
    ) -> None:
        self.db, self.conn, self.run_id, self.members = db, conn, run_id, members
        # Root causes as trials end (None: left to `root_causes.record` at the run's end).
        self.causes = causes
        self.key = key  # the run key: unsigned or forged messages are rejects, not rows
        self.seen = CompactSeenSet()  # flat in memory over any number of trials
        self.rejects: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()
        self._messages: list[MessageRow] = []
        self._events: list[EventRow] = []
        self._rejects: list[RejectRow] = []
        self._held: dict[int, list[Envelope]] = {}  # by trial: see `hold`
        self._trials: list[TrialRow] = []
        self._labels: list[LabelRow] = []
        self._lock = asyncio.Lock()  # one writer: flushes never interleave
        self._inflight: asyncio.Future[None] | None = None
        self.ended = asyncio.Event()
        self.end_seen = False
        self.agents = set(agents) if agents is not None else set()
        self.byes: set[str] = set()
        self.handled = 0
        self.failure: StoreFailed | None = None  # the first failed write: no more are tried
        self._file: StoreFile | None = None  # what the store's path led to at the start
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._file = await store_file(self.db)
        if self.causes is not None:
            await root_causes.create(self.db)
        await self.conn.subscribe(topics.run_filter(self.run_id))
        OWN_COPIES.open(self.run_id)  # this process's endpoints keep copies for us
        self._task = asyncio.create_task(self._run(), name="recorder")

    async def _run(self) -> None:
        flusher = asyncio.create_task(self._flush_periodically())
        incoming = aiter(self.conn.messages())
        try:
            async for topic, raw in incoming:
                self.handle(topic, raw)
                if len(self._messages) + len(self._events) >= BATCH:
                    await self.flush()
                if self.end_seen:
                    break
            # Each agent says `bye` after its last message and the broker keeps each
            # publisher's order, so `end` plus every bye means complete. An agent that
            # died says nothing: then drain until the bus is quiet.
            deadline = asyncio.get_running_loop().time() + DRAIN_MAX_S
            while not self.ended.is_set() and asyncio.get_running_loop().time() < deadline:
                try:
                    async with asyncio.timeout(DRAIN_QUIET_S):
                        topic, raw = await anext(incoming)
                except (TimeoutError, StopAsyncIteration):
                    break
                self.handle(topic, raw)
            self.ended.set()
        finally:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            OWN_COPIES.close(self.run_id)
            await self.flush()

    def handle(self, topic: str, raw: Delivery) -> None:
        """File one message; whatever it holds, it never stops the recorder."""
        try:
            self._handle(topic, raw)
        except Exception as exc:
            log.error("recorder: message on %s not filed: %s", topic, redact(repr(exc))[:300])
            self._reject(topic, "handler_error", type(exc).__name__, raw, time.time())

    def _handle(self, topic: str, raw: Delivery) -> None:
        self.handled += 1
        now = time.time()
        try:
            env, reason, clean = admission(raw, self.run_id, self.members, self.key, take=True)
        except RejectedMessage as exc:
            self._reject(topic, exc.reason, exc.detail, raw, now)
            return
        if reason is None:
            reason = self.seen.repeat(env)  # `duplicate` or `replayed_seq`
        if reason is not None:
            self._reject(topic, reason, f"sender={env.sender} seq={env.seq} id={env.id}", raw, now)
            return
        text = raw.text if isinstance(raw, Posted) else raw.decode()
        self.counts[env.kind.value] += 1
        if self.causes is not None:
            self._trace(env, self.causes)
        if env.kind is Kind.EVENT:
            self._events.append(EventRow.from_envelope(env, now, text, clean))
            return
        self._messages.append(MessageRow.from_envelope(env, topic, now, text, clean))
        # Acks are most of the control traffic and say nothing about the run's end:
        # skipped before parsing (as Endpoint.receive does).
        if env.kind is Kind.CONTROL and not is_ack(env.payload):
            self._control(env)

    def _trace(self, env: Envelope, causes: TrialCauses) -> None:
        causes.filed(env)
        if (
            env.kind is Kind.EVENT
            and env.sender == topics.RUNNER
            and event_type(env.payload) == "trial_outcome"
        ):
            self._settle(env.trial, causes)
            causes.ended(env.trial)

    def _control(self, env: Envelope) -> None:
        action = parse_control(env.payload)
        if isinstance(action, End) and env.sender == topics.RUNNER:
            self.end_seen = True
        elif isinstance(action, Bye):
            self.byes.add(env.sender)
        if self.end_seen and self.byes >= self.agents:
            self.ended.set()  # everyone said their last word: nothing else is coming

    def _reject(self, topic: str, reason: str, detail: str, raw: Delivery, now: float) -> None:
        self.rejects[reason] += 1
        if isinstance(raw, Posted):
            raw = raw.text.encode()
        # Kept for inspection, but nothing unredacted reaches the store: the bytes are
        # read as Latin-1 (lossless for any input), redacted, and written back.
        kept = redact(raw[:65536].decode("latin-1")).encode("latin-1", "replace")
        self._rejects.append(RejectRow(self.run_id, topic, reason, redact(detail[:500]), kept, now))

    def backlog(self) -> int:
        """Messages received and not filed yet: how far behind the run the recorder is."""
        return backlog(self.conn)

    def add_trial(
        self, row: TrialRow, labels: list[LabelRow], readings: Readings | None = None
    ) -> None:
        """A scored trial, written with the next batch (the runner's rows go through the
        recorder so the database has exactly one writer)."""
        self._trials.append(row)
        self._labels.extend(labels)
        if self.causes is not None:
            self.causes.scored(row, labels, readings)

    def hold(self, trial: int, envelopes: list[Envelope]) -> None:
        """The tasks and results the runner holds of a trial it scored, for any the
        recorder missed (a broker outage, a queue the broker cut): when the trial's
        outcome event is filed, everything published before it has been too (one
        broker keeps the order of what it was given), so only those still missing are
        stored from these; at the end of the run, every one still held (INSERT OR
        IGNORE: nothing twice). Without root causes to go by, all of them at once."""
        if self.causes is None:
            self._backfill(envelopes)
        else:
            self._held[trial] = envelopes

    def _backfill(self, envelopes: list[Envelope]) -> None:
        now = time.time()
        self._messages.extend(
            MessageRow.from_envelope(
                m, topics.for_message(self.run_id, m.kind, m.sender, m.recipient), now
            )
            for m in envelopes
        )
        if self.causes is not None:
            self.causes.backfilled(envelopes)

    def _settle(self, trial: int, causes: TrialCauses) -> None:
        """The runner's copies of `trial`'s messages that the recorder did not file."""
        held = self._held.pop(trial, None)
        if held:
            self._backfill(causes.missing(trial, held))

    def settle_held(self) -> None:
        """Every message still held (its trial's outcome event never came): stored.
        Called once the run is over (`Participants.shut_down`), before the last flush."""
        held, self._held = self._held, {}
        for envelopes in held.values():
            self._backfill(envelopes)

    async def flush(self) -> None:
        async with self._lock:
            causes = self.causes.take() if self.causes is not None else []
            if not (self._messages or self._events or self._rejects or self._trials or causes):
                return
            batch = (
                self._messages,
                self._events,
                self._rejects,
                self._trials,
                self._labels,
                causes,
            )
            self._messages, self._events, self._rejects = [], [], []
            self._trials, self._labels = [], []
            # Once taken from the lists, a batch belongs to a write task at once (no await
            # in between) that runs after the previous one: cancelling a flush never loses
            # rows, and writes stay in order with one writer.
            self._inflight = asyncio.ensure_future(self._write_after(self._inflight, batch))
            await asyncio.shield(self._inflight)

    async def drain(self) -> None:
        """Wait for the last write (before the database is closed)."""
        if self._inflight is not None:
            with contextlib.suppress(Exception):
                await self._inflight

    async def _write_after(self, previous: asyncio.Future[None] | None, batch: Batch) -> None:
        if previous is not None:
            with contextlib.suppress(Exception):
                await previous
        if self.failure is not None:
            return  # the run is stopping: nothing after a failed write is stored
        try:
            if self._file is not None:
                check_in_place(self._file)
            await insert_rows(self.db, *batch)
        except Exception as exc:  # never silent: the runner stops the run and says it, once
            self.failure = exc if isinstance(exc, StoreFailed) else self._failed(exc)
            log.debug("store write failed, %d rows not stored: %r", sum(len(b) for b in batch), exc)

    def _failed(self, exc: Exception) -> StoreFailed:
        """A failure the store did not name itself, said of the store (in SQLite's words
        when it is the store's own fault, as a failed batch of rows is)."""
        path = self._file.path if self._file is not None else "(the run's store)"
        return StoreFailed(path, store_fault(exc) or redact(f"{type(exc).__name__}: {exc}")[:300])

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            await self.flush()

    @property
    def stopped(self) -> str | None:
        """Why the recorder stopped before the runner's `end` (None while it records)."""
        task = self._task
        if task is None or not task.done() or self.end_seen:
            return None
        exc = None if task.cancelled() else task.exception()
        return redact(f"{type(exc).__name__}: {exc}")[:200] if exc else "its connection closed"

    async def stop(self) -> None:
        """Stop recording now (no `end` can come: the broker is gone); what it holds is
        written."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def wait_ended(self, stall_s: float) -> bool:
        """Wait until the recorder has everything up to the runner's `end`. A long run
        can leave a backlog in the connection's queue: wait as long as it keeps moving,
        and give up only when nothing arrived for `stall_s` seconds."""
        try:
            while not self.ended.is_set():
                if self._task is not None and self._task.done():
                    return False  # it stopped before the end: nothing more is coming
                before = self.handled
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(stall_s):
                        await self.ended.wait()
                if not self.ended.is_set() and self.handled == before:
                    return False
            return True
        finally:
            if self._task is not None:
                if not self.ended.is_set():
                    self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task


def is_run_end(env: Envelope) -> bool:
    """The runner's `end`: nothing of the runner's follows it."""
    return (
        env.kind is Kind.CONTROL
        and env.sender == topics.RUNNER
        and isinstance(parse_control(env.payload), End)
    )
