"""Agent-count scaling: cost per recorded envelope from a 2-agent chain to a 16-agent
chain and a 32-wide fan-in, in-process (and on Mosquitto with `--mosquitto`).

Scenarios (built here from bench/fan_in.yaml's world, tools and task):

- chain-2:   researcher -> writer
- chain-16:  researcher -> 14 writers in a row -> writer
- fan-in-32: 32 researchers -> writer -> reviewer (bench/fan_in.yaml widened)

Cost per envelope = the run's steady window (the first task the recorder stored to the
last task, result or event of a trial, by the store's `received` clock: start-up,
presence and shutdown left out) / the task, result and event envelopes stored in it,
everything recorded to SQLite as a run does. Each configuration
is measured `--repeat` times, interleaved, and the median is reported; the ratio to
chain-2 on the same bus is the figure judged (issue 19: <= 1.15x). `linear` is the
in-process router before issue 19 (every connection's patterns matched on every
publish), kept here as the reference: a subclass of `InProcessBus` with the old
`deliver`, passed as the run's bus (nothing is monkeypatched).

    python bench/bench_agent_scaling.py [--quick] [--mosquitto] [--repeat N]
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
import statistics
from typing import Any

import yaml
from _util import BENCH_DIR, mosquitto, parse_args, quiet_logs, row, temp_db

from errorflow.bus.transport import Bus, InProcessBus
from errorflow.bus.url import BrokerURL
from errorflow.protocol.topics import matches
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.loader import validate_data
from errorflow.scenario.spec.model import Scenario

#: Envelopes recorded per measurement (full / --quick).
ENVELOPES, QUICK_ENVELOPES = 40_000, 8_000


class LinearBus(InProcessBus):
    """The in-process router before issue 19: every publish matches every connection's
    patterns (a reference for the indexed router, not used by the package)."""

    async def deliver(self, topic: str, payload: bytes) -> None:
        for conn in list(self._conns):
            if any(matches(topic, p) for p in conn.patterns):
                await conn.queue.put((topic, payload))


def shape(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((BENCH_DIR / "fan_in.yaml").read_text())
    research = {"role": "researcher", "tools": ["search_papers", "query_metric"]}
    if name == "fan-in-32":
        agents = {f"r{i}": {**research, "sends_to": ["writer"]} for i in range(1, 33)}
        agents["writer"] = doc["agents"]["writer"]
        agents["reviewer"] = doc["agents"]["reviewer"]
    else:
        n = int(name.removeprefix("chain-"))
        writers = [f"w{i}" for i in range(1, n - 1)] + ["writer"]
        agents = {"researcher": {**research, "sends_to": [writers[0]]}}
        for here, there in itertools.pairwise(writers):
            agents[here] = {"role": "writer", "sends_to": [there]}
        agents["writer"] = {"role": "writer"}
    doc["agents"], doc["name"] = agents, name
    return doc


def scenario_of(name: str, trials: int) -> Scenario:
    return validate_data({**shape(name), "trials": trials}, name)


async def measure(s: Scenario, bus: Bus | None, url: BrokerURL | None) -> tuple[float, int]:
    """Seconds and envelopes of one run's steady part: from the first task the recorder
    stored to the last envelope of a trial (start-up, presence and shutdown left out)."""
    with temp_db() as db:
        options = RunOptions(bus=bus, broker=url, db_path=db, keep_messages=False)
        await run_scenario(s, options)
        with contextlib.closing(sqlite3.connect(db)) as conn:
            first, last, n = conn.execute(
                "SELECT min(received), max(received), count(*) FROM (SELECT received FROM"
                " messages WHERE kind != 'control' UNION ALL SELECT received FROM events)"
            ).fetchone()
    return last - first, n


def envelopes_per_trial(name: str) -> float:
    s = scenario_of(name, 20)
    _, n = asyncio.run(measure(s, InProcessBus(), None))
    return n / 20


def main() -> None:
    args = parse_args(
        __doc__,
        [
            ("--mosquitto", {"action": "store_true", "help": "also on a Mosquitto subprocess"}),
            ("--repeat", {"type": int, "default": 3, "help": "runs per configuration"}),
        ],
    )
    quiet_logs()
    budget = QUICK_ENVELOPES if args.quick else ENVELOPES
    names = ["chain-2", "chain-16", "fan-in-32"]
    per_trial = {n: envelopes_per_trial(n) for n in names}
    trials = {n: max(20, round(budget / per_trial[n])) for n in names}
    buses = ["in-process", "linear"] + (["mosquitto"] if args.mosquitto else [])
    costs: dict[tuple[str, str], list[float]] = {}
    with mosquitto() if args.mosquitto else contextlib.nullcontext() as url:
        for _ in range(args.repeat):
            for name in names:
                s = scenario_of(name, trials[name])
                for kind in buses:
                    bus = {"in-process": InProcessBus, "linear": LinearBus}.get(kind)
                    wall, n = asyncio.run(
                        measure(s, bus() if bus else None, url if bus is None else None)
                    )
                    costs.setdefault((kind, name), []).append(wall / n * 1e6)
    print(f"cost per recorded envelope (median of {args.repeat}), envelopes per run ~{budget:,}")
    print(row("bus / scenario", *(f"{n:>22}" for n in names), width=12))
    for kind in buses:
        base = statistics.median(costs[(kind, "chain-2")])
        cells = []
        for name in names:
            us = statistics.median(costs[(kind, name)])
            cells.append(f"{us:8.1f} us {us / base:5.2f}x".rjust(22))
        print(row(kind, *cells, width=12))
    print("  envelopes/trial: " + ", ".join(f"{n} {per_trial[n]:.1f}" for n in names))
    print("  trials/run: " + ", ".join(f"{n} {trials[n]}" for n in names))
    worst = max(statistics.median(costs[("in-process", n)]) for n in names) / statistics.median(
        costs[("in-process", "chain-2")]
    )
    print(f"  in-process, worst / chain-2: {worst:.2f}x (target <= 1.15x)")


if __name__ == "__main__":
    main()
