"""The runner: starts (or joins) the bus, the recorder and the agents, publishes one task
per trial, collects the final results, scores them and stores everything.

Order of a run: every real model server checked (`InfrastructureError` before anything
is stored) → recorder subscribed → agents subscribed and present (roll call and hello
on the control topics) → tasks published, at most `max_in_flight` trials at once → each
trial ends when every terminal agent's result and everything it was derived from has
arrived (the `TrialTracker` rule; `bus_fault` on timeout) → stop, end, flush.

A trial whose model server failed during the run is `infra_fault`: stored and counted
(`RunResult.infra_faults`), never scored.

Liveness, while the trials run (errorflow/runtime/liveness.py): the runner watches every
participant. An agent process that goes away (its last will, or silence) is waited for
`grace_s`, with a roll call every second; one that comes back restarted is given the
inputs of its unfinished work again, so its trials end as they would have. The broker
unreachable for `grace_s`, the recorder or an in-process agent stopping end the run at
once. A run that ends so stops cleanly: the trials in flight are `infra_fault` with the
reason, the run is left interrupted (`--resume` reruns them) and `ParticipantLost` says
what happened in one line.

The run's driver is errorflow/runtime/run_driver.py, its participants errorflow/runtime/
participants.py; here a run is set up (bus, store, its row) and closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path

import aiosqlite

from errorflow.bus.broker import EmbeddedBroker
from errorflow.bus.mqtt import PUBLISH_OUTAGE_LIMIT_S, MqttBus
from errorflow.bus.transport import Bus, InProcessBus
from errorflow.core.run_pacing import paced_for_run
from errorflow.models.backends import check_backends, check_servers
from errorflow.runtime.liveness import ParticipantLost, taken_by_lost
from errorflow.runtime.run_driver import RunDriver
from errorflow.runtime.run_options import RunOptions
from errorflow.runtime.run_result import RunResult, new_run_id
from errorflow.scenario.problems import file_error
from errorflow.scenario.run_plan import RunPlan
from errorflow.scenario.spec import identity
from errorflow.scenario.spec.model import Scenario
from errorflow.scoring.score import Outcome, TrialScore, Truth
from errorflow.store import root_causes
from errorflow.store.failures import StoreFailed, stopped_by
from errorflow.store.opening import open_db
from errorflow.store.readers import load_scores
from errorflow.store.runs import create_run, finish_run, resume_run
from errorflow.world.ground_truth import empty_truths

__all__ = ["RunOptions", "RunResult", "new_run_id", "register", "run_plan", "run_scenario"]

log = logging.getLogger(__name__)
#: What a run's stored broker says when its agents were processes of their own.
EXTERNAL_AGENTS = " · external agents"

#: Empty true answers said in this process (a sweep's cells and a comparison's arms
#: share their task: said once).
_said_empty: set[str] = set()


async def run_scenario(scenario: Scenario, options: RunOptions | None = None) -> RunResult:
    """Run a scenario as it is (built in Python, or loaded): it is validated once, as
    a file is (`RunPlan.of`), then run."""
    return await run_plan(RunPlan.of(scenario), options)


async def run_plan(plan: RunPlan, options: RunOptions | None = None) -> RunResult:
    """Run what the plan says, as the options say (nothing is validated again)."""
    options = options or RunOptions()
    scenario = plan.scenario
    if options.external_agents and scenario.services:
        raise file_error(
            scenario.name,
            "services keep one state for the whole run, shared by the agents that call "
            "them, which agents in separate processes cannot share; run it without "
            "--external-agents",
        )
    api_key = check_backends(scenario)
    if not options.external_agents:
        # External agents may reach servers this process cannot: they check their own.
        await check_servers(scenario, api_key)
    run_id = options.run_id or new_run_id(scenario.name)
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(paced_for_run())
        bus = options.bus if options.bus is not None else await _start_bus(stack, options)
        # The first connection before the run row: a broker that is down fails here,
        # with nothing stored (no run left `interrupted` by a run that never started).
        recording = await bus.connect(f"{run_id}-recorder")
        stack.push_async_callback(recording.close)  # closing twice is harmless
        db = await open_db(options.db_path)
        stack.push_async_callback(db.close)
        # In a thread: the truth may call the user's tools, slow ones too, and the loop
        # serves the run's connections meanwhile (an embedded broker's as well).
        truth = await asyncio.to_thread(Truth, scenario)
        runner = RunDriver(plan, run_id, bus, db, options, api_key, recording, truth)
        kept: dict[int, TrialScore] = {}
        if options.resume:
            kept = await take_over_stored(db, options.db_path, run_id)
        else:
            broker = bus.description + (EXTERNAL_AGENTS if options.external_agents else "")
            await register(db, run_id, plan, broker, options, runner.truth)
        stack.push_async_callback(runner.drain)  # runs before the database closes
        if options.resume:
            runner.resume_from(kept, options.db_path)
        status = "interrupted"
        try:
            result = await runner.run()
            status = "finished"
        except ParticipantLost:
            if runner.store_failure() is None:
                raise  # else the store's failure is what ended the run: said below
        finally:
            summary = runner.summary()
            await runner.drain()  # one writer at a time on the connection
            failed = runner.store_failure()
            if failed is not None:
                status = "interrupted"  # `--resume` runs what was not stored
            with contextlib.suppress(Exception) if failed else contextlib.nullcontext():
                await root_causes.forget(db, run_id, runner.stale_causes())
            await root_causes.record(db, run_id, finished=status == "finished")
            # A store that failed may take this last word or not: it was said once.
            with contextlib.suppress(StoreFailed) if failed else contextlib.nullcontext():
                await finish_run(db, run_id, status, summary)
        if failed is not None:
            raise await stopped_by(db, options.db_path, run_id, scenario.trials, failed)
        return result


async def _start_bus(stack: contextlib.AsyncExitStack, options: RunOptions) -> Bus:
    """An MQTT bus on the broker the options name; without one, an in-process bus, or
    an embedded broker started here when the run needs one (`RunOptions.needs_broker`)."""
    url = options.broker
    description = str(url) if url else ""
    if url is None and not options.needs_broker:
        return InProcessBus()
    if url is None:
        broker = EmbeddedBroker()
        url = await broker.start()
        stack.push_async_callback(broker.stop)
        description = f"embedded amqtt at {url}"
    # A publish waits for the broker longer than the grace period: the runner's watch,
    # not a failed publish, decides that the broker is gone.
    wait_s = options.grace_s + PUBLISH_OUTAGE_LIMIT_S
    bus = MqttBus(url, description=description, publish_wait_s=wait_s)
    stack.push_async_callback(bus.close)
    return bus


async def register(
    db: aiosqlite.Connection,
    run_id: str,
    plan: RunPlan,
    broker: str,
    options: RunOptions,
    truth: Truth | None = None,
) -> None:
    """A new run's row: the scenario as it is stored (public form, sha), where it runs
    (`broker`: the bus's description), its sweep group and label, and its ground truth
    (`truth`, if the caller has it at hand: computing it may call Python tools)."""
    scenario = plan.scenario
    truth = truth if truth is not None else Truth(scenario)
    if options.only_trials is None:  # a worker's shard: its parent says it
        _say_empty_truths(scenario, truth)
    await create_run(
        db,
        run_id=run_id,
        scenario=scenario.name,
        scenario_json=identity.public_json(scenario),
        scenario_sha=plan.sha,
        scenario_exact=identity.is_exact(scenario),
        truth_json=json.dumps(truth.values),
        seed=scenario.seed,
        trials=scenario.trials,
        propagation=scenario.propagation,
        broker=broker,
        group_id=options.group_id,
        label=options.label,
    )


def _say_empty_truths(scenario: Scenario, truth: Truth) -> None:
    """What `validate` warns of, said by a run too: an empty true answer makes explicit
    agents abstain where they were right, which reads as a result of the system."""
    for _, words in empty_truths(scenario, truth.answers):
        if words not in _said_empty:
            _said_empty.add(words)
            log.warning("%s (`errorflow validate` says where)", words)


async def take_over_stored(
    db: aiosqlite.Connection, path: Path, run_id: str
) -> dict[int, TrialScore]:
    """Resume the interrupted run `run_id`: the scores it keeps. Its trials that ended a
    bus fault, or that a lost participant took with it, measured nothing: their rows
    are forgotten and they run again, with those it left unscored."""
    stored = load_scores(path, run_id, include_bus_faults=True)
    kept = {
        t: sc
        for t, sc in stored.items()
        if sc.outcome is not Outcome.BUS_FAULT and not taken_by_lost(sc)
    }
    await resume_run(db, run_id, rerun=[t for t in stored if t not in kept])
    return kept
