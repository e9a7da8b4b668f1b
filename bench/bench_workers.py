"""Every core: `contamination` in-process in one process against `--workers N`
(errorflow.runtime.workers: spawned processes, each a shard on its own in-process bus,
merged into the one store), wall time end to end (process start-up and the merge
included), interleaved runs, medians; and a check that the outcomes are the same
(issue 19: >= 1.7x on 2 cores).

    python bench/bench_workers.py [--quick] [--trials N] [--workers N] [--repeat N]
"""

from __future__ import annotations

import asyncio
import statistics
import time

from _util import cpu_count, parse_args, quiet_logs, scenario, temp_db

from errorflow.bus.transport import InProcessBus
from errorflow.runtime import workers
from errorflow.runtime.runner import RunOptions, RunResult
from errorflow.scenario.run_plan import RunPlan


def once(trials: int, n: int) -> tuple[float, RunResult]:
    with temp_db() as db:
        bus = InProcessBus()  # one process: in-process too (workers have their own)
        options = RunOptions(bus=bus, db_path=db, keep_messages=False)
        plan = RunPlan.of(scenario("contamination"), trials=trials)
        started = time.perf_counter()
        result = asyncio.run(workers.run(plan, options, n))
        return time.perf_counter() - started, result


def main() -> None:
    args = parse_args(
        __doc__,
        [
            ("--trials", {"type": int, "help": "trials per run (default 20,000; quick 4,000)"}),
            ("--workers", {"type": int, "default": cpu_count(), "help": "default: the cores"}),
            ("--repeat", {"type": int, "default": 3}),
        ],
    )
    quiet_logs()
    trials = args.trials or (4_000 if args.quick else 20_000)
    walls: dict[int, list[float]] = {1: [], args.workers: []}
    outcomes: dict[int, list[str]] = {}
    for _ in range(args.repeat):
        for n in walls:
            wall, result = once(trials, n)
            walls[n].append(wall)
            outcomes[n] = [s.outcome.value for s in result.scores]
    one, many = statistics.median(walls[1]), statistics.median(walls[args.workers])
    print(
        f"contamination, {trials:,} trials in-process, median of {args.repeat}, {cpu_count()} cores"
    )
    print(f"  1 process:   {one:7.2f} s  {trials / one:8.0f} trials/s")
    print(f"  {args.workers} workers:   {many:7.2f} s  {trials / many:8.0f} trials/s")
    print(f"  speed-up: {one / many:.2f}x (target >= 1.7x on 2 cores)")
    print(f"  same per-trial outcomes: {outcomes[1] == outcomes[args.workers]}")


if __name__ == "__main__":
    main()
