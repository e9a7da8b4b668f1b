"""Flat memory: peak RSS of a small and a large run of `contamination` (everything
recorded to SQLite, `keep_messages=False` as the CLI passes), and their ratio (issue 19:
<= 1.2x from 10,000 to 100,000 trials, in-process and on Mosquitto). In-process unless
`--broker mqtt://HOST:PORT` names a broker (runner, agents and recorder then each have
their own session on it, as `errorflow run --broker URL --workers 1` does).

Each run is a child process of its own (its peak is its own: `ru_maxrss`), which also
prints RSS as the trials complete. `--tree DIR` runs the children on another source tree
as well (the code before a change: `git archive HEAD | tar -x -C DIR`), interleaved with
this one's, so before and after are measured in the same run.

    python bench/bench_memory.py [--quick] [--sizes 10000,100000] [--tree DIR] [--broker URL]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def child(trials: int, broker: str | None) -> None:
    """One run, in this process; prints one JSON line."""
    import asyncio
    import tempfile

    from errorflow.bus.transport import InProcessBus
    from errorflow.bus.url import parse_broker_url
    from errorflow.runtime.runner import RunOptions, run_scenario
    from errorflow.scenario.bundled import resolve
    from errorflow.scenario.loader import load
    from errorflow.scenario.overrides import apply

    s = apply(load(resolve("contamination")), {"trials": trials})
    samples: list[tuple[int, float]] = []
    every = max(1, trials // 10)

    done = [0]

    def on_trial(score: object) -> None:
        done[0] += 1
        if done[0] % every == 0:
            samples.append((done[0], round(rss_mb(), 1)))

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="errorflow-bench-mem-") as tmp:
        options = RunOptions(
            bus=None if broker else InProcessBus(),
            broker=parse_broker_url(broker) if broker else None,
            db_path=Path(tmp) / "m.db",
            keep_messages=False,
            on_trial=on_trial,
        )
        asyncio.run(run_scenario(s, options))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wall = round(time.perf_counter() - started, 1)
    print(json.dumps({"trials": trials, "peak_mb": round(peak, 1), "wall_s": wall,
                      "rss": samples}))  # fmt: skip


def measure(tree: Path | None, trials: int, broker: str | None) -> dict[str, object]:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    proc = subprocess.run(
        [sys.executable, str(HERE / "bench_memory.py"), "--child", str(trials)]
        + (["--child-tree", str(tree)] if tree else [])
        + (["--broker", broker] if broker else []),
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    import argparse

    p = argparse.ArgumentParser(description="peak RSS at a small and a large run")
    p.add_argument("--quick", action="store_true", help="2,000 and 10,000 trials")
    p.add_argument("--sizes", help="two trial counts, e.g. 10000,100000")
    p.add_argument("--tree", type=Path, help="also run on this source tree (before)")
    p.add_argument("--broker", help="run on this MQTT broker (mqtt://HOST:PORT), not in-process")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--child-tree", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        if args.child_tree:
            sys.path.insert(0, str(args.child_tree))
        child(args.child, args.broker)
        return
    small, large = (2_000, 10_000) if args.quick else (10_000, 100_000)
    if args.sizes:
        small, large = (int(x) for x in args.sizes.split(","))
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.tree:
        trees.insert(0, (f"before ({args.tree})", args.tree.resolve()))
    where = f"on {args.broker}" if args.broker else "in-process"
    print(f"contamination {where}, peak RSS: {small:,} vs {large:,} trials")
    for label, tree in trees:
        a, b = measure(tree, small, args.broker), measure(tree, large, args.broker)
        ratio = float(b["peak_mb"]) / float(a["peak_mb"])  # type: ignore[arg-type]
        print(f"  {label}: {a['peak_mb']} MB ({a['wall_s']} s) -> {b['peak_mb']} MB "
              f"({b['wall_s']} s): {ratio:.2f}x (target <= 1.2x)")  # fmt: skip
        print(f"    RSS as trials complete ({large:,}): {b['rss']}")


if __name__ == "__main__":
    main()
