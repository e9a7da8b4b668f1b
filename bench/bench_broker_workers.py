"""Beyond one machine: `contamination` handed to 1, 2 and 4 `errorflow worker`
processes through one Mosquitto (`run --remote-workers N`, errorflow/runtime/
broker_workers.py), against the same run in one process in-process, in the same run of
this script; and a check that the per-trial outcomes are the same.

Per size, N worker subprocesses (`errorflow worker --broker URL --run any`, a run key of
their own) are started and warmed up by a run of a few trials (imports, connections);
then the timed run: wall time of `broker_workers.run` from hand-out to the merged,
closed run (registration, every batch, the merge, root causes). Rounds are interleaved
(one process, then each size, again), medians reported: trials/s of each, and the ratio
to one worker and to one process.

    python bench/bench_broker_workers.py [--quick] [--trials N] [--sizes 1,2,4] [--repeat R]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time

from _util import cpu_count, mosquitto, parse_args, quiet_logs, scenario, temp_db

from errorflow.bus.transport import InProcessBus
from errorflow.bus.url import BrokerURL
from errorflow.protocol import signing
from errorflow.runtime import broker_workers, workers
from errorflow.runtime.runner import RunOptions, RunResult
from errorflow.scenario.run_plan import RunPlan

WARM_UP_TRIALS = 8


def one_process(trials: int) -> tuple[float, RunResult]:
    with temp_db() as db:
        options = RunOptions(bus=InProcessBus(), db_path=db, keep_messages=False)
        plan = RunPlan.of(scenario("contamination"), trials=trials)
        started = time.perf_counter()
        result = asyncio.run(workers.run(plan, options, 1))
        return time.perf_counter() - started, result


def remote(url: BrokerURL, key: bytes, trials: int, n: int) -> tuple[float, RunResult]:
    with temp_db() as db:
        options = RunOptions(db_path=db, run_key=key, keep_messages=False)
        plan = RunPlan.of(scenario("contamination"), trials=trials)
        hand = broker_workers.Remote(url, ready=n, wait_s=60)
        started = time.perf_counter()
        result = asyncio.run(broker_workers.run(plan, options, hand))
        return time.perf_counter() - started, result


def with_workers(url: BrokerURL, trials: int, n: int) -> tuple[float, RunResult]:
    key = signing.new_key()
    env = {**os.environ, signing.KEY_ENV: key.hex()}
    cmd = [
        sys.executable,
        "-m",
        "errorflow.cli.main",
        "worker",
        "--broker",
        f"mqtt://{url.host}:{url.port}",
    ]
    procs = [
        subprocess.Popen(
            [*cmd, "--run", "any", "--name", f"bench-{n}-{i}"], env=env, stderr=subprocess.DEVNULL
        )
        for i in range(n)
    ]
    try:
        remote(url, key, WARM_UP_TRIALS, n)  # every worker up, imports done
        return remote(url, key, trials, n)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(10)


def main() -> None:
    args = parse_args(
        __doc__,
        [
            ("--trials", {"type": int, "help": "trials per run (default 2,000; quick 400)"}),
            ("--sizes", {"default": "1,2,4", "help": "worker counts (default 1,2,4)"}),
            ("--repeat", {"type": int, "default": 1, "help": "rounds (default 1)"}),
        ],
    )
    quiet_logs()
    trials = args.trials or (400 if args.quick else 2_000)
    sizes = [int(s) for s in args.sizes.split(",")]
    base_walls: list[float] = []
    walls: dict[int, list[float]] = {n: [] for n in sizes}
    same: dict[int, bool] = dict.fromkeys(sizes, True)
    with mosquitto(nodelay=True) as url:
        for _ in range(args.repeat):
            wall, base = one_process(trials)
            base_walls.append(wall)
            for n in sizes:
                wall, result = with_workers(url, trials, n)
                walls[n].append(wall)
                same[n] &= [s.outcome for s in result.scores] == [s.outcome for s in base.scores]
    base_wall = statistics.median(base_walls)
    rows = [(n, statistics.median(walls[n]), same[n]) for n in sizes]
    print(
        f"contamination, {trials:,} trials, Mosquitto, {cpu_count()} cores, median of {args.repeat}"
    )
    print(f"  one process, in-process bus: {base_wall:7.2f} s  {trials / base_wall:7.0f} trials/s")
    first = rows[0][1]
    for n, wall, same_outcomes in rows:
        print(
            f"  {n} worker(s):  {wall:7.2f} s  {trials / wall:7.0f} trials/s  "
            f"x{first / wall:.2f} vs {sizes[0]} worker(s)  x{base_wall / wall:.2f} vs one process  "
            f"same outcomes: {same_outcomes}"
        )


if __name__ == "__main__":
    main()
