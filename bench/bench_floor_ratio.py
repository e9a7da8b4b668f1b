"""errorflow against the lean floor (bench/lean_floor.py), in the same run, on two paths.

Each configuration runs in its own child process, one after the other, in rounds (the
order alternates each round, so a slow spell on the shared machine hits both sides):

- in one process: the floor's in-process bus, and errorflow's `run_scenario` with an
  `InProcessBus`, the recorder storing everything (`keep_messages=False`, as the CLI);
- Mosquitto (a subprocess on a free loopback port) with gmqtt: the floor's gmqtt
  connections, and errorflow with `?client=gmqtt`.

Printed: envelopes per second (every envelope stored, counted in the store), the seconds
the child's event loop sat idle in `select()` (a run held back, not busy: bench/RESULTS.md,
"ninth session"), the ratio errorflow ÷ floor (best round of each), and MQTT's own cost
per envelope (the time per envelope on Mosquitto minus the time in one process).
`--default-path` also times the command a user types, `errorflow run contamination
--trials N`, for N just under and at the worker threshold, against the fastest path with
the same outcomes. `--tree DIR` also
runs errorflow's children on another source tree (a checkout before a change), in the
same rounds, and prints its ratios beside this tree's.
Goals (issue "half of what one lean Python process can do"): ratio >= 0.5 on both paths;
MQTT's cost per envelope <= 1.5x the floor's.

    python bench/bench_floor_ratio.py [--quick] [--trials N] [--rounds R] [--only PATH]
                                      [--default-path] [--tree DIR]
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _util import count_recorded, mosquitto, parse_args, run, scenario, temp_db

CONFIGS = ("floor/in-process", "errorflow/in-process", "floor/mosquitto", "errorflow/mosquitto")


def _timed_waits(loop: asyncio.AbstractEventLoop) -> list[float]:
    """The seconds `loop` waits in `select()` from now (nothing of the run to do: a run
    held back by its store's thread shows here), in a one-item list."""
    waited = [0.0]
    selector = loop._selector  # type: ignore[attr-defined]
    select = selector.select

    def timed(timeout: float | None = None) -> Any:
        t0 = time.perf_counter()
        try:
            return select(timeout)
        finally:
            waited[0] += time.perf_counter() - t0

    selector.select = timed
    return waited


async def child(config: str, trials: int) -> dict[str, Any]:
    import resource

    waited = _timed_waits(asyncio.get_running_loop())
    side, path = config.split("/")
    with temp_db() as db:
        if side == "floor":
            import lean_floor

            if path == "in-process":
                r = await lean_floor.run_in_process(trials, 3, str(db))
            else:
                with mosquitto() as url:
                    r = await lean_floor.run_mosquitto(trials, 3, str(db), url.host, url.port)
            wall, outcomes = r.wall, r.outcomes
            stored = count_recorded(db)
        else:
            from errorflow.bus.transport import InProcessBus
            from errorflow.bus.url import BrokerURL
            from errorflow.runtime.runner import RunOptions, run_scenario

            s = scenario("contamination", trials=trials)
            if path == "in-process":
                options = RunOptions(bus=InProcessBus(), db_path=db, keep_messages=False)
                t0 = time.perf_counter()
                result = await run_scenario(s, options)
            else:
                with mosquitto() as url:
                    gm = BrokerURL(url.host, url.port, client="gmqtt")
                    options = RunOptions(broker=gm, db_path=db, keep_messages=False)
                    t0 = time.perf_counter()
                    result = await run_scenario(s, options)
            wall, outcomes = time.perf_counter() - t0, result.outcomes
            stored = count_recorded(db)
    envelopes = stored["messages"] + stored["events"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "config": config,
        "trials": trials,
        "wall": wall,
        "envelopes": envelopes,
        "outcomes": outcomes,
        "peak_mb": peak,
        "idle_s": waited[0],
    }


def spawn(
    args: list[str], timeout: float = 1200, tree: Path | None = None
) -> dict[str, Any] | None:
    """One child; on `tree`, its own bench script with its package first on the path."""
    here = Path(__file__).resolve()
    script = here if tree is None else tree / "bench" / here.name
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=script.parent,
        env=env,
    )
    if proc.returncode != 0:
        print(f"{args}: child failed\n{proc.stderr[-3000:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ratios(trials: int, rounds: int, only: str | None, tree: Path | None = None) -> None:
    configs = tuple(c for c in CONFIGS if only is None or c.endswith(only))
    if tree is not None:  # "before/...": errorflow's children on the other tree
        configs = tuple(x for c in configs for x in (c, *((f"before/{c.split('/')[1]}",)
                        if c.startswith("errorflow") else ())))  # fmt: skip
    names = CONFIGS + tuple(c for c in configs if c.startswith("before"))
    best: dict[str, dict[str, Any]] = {}
    all_rates: dict[str, list[float]] = {c: [] for c in names}
    for r in range(rounds):
        order = configs if r % 2 == 0 else configs[::-1]
        for config in order:
            other = config.startswith("before")
            child_config = config.replace("before/", "errorflow/")
            res = spawn(["--child", child_config, "--trials", str(trials)],
                        tree=tree if other else None)  # fmt: skip
            if res is None:
                continue
            rate = res["envelopes"] / res["wall"]
            all_rates[config].append(rate)
            if config not in best or rate > best[config]["envelopes"] / best[config]["wall"]:
                best[config] = res
    print(f"contamination, {trials} trials, {rounds} round(s); best round of each side")
    print(
        f"  {'configuration':<24}{'env/s':>9}{'envelopes':>11}{'peak MB':>9}{'idle s':>8}"
        "  all rounds env/s"
    )
    for c in names:
        if c in best:
            b = best[c]
            every = ", ".join(f"{x:.0f}" for x in all_rates[c])
            print(
                f"  {c:<24}{b['envelopes'] / b['wall']:9.0f}{b['envelopes']:11d}"
                f"{b['peak_mb']:9.0f}{b.get('idle_s', float('nan')):8.2f}"
                f"  {every}; outcomes {b['outcomes']}"
            )
    print()
    rate = {c: best[c]["envelopes"] / best[c]["wall"] for c in best}
    for side in ("errorflow", "before"):
        for path in ("in-process", "mosquitto"):
            f, e = rate.get(f"floor/{path}"), rate.get(f"{side}/{path}")
            if f and e:
                print(f"  {path:<12} {side} / floor = {e / f:.2f}  (goal >= 0.50)")
        if all(f"{s}/{p}" in rate for s in ("floor", side) for p in ("in-process", "mosquitto")):
            cost = {
                s: 1e6 / rate[f"{s}/mosquitto"] - 1e6 / rate[f"{s}/in-process"]
                for s in ("floor", side)
            }
            print(
                f"  MQTT's cost per envelope: floor {cost['floor']:.0f} us, {side} "
                f"{cost[side]:.0f} us = {cost[side] / cost['floor']:.2f}x (goal <= 1.5x)"
            )


def _cli_wall(n: int, extra: list[str]) -> tuple[float, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["errorflow", "run", "contamination", "--trials", str(n), "-q", "--json",
             "--db", f"{tmp}/db.sqlite", *extra],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"errorflow run failed: {proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)["outcomes"]


def default_path(trials: list[int], rounds: int) -> None:
    """`errorflow run contamination --trials N` as typed (the default path), against
    every path that gives the same outcomes: one process, two worker processes, and the
    embedded broker's path (`--workers 1` on a broker of its own is not a CLI choice:
    the library's `embedded_broker` option, here the previous default, is timed through
    `bench_end_to_end.py`). Best of `rounds`; goal: default <= 1.3x the fastest."""
    paths = {"default": [], "--workers 1": ["--workers", "1"], "--workers 2": ["--workers", "2"]}
    print("the command a user types: errorflow run contamination --trials N -q --json")
    for n in trials:
        best: dict[str, float] = {}
        outcomes = set()
        for r in range(rounds):
            names = list(paths) if r % 2 == 0 else list(paths)[::-1]
            for name in names:
                wall, out = _cli_wall(n, paths[name])
                best[name] = min(best.get(name, wall), wall)
                outcomes.add(json.dumps(out, sort_keys=True))
        fastest = min(best.values())
        cells = "  ".join(f"{k} {v:6.2f} s" for k, v in best.items())
        same = "same outcomes" if len(outcomes) == 1 else f"OUTCOMES DIFFER: {outcomes}"
        print(f"  --trials {n:<6} {cells}  default / fastest = {best['default'] / fastest:.2f}"
              f"  (goal <= 1.30); {same}")  # fmt: skip


def main() -> None:
    args = parse_args(
        __doc__,
        [
            ("--child", {"help": "internal: run one configuration"}),
            ("--trials", {"type": int, "help": "trials per configuration (default 3,000)"}),
            ("--rounds", {"type": int, "help": "rounds (default 3; quick: 1)"}),
            ("--default-path", {"action": "store_true", "help": "also time the CLI default"}),
            ("--sizes", {"type": int, "nargs": "+", "help": "--default-path trial counts"}),
            ("--only", {"choices": ["in-process", "mosquitto"], "help": "one path only"}),
            ("--tree", {"type": Path, "help": "also run errorflow on this tree (before)"}),
        ],
    )
    trials = args.trials or (1000 if args.quick else 3000)
    if args.child:
        print(json.dumps(run(child(args.child, trials))))
        return
    rounds = args.rounds or (1 if args.quick else 3)
    ratios(trials, rounds, args.only, args.tree)
    if args.default_path:
        print()
        default_path(args.sizes or [200, 1000, 1999, 2000], rounds)


if __name__ == "__main__":
    main()
