"""A run's trials spread over worker processes (`--workers N`), with the results one
process gives: same seeds, same per-trial outcomes, everything in the one store.

Every draw of a trial comes from streams seeded by (seed, trial, ...) (errorflow.core.
seeding) and, unless state lives across trials (`Scenario.run_scoped`), a trial depends
on no other: run in another process, it is the same trial. So the trials still to run
are cut into contiguous shards, one per worker. A worker (a spawned process: nothing of
this process's event loop, threads or database connection is inherited) runs its shard
with the ordinary runner (`RunOptions.only_trials`) on an in-process bus of its own,
into a store of its own, under the run's id and run key. Its scores come back as they
are made (the progress bar moves); when the shards are over their rows are copied into
the user's store, where the run was registered, shard by shard, so in trial order.
Each shard stores the root causes of its failed trials (from its rows alone, so in
parallel); they are merged with the rows. The summary is made from the merged scores.

What cannot be split runs in one process: a run-scoped scenario (its trials see the
trials before them), one that calls real models (one request limiter, response cache and
spend tally for the run), a run on a broker or with external agents (topics are the
run's: shards on one broker would hear each other). `refusal` says which.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import queue
import signal
import tempfile
from collections import Counter
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field, replace
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from errorflow.bus.transport import InProcessBus
from errorflow.core.errors import ErrorflowError, InputError
from errorflow.core.redact import redact
from errorflow.faults.tally import FaultCount
from errorflow.protocol import signing
from errorflow.protocol.envelope import Envelope
from errorflow.runtime.parent_watch import leave_with_parent
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.run_result import RunResult, new_run_id
from errorflow.runtime.runner import register, run_plan, take_over_stored
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import TrialScore
from errorflow.scoring.score_table import in_trial_order, score_map
from errorflow.scoring.summary import RunSummary, summarize
from errorflow.store import root_causes
from errorflow.store.failures import StoreFailed, stopped_by, writing
from errorflow.store.kept_trials import kept_fault_counts, kept_rejects, kept_trials
from errorflow.store.opening import open_db, tables_of
from errorflow.store.runs import finish_run

#: `--workers auto`: one process per core for runs of at least this many trials, one
#: process below. Starting the workers and merging their stores costs a second or more:
#: below this size one process is at most 1.3x the time of the workers, above it the
#: workers win (bench/RESULTS.md, "default path").
LARGE_RUN = 2000
AUTO: Literal["auto"] = "auto"
WorkerCount = int | Literal["auto"]
#: How often the parent looks at its workers while waiting for their results.
POLL_S = 0.25
#: How long a worker asked to stop may take before it is terminated.
STOP_S = 5.0


class WorkersRefused(InputError, ValueError):
    """`--workers N` (N > 1) asked for a run that must run in one process."""


class ShardFailed(ErrorflowError, RuntimeError):
    """A worker's shard failed (or its process died); the run is left interrupted."""


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def refusal(scenario: Scenario, options: RunOptions) -> str | None:
    """Why the trials of this run cannot be spread over processes (None: they can)."""
    if scenario.run_scoped:
        return (
            "state lives across its trials (a service, a breaker, limiter or bulkhead with "
            "`scope: run`, or arrivals over run time): each trial must see the trials "
            "before it, so they run in one process"
        )
    if scenario.bus.configured:
        return "its bus faults are tallied over the whole run, in one process"
    real = [n for n, a in scenario.agents.items() if a.model.backend != "simulated"]
    if real:
        return (
            f"agent {real[0]} calls a real model: the run's requests share one limiter, "
            "response cache and spend tally, in one process"
        )
    if options.broker is not None or options.external_agents:
        return (
            "each worker runs its shard on an in-process bus of its own; a run on a broker "
            "or with external agents runs in one process"
        )
    if options.bus is not None and not isinstance(options.bus, InProcessBus):
        return "the run is given a bus of its own, which one process holds"
    if options.on_trace is not None:
        return "its agents' traces are watched in this process"
    return None


