"""End to end: `errorflow run contamination --trials N --propagation explicit`, envelopes
stored per second, on every broker path and MQTT client, against the C clients' limit
on the same Mosquitto, in one run (issue #19).

Paths: the embedded amqtt broker on the runner's event loop (`loop`, the path before
#19), on its own loop in a thread (`thread`) or in its own process (`process`), and a
Mosquitto subprocess; each with aiomqtt and gmqtt (ERRORFLOW_EMBEDDED_BROKER,
ERRORFLOW_MQTT_CLIENT); and the in-process bus (no broker, no MQTT client: the same
runner, agents, signing and recorder), the ceiling any broker path can reach: what the
run costs without a bus. Its ratio to the C clients says how much of the gap a faster
bus could close at all; what a broker path adds per envelope (its time less the
in-process time) bounds that path even with a free simulation. Each round runs every
configuration once, in a rotated order; figures are medians over rounds. envelopes/s =
(messages + events stored) / wall time of `run_scenario` (the run, the recorder's last
flush included; interpreter start-up not). The C clients' limit: `mosquitto_pub -q 1 -l`
of N lines of the run's mean envelope size to a `mosquitto_sub -q 1 -C N`, from the
first publish to the last message received. Every configuration must give the same
per-trial outcomes.

    python bench/bench_end_to_end.py [--quick] [--trials N] [--rounds N]
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import statistics
import subprocess
import time
from typing import Any

from _util import (
    count_recorded,
    mosquitto,
    parse_args,
    quiet_logs,
    row,
    scenario,
    temp_db,
    unrecorded,
)

from errorflow.bus.transport import InProcessBus
from errorflow.bus.url import BrokerURL
from errorflow.runtime.runner import RunOptions, run_scenario

#: (broker, embedded mode, client)
CONFIGS = [
    ("embedded", "loop", "aiomqtt"),
    ("embedded", "thread", "aiomqtt"),
    ("embedded", "process", "aiomqtt"),
    ("embedded", "loop", "gmqtt"),
    ("embedded", "process", "gmqtt"),
    ("mosquitto", "-", "aiomqtt"),
    ("mosquitto", "-", "gmqtt"),
    IN_PROCESS := ("in-process", "-", "-"),
]
TOPIC = "errorflow/bench-c/inbox/x"


def once(config: tuple[str, str, str], trials: int, url: BrokerURL) -> dict[str, Any]:
    broker, mode, client = config
    os.environ["ERRORFLOW_EMBEDDED_BROKER"] = mode if mode != "-" else "process"
    os.environ["ERRORFLOW_MQTT_CLIENT"] = client if client != "-" else "aiomqtt"
    s = scenario("contamination", trials=trials, propagation="explicit")
    with temp_db() as db:
        options = RunOptions(
            broker=url if broker == "mosquitto" else None,
            bus=InProcessBus() if broker == "in-process" else None,
            db_path=db,
            keep_messages=False,
        )
        started = time.perf_counter()
        result = asyncio.run(run_scenario(s, options))
        wall = time.perf_counter() - started
        stored = count_recorded(db)
        lost = unrecorded(db)
    envelopes = stored["messages"] + stored["events"]
    return {
        "envelopes": envelopes,
        "env_s": envelopes / wall,
        "per_trial": envelopes / trials,
        "size": stored["bytes"] / max(1, envelopes),
        "lost": lost,
        "outcomes": [sc.outcome.value for sc in result.scores],
    }


def c_clients(url: BrokerURL, n: int, size: int) -> float:
    """msg/s from mosquitto_pub to mosquitto_sub, QoS 1, n messages of `size` bytes."""
    pub, sub = shutil.which("mosquitto_pub"), shutil.which("mosquitto_sub")
    if pub is None or sub is None:
        raise SystemExit("mosquitto_pub/mosquitto_sub missing (apt-get install mosquitto-clients)")
    common = ["-h", url.host, "-p", str(url.port), "-q", "1", "-t", TOPIC]
    reader = subprocess.Popen([sub, *common, "-C", str(n)], stdout=subprocess.DEVNULL)
    time.sleep(0.5)  # subscribed (mosquitto_sub says nothing when it is)
    lines = (b"x" * size + b"\n") * n
    started = time.perf_counter()
    subprocess.run([pub, *common, "-l"], input=lines, check=True, timeout=300)
    reader.wait(300)
    return n / (time.perf_counter() - started)


def main() -> None:
    args = parse_args(
        __doc__,
        [
            ("--trials", {"type": int}),
            ("--rounds", {"type": int}),
            ("--only", {"help": "comma-separated broker/mode/client configurations"}),
        ],
    )
    configs = CONFIGS
    if args.only:
        configs = [c for c in CONFIGS if "/".join(c) in args.only.split(",")]
    trials = args.trials or (500 if args.quick else 2000)
    rounds = args.rounds or (1 if args.quick else 3)
    quiet_logs()
    figures: dict[tuple[str, str, str], list[dict[str, Any]]] = {c: [] for c in configs}
    limits: list[float] = []
    with mosquitto() as url:
        for r in range(rounds):
            order = configs[r % len(configs) :] + configs[: r % len(configs)]
            for config in order:
                figures[config].append(once(config, trials, dataclasses.replace(url)))
                print(
                    f"  round {r + 1} {'/'.join(config)}: "
                    f"{figures[config][-1]['env_s']:.0f} envelopes/s, "
                    f"{figures[config][-1]['envelopes']} stored, "
                    f"{figures[config][-1]['lost']} lost",
                    flush=True,
                )
            size = int(figures[configs[-1]][-1]["size"])
            limits.append(c_clients(url, 20_000, size))
            print(f"  round {r + 1} C clients: {limits[-1]:.0f} msg/s ({size} B)", flush=True)
    limit = statistics.median(limits)
    medians = {c: statistics.median(f["env_s"] for f in runs) for c, runs in figures.items()}
    base, ceiling = medians[configs[0]], medians.get(IN_PROCESS)
    print(
        f"\nend to end, contamination, {trials} trials, --propagation explicit, "
        f"{rounds} round(s), medians; C clients on the same Mosquitto: {limit:.0f} msg/s"
    )
    print(
        row(
            "broker / embedded mode / client",
            f"envelopes/s   ÷ {'/'.join(configs[0]):21s}   ÷ C clients   ÷ in-process"
            "   envelopes/trial",
        )
    )
    reference = figures[configs[0]][0]["outcomes"]
    same = True
    for config, runs in figures.items():
        med = medians[config]
        same = same and all(f["outcomes"] == reference for f in runs)
        of_ceiling = f"{med / ceiling:12.2f}" if ceiling else f"{'-':>12s}"
        print(
            row(
                " / ".join(config),
                f"{med:11.0f}   {med / base:23.2f}   "
                f"{med / limit:11.2f}   {of_ceiling}   {runs[0]['per_trial']:15.1f}",
            )
        )
    if ceiling:
        print(
            f"\nwithout a bus (in-process) the run stores {ceiling:.0f} envelopes/s, "
            f"{ceiling / limit:.2f} of the C clients: a broker path can close at most that "
            "much of the gap; the rest is the run's own CPU per envelope"
        )
        for config in (c for c in configs if c[0] == "mosquitto"):
            # The run is CPU-bound in one process (the broker on another core), so what a
            # broker path adds per envelope is its time less the in-process time: the bus
            # alone, were the simulation, recorder and scoring free, allows 1/that.
            bus_us = 1e6 / medians[config] - 1e6 / ceiling
            if bus_us > 0:
                print(
                    f"{' / '.join(config)}: the bus path adds {bus_us:.0f} µs per envelope;"
                    f" alone it allows {1e6 / bus_us:.0f} envelopes/s, "
                    f"{1e6 / bus_us / limit:.2f} of the C clients"
                )
    print(f"\nper-trial outcomes identical across every configuration and round: {same}")
    stored = {f["envelopes"] for runs in figures.values() for f in runs}
    lost = sum(f["lost"] for runs in figures.values() for f in runs)
    print(
        f"envelopes stored, every configuration and round: {sorted(stored)} (the count"
        " varies with start-up hellos and re-acks; see _util.unrecorded)"
    )
    print(f"envelopes published and not stored (gaps in a sender's seqs), all runs: {lost}")


if __name__ == "__main__":
    main()
