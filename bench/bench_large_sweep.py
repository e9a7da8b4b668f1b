"""Large sweep: 10,000 contamination trials, everything recorded to SQLite.

Each configuration runs in its own child process (so peak memory is its own), through
`errorflow.runner.run_scenario` with the recorder writing every message and event:
the in-process transport, and Mosquitto (the faster broker; a subprocess on a free
loopback port). Reported per configuration: wall time, trials/s, peak RSS
(`resource.getrusage(...).ru_maxrss`), RSS sampled as trials complete (to show whether
memory stays bounded or grows with the number of trials), and whether the store holds
every trial, message and event. Targets: <= 60 s and <= 300 MB for 10,000 trials.
The in-process transport is the one the target is judged on when MQTT cannot get there;
both are printed.

Runs use `keep_messages=False`, as the CLI does (the runner drops a trial's envelopes
once it is scored). `--keep-messages` also runs the library default (`keep_messages=True`)
in-process, as a reference for what that costs in memory.

    python bench/bench_large_sweep.py [--quick]   (quick: 1,500 trials, extrapolated)
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _util import (
    broker,
    count_recorded,
    parse_args,
    row,
    run,
    scenario,
    temp_db,
    verdict,
)

from errorflow.bus.transport import InProcessBus
from errorflow.runtime.runner import RunOptions, run_scenario

WALL_TARGET_S = 60.0
MEM_TARGET_MB = 300.0
PAGE = 4096


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


async def child(config: str, trials: int) -> dict[str, Any]:
    keep = config.endswith("+keep_messages")
    transport = config.removesuffix("+keep_messages")
    s = scenario("contamination", trials=trials)
    samples: list[tuple[int, float]] = [(0, rss_mb())]
    done = 0
    step = max(trials // 20, 1)

    def on_trial(_score: Any) -> None:
        nonlocal done
        done += 1
        if done % step == 0:
            samples.append((done, rss_mb()))

    with temp_db() as db:
        start_rss = rss_mb()
        t0 = time.perf_counter()
        if transport == "in-process":
            result = await run_scenario(
                s, RunOptions(bus=InProcessBus(), db_path=db, on_trial=on_trial, keep_messages=keep)
            )
        else:
            async with broker(transport) as url:
                t0 = time.perf_counter()  # broker start-up is not the sweep's
                options = RunOptions(broker=url, db_path=db, on_trial=on_trial, keep_messages=keep)
                result = await run_scenario(s, options)
        wall = time.perf_counter() - t0
        counts = count_recorded(db)
        import sqlite3

        conn = sqlite3.connect(db)
        stored_trials = conn.execute("SELECT count(*) FROM trials").fetchone()[0]
        conn.close()
        db_mb = sum(p.stat().st_size for p in db.parent.iterdir()) / 2**20
    return {
        "transport": config,
        "trials": trials,
        "wall": wall,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "start_mb": start_rss,
        "samples": samples,
        "outcomes": result.outcomes,
        "messages": counts["messages"],
        "events": counts["events"],
        "stored_trials": stored_trials,
        "db_mb": db_mb,
    }


def growth(samples: list[tuple[int, float]]) -> tuple[float, float]:
    """(MB per 1,000 trials over the last three quarters, RSS at a quarter of the run)."""
    n = samples[-1][0]
    quarter = min(samples, key=lambda s: abs(s[0] - n / 4))
    last = samples[-1]
    per_k = (last[1] - quarter[1]) / max(last[0] - quarter[0], 1) * 1000
    return per_k, quarter[1]


def main() -> None:
    args = parse_args(
        __doc__,
        [
            ("--child", {"help": "internal: run one configuration"}),
            ("--trials", {"type": int, "help": "trials (default 10,000)"}),
            (
                "--keep-messages",
                {"action": "store_true", "help": "also in-process, keep_messages=True"},
            ),
        ],
    )
    trials = args.trials or (1500 if args.quick else 10_000)
    if args.child:
        print(json.dumps(run(child(args.child, trials))))
        return
    results = []
    configs = ["in-process", "mosquitto"]
    if args.keep_messages:
        configs.append("in-process+keep_messages")
    for transport in configs:
        proc = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                transport,
                "--trials",
                str(trials),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if proc.returncode != 0:
            print(f"{transport}: child failed\n{proc.stderr[-3000:]}")
            continue
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"large sweep: contamination, {trials} trials, recorded to SQLite (WAL)")
    print()
    print(
        row(
            "configuration",
            "wall s   trials/s   peak RSS MB   RSS@25% MB   growth MB/1k trials"
            "   stored trials/msgs/events   db MB",
            width=30,
        )
    )
    for r in results:
        per_k, q = growth([tuple(s) for s in r["samples"]])  # type: ignore[misc]
        print(
            row(
                r["transport"],
                f"{r['wall']:6.1f}   {r['trials'] / r['wall']:8.1f}   {r['peak_mb']:11.0f}   "
                f"{q:10.0f}   {per_k:19.2f}   "
                f"{r['stored_trials']}/{r['messages']}/{r['events']}   {r['db_mb']:.0f}",
                width=30,
            )
        )
    print()
    for r in results:
        every = max(len(r["samples"]) // 6, 1)
        curve = ", ".join(f"{n}:{mb:.0f}" for n, mb in r["samples"][::every])
        print(
            f"{r['transport']} RSS by trials done (trials:MB): {curve}, "
            f"{r['samples'][-1][0]}:{r['samples'][-1][1]:.0f}; outcomes {r['outcomes']}"
        )
    print()
    # Same seed everywhere: every configuration must store the same trials and events
    # (the most any configuration stored; messages differ by the roll calls).
    events = max((r["events"] for r in results), default=0)
    messages = max((r["messages"] for r in results), default=0)
    for r in results:
        want = (trials, messages, events)
        got = (r["stored_trials"], r["messages"], r["events"])
        if got[0] < want[0] or got[1] < want[1] - 1 or got[2] < want[2]:
            print(
                f"RECORDING LOSS {r['transport']}: stored trials/msgs/events {got}, expected {want}"
            )
    scale = 10_000 / trials
    for r in results:
        wall10k = r["wall"] * scale
        note = "" if scale == 1 else f" (extrapolated from {trials} trials)"
        ok_wall = wall10k <= WALL_TARGET_S
        ok_mem = r["peak_mb"] <= MEM_TARGET_MB
        print(
            f"{r['transport']}: 10,000 trials in {wall10k:.1f} s{note} "
            f"(target <= {WALL_TARGET_S:.0f} s: {wall10k / WALL_TARGET_S:.2f} of budget, "
            f"{verdict(ok_wall)}); peak {r['peak_mb']:.0f} MB "
            f"({r['peak_mb'] / MEM_TARGET_MB:.2f} of {MEM_TARGET_MB:.0f} MB, {verdict(ok_mem)})"
        )


if __name__ == "__main__":
    main()