def count_for(requested: WorkerCount, scenario: Scenario, options: RunOptions) -> int:
    """How many processes run the trials: `auto` is every core for a large run that can
    be split and 1 otherwise; a number > 1 for a run that cannot be split is refused."""
    if requested == AUTO:
        large = scenario.trials >= LARGE_RUN
        return cores() if large and refusal(scenario, options) is None else 1
    assert isinstance(requested, int)
    if requested > 1:
        why = refusal(scenario, options)
        if why is not None:
            raise WorkersRefused(f"{scenario.name} cannot be split over processes: {why}")
    return max(1, min(requested, scenario.trials))


def shards_of(todo: list[int], n: int) -> list[tuple[int, ...]]:
    """`todo` cut into at most `n` contiguous, near-equal parts, in order."""
    n = max(1, min(n, len(todo)))
    size, extra = divmod(len(todo), n)
    parts, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        parts.append(tuple(todo[start:end]))
        start = end
    return [p for p in parts if p]


# -- the worker's side ---------------------------------------------------------------------


@dataclass(frozen=True)
class Shard:
    """One worker's part of a run: everything it needs, picklable (the plan is rebuilt
    in the worker as it was made, not validated again)."""

    index: int
    plan: RunPlan
    run_id: str
    trials: tuple[int, ...]
    db_path: Path
    key: bytes
    keep_messages: bool
    trial_timeout_s: float
    presence_timeout_s: float


@dataclass
class ShardResult:
    index: int
    rejects: dict[str, int] = field(default_factory=dict)
    messages: dict[int, list[Envelope]] = field(default_factory=dict)
    error: str | None = None
    store_failed: str | None = None  # why its store failed a write (the run's store says it)
    #: What the shard's summary holds beyond per-trial scores and fault counts (none,
    #: for a run that can be split: checked, never merged by guess).
    extra: tuple[str, ...] = ()
    #: Where each configured fault fired, per kind (summed over the shards).
    fault_counts: dict[str, dict[str, FaultCount]] = field(default_factory=dict)


#: Where a resumed run's kept trials are counted among the shards' results.
KEPT = -1

#: What a worker puts on the results queue: ("trial", run_id, score) as each trial is
#: scored, ("done", run_id, result) when its shard is over.
Report = tuple[str, str, Any]


