"""Sweep throughput: trials/s of the strategy-matrix sweep against the bus limit.

The sweep is what `errorflow sweep strategy-matrix --no-baseline` runs: all 9 cells
(3 error classes x 3 strategies) through `errorflow.experiment.sweep_arms` and
`run_arms(baseline=False)`, simulated model, everything recorded to SQLite. It runs
over the embedded amqtt broker, over a Mosquitto subprocess and over the in-process
bus (reference, no broker). The full mode adds one cell with many trials, where the
per-run set-up (connections, presence handshake, end of run) is amortised.

The bus limit is measured in the same run on the same broker: raw aiomqtt messages/s
(one publisher, one subscriber, QoS 1, 32 in flight, payloads of the recorded mean
envelope size) divided by the messages per trial the recorder stored for that sweep
(every task, result, control and event message is one publish). Each publish is
delivered to 2 subscribers on average (recorder plus the addressee), so the limit is
generous. Target: sweep trials/s >= 0.5 of the limit.

Runs use `keep_messages=False`, as the CLI does. Messages per trial include the
end-to-end `ack` of every task and result. Our MQTT clients set TCP_NODELAY
(errorflow/bus/mqtt.py); the raw clients of the limit do too. `mosquitto+nodelay` is a
candidate broker setting, not a package change: `set_tcp_nodelay true` in Mosquitto's
config (Nagle off on the broker's side as well). Its raw limit is measured with it.

    python bench/bench_sweep_throughput.py [--quick]
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

from _util import broker, count_recorded, parse_args, row, run, scenario, temp_db, verdict
from bench_bus_overhead import raw_round

from errorflow.bus.transport import InProcessBus
from errorflow.bus.url import BrokerURL
from errorflow.runtime.experiment import run_arms, sweep_arms
from errorflow.runtime.runner import RunOptions

TARGET = 0.5


async def sweep(url: BrokerURL | None, db: Path, trials: int | None, cells: int) -> dict[str, Any]:
    s = scenario("strategy-matrix", **({"trials": trials} if trials else {}))
    assert s.sweep is not None
    arms = sweep_arms(s, [(a.name, a.values) for a in s.sweep.axes])[:cells]
    options = RunOptions(
        broker=url, bus=InProcessBus() if url is None else None, db_path=db, keep_messages=False
    )
    t0 = time.perf_counter()
    result = await run_arms(arms, options, baseline=False)
    wall = time.perf_counter() - t0
    n = sum(len(a.result.scores) for a in result.arms)
    faults = sum(a.result.outcomes.get("bus_fault", 0) for a in result.arms)
    counts = count_recorded(db, [a.result.run_id for a in result.arms])
    published = counts["messages"] + counts["events"]
    per_cell = {
        a.label: (lambda c: c["messages"] + c["events"])(count_recorded(db, [a.result.run_id]))
        for a in result.arms
    }
    # Scored trials the store lacks (a batch lost or rolled back after the run).
    missing_trials = {}
    conn = sqlite3.connect(db)
    for a in result.arms:
        stored = conn.execute(
            "SELECT count(*) FROM trials WHERE run_id = ?", (a.result.run_id,)
        ).fetchone()[0]
        if stored < len(a.result.scores):
            missing_trials[a.label] = len(a.result.scores) - stored
    conn.close()
    return {
        "trials": n,
        "cells": len(arms),
        "wall": wall,
        "trials_s": n / wall,
        "msgs_per_trial": published / n,
        "mean_bytes": counts["bytes"] / max(published, 1),
        "bus_faults": faults,
        "per_cell": per_cell,
        "published": published,
        "missing_trials": missing_trials,
    }


async def bus_limit(url: BrokerURL, size: int, n: int) -> float:
    payload = (b'{"pad":"' + b"x" * size)[: max(size - 2, 10)] + b'"}'
    rates = [n / await raw_round(url, n, 32, payload) for _ in range(3)]
    return statistics.median(rates)


UNHANDLED: list[str] = []  # "Task exception was never retrieved" and the like, per run
_current = ["start-up"]


def _on_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    exc = context.get("exception")
    UNHANDLED.append(f"{_current[0]}: {context.get('message')} ({exc!r})")


async def main() -> None:
    args = parse_args(__doc__)
    asyncio.get_running_loop().set_exception_handler(_on_loop_error)
    shapes: list[tuple[str, int | None, int]] = [("9 cells x 20 trials", None, 9)]
    if not args.quick:
        shapes.append(("1 cell x 400 trials", 400, 1))
    raw_n = 2000 if args.quick else 4000
    rows: list[tuple[str, str, dict[str, Any], float | None]] = []
    with temp_db() as db:
        for transport in ("embedded", "mosquitto", "mosquitto+nodelay", "in-process"):
            for shape, trials, cells in shapes:
                _current[0] = f"{transport} / {shape}"
                if transport == "in-process":
                    res = await sweep(None, db, trials, cells)
                    gc.collect()  # an orphaned task's error is reported when it is collected
                    rows.append((transport, shape, res, None))
                    continue
                async with broker(transport) as url:
                    _current[0] = f"{transport} / warm-up"
                    await sweep(url, db, 5, 1)  # warm-up: imports, first connections
                    gc.collect()
                    _current[0] = f"{transport} / {shape}"
                    res = await sweep(url, db, trials, cells)
                    gc.collect()
                    raw = await bus_limit(url, int(res["mean_bytes"]), raw_n)
                    rows.append((transport, shape, res, raw))
    print("strategy-matrix sweep (simulated model, recorded to SQLite, no baselines)")
    print()
    print(
        row(
            "transport / shape",
            "trials/s   wall s   msgs/trial   raw msg/s   limit trials/s   fraction of limit",
            width=36,
        )
    )
    worst = None
    for transport, shape, res, raw in rows:
        if raw is None:
            limit_txt, frac_txt = "        -", "(reference, no broker)"
        else:
            limit = raw / res["msgs_per_trial"]
            frac = res["trials_s"] / limit
            worst = frac if worst is None else min(worst, frac)
            limit_txt, frac_txt = f"{limit:14.1f}", f"{frac:.2f}"
        raw_txt = f"{raw:9.0f}" if raw else "        -"
        bad = f"  bus_fault {res['bus_faults']}" if res["bus_faults"] else ""
        print(
            row(
                f"{transport} / {shape}",
                f"{res['trials_s']:8.1f}   {res['wall']:6.2f}   {res['msgs_per_trial']:10.1f}   "
                f"{raw_txt}   {limit_txt}   {frac_txt}{bad}",
                width=36,
            )
        )
    inproc = {shape: res for t, shape, res, _ in rows if t == "in-process"}
    print()
    # Same seeds, so every transport must record exactly what the in-process run did.
    for transport, shape, res, _ in rows:
        ref = inproc[shape]["per_cell"]
        short = {c: ref[c] - n for c, n in res["per_cell"].items() if n < ref[c]}
        if short:
            print(
                f"RECORDING LOSS {transport} / {shape}: {sum(short.values())} of "
                f"{inproc[shape]['published']} messages+events missing from the store "
                f"(per cell: {short})"
            )
        if res["missing_trials"]:
            print(
                f"RECORDING LOSS {transport} / {shape}: scored trials missing from the "
                f"trials table (per cell: {res['missing_trials']})"
            )
        longer = {c: n - ref[c] for c, n in res["per_cell"].items() if n > ref[c]}
        if longer:
            print(
                f"note {transport} / {shape}: more messages+events than in-process "
                f"(per cell: {longer})"
            )
    print()
    for transport, shape, res, _ in rows:
        if transport != "in-process":
            print(
                f"{transport} / {shape}: {res['trials_s'] / inproc[shape]['trials_s']:.2f} "
                "of the in-process bus's trials/s"
            )
    for line in UNHANDLED:
        print(f"UNHANDLED ERROR in {line}")
    if worst is not None:
        ok = verdict(worst >= TARGET)
        print(f"target >= {TARGET} of the bus limit: worst {worst:.2f} (all rows) -> {ok}")


if __name__ == "__main__":
    run(main())