def serve(jobs: Queue[Shard | None], results: Queue[Report]) -> None:
    """A worker process: run shards until told to stop (None). Ctrl-C is the parent's
    to handle (it stops the workers), so the terminal's SIGINT is ignored here. A parent
    that dies (even by SIGKILL) ends the worker, which removes its shard's store first:
    nobody is left to merge it, and `--resume` runs its trials again."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    current: list[Path] = []
    leave_with_parent(multiprocessing.current_process().name, lambda: _forget(current))
    while (shard := jobs.get()) is not None:
        current[:] = [shard.db_path]
        results.put(("done", shard.run_id, run_shard(shard, results.put)))


def _forget(stores: list[Path]) -> None:
    """Remove a dead run's shard stores, and their folder once it is empty."""
    for path in stores:
        for name in (path.name, *(path.name + s for s in ("-journal", "-wal", "-shm"))):
            (path.parent / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # another worker's store is still there
            path.parent.rmdir()


def run_shard(shard: Shard, report: Callable[[Report], None]) -> ShardResult:
    def on_trial(score: TrialScore) -> None:
        # Without kept messages the labels are in the shard's store: not sent, not kept.
        report(("trial", shard.run_id, score if shard.keep_messages else replace(score, labels=[])))

    options = RunOptions(
        bus=InProcessBus(),
        db_path=shard.db_path,
        run_id=shard.run_id,
        run_key=shard.key,
        keep_messages=shard.keep_messages,
        only_trials=shard.trials,
        on_trial=on_trial,
        trial_timeout_s=shard.trial_timeout_s,
        presence_timeout_s=shard.presence_timeout_s,
    )
    try:
        result = asyncio.run(run_plan(shard.plan, options))
    except Exception as exc:
        store = exc.reason if isinstance(exc, StoreFailed) else None
        error = redact(f"{type(exc).__name__}: {exc}")[:500]
        return ShardResult(shard.index, error=error, store_failed=store)
    more = set(result.summary) - set(summarize(result.scores))
    counts = {k: dict(result.summary[k]) for k in sorted(more & FAULT_COUNTS)}  # type: ignore[literal-required]
    extra = tuple(sorted(more - FAULT_COUNTS))
    return ShardResult(
        shard.index, dict(result.rejects), result.messages, extra=extra, fault_counts=counts
    )


#: Summary blocks that count trials a fault fired in (and never did): shards add up.
FAULT_COUNTS = frozenset({"agent_faults", "bus_faults", "model_faults", "tool_faults"})


def merged_summary(
    scores: MutableMapping[int, TrialScore], done: dict[int, ShardResult]
) -> RunSummary:
    """The run's summary from every shard's scores, with the fault counts summed."""
    summary = summarize(in_trial_order(scores))
    for key in sorted({k for r in done.values() for k in r.fault_counts}):
        total: dict[str, FaultCount] = {}
        for r in done.values():
            for kind, c in r.fault_counts.get(key, {}).items():
                t = total.setdefault(kind, {"fired": 0, "never": 0, "times": 0})
                for n in ("fired", "never", "times"):
                    t[n] += c[n]
                if c.get("unknown"):
                    t["unknown"] = t.get("unknown", 0) + c.get("unknown", 0)
                kind_of: dict[str, object] = dict(c)
                if "kind" in kind_of:  # a tool or model fault's kind goes with its place
                    t["kind"] = kind_of["kind"]  # type: ignore[typeddict-unknown-key]
        summary[key] = total  # type: ignore[literal-required]
    return summary


# -- the parent's side ---------------------------------------------------------------------


class Pool:
    """`size` spawned worker processes, kept for every run of a command (a sweep's cells
    and baselines reuse them)."""

    def __init__(self, size: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.size = size
        self.jobs: Queue[Shard | None] = ctx.Queue()
        self.results: Queue[Report] = ctx.Queue()
        self.procs: list[BaseProcess] = [
            ctx.Process(target=serve, args=(self.jobs, self.results), name=f"errorflow-worker-{i}")
            for i in range(size)
        ]
        for proc in self.procs:
            proc.daemon = True  # never outlives the command
            proc.start()
        self.broken = False

    async def run(self, plan: RunPlan, options: RunOptions) -> RunResult:
        """One run, its trials spread over the pool."""
        scenario = plan.scenario
        run_id = options.run_id or new_run_id(scenario.name)
        key = options.run_key if options.run_key is not None else signing.new_key()
        broker = f"in-process, {self.size} worker processes"
        db = await open_db(options.db_path)
        try:
            scores = score_map(options.keep_messages, scenario.trials)
            kept, counted = await take_over(db, plan, run_id, options, broker)
            scores.update(kept)
            todo = [t for t in range(scenario.trials) if t not in scores]
            folder = options.db_path.resolve().parent
            with tempfile.TemporaryDirectory(prefix=".errorflow-workers-", dir=folder) as tmp:
                shards = [
                    Shard(i, plan, run_id, part, Path(tmp) / f"shard-{i}.db", key,
                          options.keep_messages, options.trial_timeout_s,
                          options.presence_timeout_s)
                    for i, part in enumerate(shards_of(todo, self.size))
                ]  # fmt: skip
                done, summary = await self._finish(db, run_id, shards, scores, options, counted)
        except StoreFailed as exc:  # said of the run's store, with how much of it is there
            raise await stopped_by(db, options.db_path, run_id, scenario.trials, exc) from None
        finally:
            await db.close()
        return result_of(plan, run_id, broker, scores, done, summary)

    async def _finish(
        self,
        db: aiosqlite.Connection,
        run_id: str,
        shards: list[Shard],
        scores: MutableMapping[int, TrialScore],
        options: RunOptions,
        kept: ShardResult | None = None,
    ) -> tuple[dict[int, ShardResult], RunSummary]:
        """Run the shards, then merge what they stored (whatever happened) and close
        the run: finished, or interrupted (`--resume` runs what is missing). The shards'
        results (with `kept`: what a resumed run's kept trials counted, at `KEPT`) and
        the run's summary."""
        status, done = "interrupted", {}
        try:
            done = await self._gather(run_id, shards, scores, options.on_trial)
            failed = [r.error for r in done.values() if r.error is not None]
            failed += [f"its summary has {', '.join(r.extra)}" for r in done.values() if r.extra]
            store = [r.store_failed for r in done.values() if r.store_failed]
            if store:
                raise StoreFailed(str(options.db_path), f"{store[0]} (a worker's store beside it)")
            if failed:
                raise ShardFailed(f"run {run_id}: a worker's shard failed ({failed[0]})")
            status = "finished"
        finally:
            if status != "finished":
                self.kill()  # a shard still running would write on under our feet
            counted = done if kept is None else {**done, KEPT: kept}
            shard_dbs = [s.db_path for s in shards]
            summary = await close_run(db, run_id, shard_dbs, scores, counted, status)
        return counted, summary

    async def _gather(
        self,
        run_id: str,
        shards: list[Shard],
        scores: MutableMapping[int, TrialScore],
        on_trial: Callable[[TrialScore], None] | None,
    ) -> dict[int, ShardResult]:
        if self.broken:
            raise ShardFailed("the worker processes were stopped by an earlier failure")
        for shard in shards:
            self.jobs.put(shard)
        done: dict[int, ShardResult] = {}
        # A shard that failed ends the run now: the others are stopped, not waited for.
        while len(done) < len(shards) and not any(r.error for r in done.values()):
            reports = await asyncio.to_thread(_take, self.results, POLL_S)
            for tag, rid, item in reports:
                if rid != run_id:
                    continue
                if tag == "trial":
                    scores[item.trial] = item
                    if on_trial is not None:
                        on_trial(item)
                else:
                    done[item.index] = item
            dead = [p for p in self.procs if not p.is_alive()]
            if not reports and dead:
                raise ShardFailed(f"worker process {dead[0].name} exited (code {dead[0].exitcode})")
        return done

    def kill(self) -> None:
        self.broken = True
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join(STOP_S)

    def close(self) -> None:
        """Ask every worker to stop, then terminate whoever is left."""
        if not self.broken:
            for _ in self.procs:
                self.jobs.put(None)
            for proc in self.procs:
                proc.join(STOP_S)
        self.kill()
        self.jobs.close()
        self.results.close()


def _take(results: Queue[Report], wait_s: float) -> list[Report]:
    """Every report there is (waiting up to `wait_s` for the first)."""
    try:
        got = [results.get(timeout=wait_s)]
    except queue.Empty:
        return []
    with contextlib.suppress(queue.Empty):
        while len(got) < 10_000:
            got.append(results.get_nowait())
    return got


async def take_over(
    db: aiosqlite.Connection, plan: RunPlan, run_id: str, options: RunOptions, broker: str
) -> tuple[dict[int, TrialScore], ShardResult | None]:
    """The run registered (or, resumed, taken over): the scores it has already, and
    what fired in those trials, counted again from the store as a shard's counts."""
    if options.resume:
        kept = await take_over_stored(db, options.db_path, run_id)
        rows = kept_trials(options.db_path, run_id, kept)
        scores, counts = kept_fault_counts(plan.scenario, rows, kept)
        rejects = dict(kept_rejects(options.db_path, run_id))
        return scores, ShardResult(KEPT, rejects=rejects, fault_counts=counts)
    await register(db, run_id, plan, broker, options)
    return {}, None


#: The store's tables a shard fills, each copied in the order it was written.
_MERGED = (
    "INSERT OR IGNORE INTO messages SELECT * FROM shard.messages ORDER BY rowid",
    "INSERT OR IGNORE INTO events SELECT * FROM shard.events ORDER BY rowid",
    "INSERT INTO rejects SELECT * FROM shard.rejects ORDER BY rowid",
    "INSERT OR REPLACE INTO trials SELECT * FROM shard.trials ORDER BY trial",
    "INSERT OR REPLACE INTO labels SELECT * FROM shard.labels ORDER BY rowid",
)


#: The tables `_MERGED` reads.
_MERGED_TABLES = frozenset({"messages", "events", "rejects", "trials", "labels"})


async def close_run(
    db: aiosqlite.Connection,
    run_id: str,
    shard_dbs: list[Path],
    scores: MutableMapping[int, TrialScore],
    done: dict[int, ShardResult],
    status: str,
) -> RunSummary:
    """Merge what the shards stored (in the order given: trial order), then record the
    root causes and the summary and close the run (`finished` or `interrupted`); the
    summary."""
    for path in shard_dbs:
        await merge(db, path)
    if status != "finished":  # a killed shard's last scores came before its store wrote them
        async with db.execute("SELECT trial FROM trials WHERE run_id = ?", (run_id,)) as rows:
            stored = {int(t) async for (t,) in rows}
        for trial in [t for t in scores if t not in stored]:
            del scores[trial]  # they run again on `--resume`, as trials never scored
    summary = merged_summary(scores, done)
    await root_causes.record(db, run_id, finished=status == "finished")
    await finish_run(db, run_id, status, summary)
    return summary


async def merge(db: aiosqlite.Connection, shard_db: Path) -> None:
    """Copy a shard's rows into the run's store, in one transaction (its `runs` row is
    the shard's own: the run's row is the parent's)."""
    if not shard_db.exists():
        return  # the worker never got to it
    await db.execute("ATTACH DATABASE ? AS shard", (str(shard_db),))
    try:
        if not _MERGED_TABLES.issubset(await tables_of(db, "shard")):
            return  # stopped while it made its store: nothing is written before the tables
        async with writing(db):  # rolled back before the detach; `StoreFailed` if the store failed
            for sql in _MERGED:
                await db.execute(sql)
            await root_causes.copy_attached(db, "shard")
            await db.commit()
    finally:
        await db.execute("DETACH DATABASE shard")


def result_of(
    plan: RunPlan,
    run_id: str,
    broker: str,
    scores: MutableMapping[int, TrialScore],
    done: dict[int, ShardResult],
    summary: RunSummary,
) -> RunResult:
    """The run's result, with the summary `close_run` stored."""
    rejects: Counter[str] = Counter()
    messages: dict[int, list[Envelope]] = {}
    for index in sorted(done):
        rejects.update(done[index].rejects)
        messages.update(done[index].messages)
    ordered = in_trial_order(scores)
    return RunResult(
        run_id=run_id,
        scenario=plan.name,
        seed=plan.seed,
        trials=plan.trials,
        propagation=plan.propagation,
        broker=broker,
        scores=ordered,
        summary=summary,
        rejects=dict(rejects),
        messages=dict(sorted(messages.items())),
    )


class Workers:
    """The processes a command's runs are spread over: started by the first run that is
    split, kept for the next (a sweep's cells), stopped by `close`. With 1 (or `auto` on
    a small run) a run is the ordinary one-process run."""

    def __init__(self, requested: WorkerCount = 1) -> None:
        if requested != AUTO and not (type(requested) is int and requested >= 1):
            raise InputError(
                f"workers: expected a number of processes (1 or more) or 'auto', not {requested!r}"
            )
        self.requested = requested
        self.pool: Pool | None = None

    def count_for(self, plan: RunPlan, options: RunOptions) -> int:
        return count_for(self.requested, plan.scenario, options)

    async def run(self, plan: RunPlan, options: RunOptions) -> RunResult:
        n = self.count_for(plan, options)
        if n <= 1:
            return await run_plan(plan, options)
        if self.pool is None or self.pool.broken or self.pool.size != n:
            self.close()
            self.pool = Pool(n)
        return await self.pool.run(plan, options)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


async def run(plan: RunPlan, options: RunOptions, workers: WorkerCount = 1) -> RunResult:
    """One run, over `workers` processes (see `count_for`)."""
    with Workers(workers) as pool:
        return await pool.run(plan, options)
