"""Short runs on Mosquitto as it comes (Nagle on: `set_tcp_nodelay false`, its default)
against one with Nagle off, on each MQTT client.

A short run is what a person types most (a few trials to try a scenario), and its wall
time is latency, not throughput: every hop of a trial waits for the one before. With
Nagle on, the broker held each next packet for a client until the client ACKed the
last, which Linux delays up to 40 ms when the client sends nothing back; the clients now
ask for a quick ACK after such a read (`errorflow/bus/quick_ack.py`). Printed: the
median wall time of `run_scenario` (contamination, in this process, a fresh broker per
configuration) for each trial count. Target: the default broker within 1.5x of the
Nagle-off one.

    python bench/bench_short_runs.py [--quick] [--repeat N]
"""

from __future__ import annotations

import statistics
import time

from _util import mosquitto, parse_args, run, scenario, temp_db

from errorflow.bus.url import BrokerURL
from errorflow.runtime.runner import RunOptions, run_scenario


async def _wall(url: BrokerURL, client: str, trials: int) -> float:
    s = scenario("contamination", trials=trials)
    with temp_db() as db:
        options = RunOptions(
            broker=BrokerURL(url.host, url.port, client=client), db_path=db, keep_messages=False
        )
        t0 = time.perf_counter()
        await run_scenario(s, options)
        return time.perf_counter() - t0


async def main() -> None:
    args = parse_args(__doc__, [("--repeat", {"type": int, "default": 5})])
    sizes = (1, 10) if args.quick else (1, 10, 50)
    repeat = 3 if args.quick else args.repeat
    print(f"contamination on Mosquitto, median of {repeat} runs, wall seconds")
    print(f"  {'client':<9}{'trials':>7}{'Nagle on (default)':>20}{'Nagle off':>11}{'ratio':>8}")
    for client in ("gmqtt", "aiomqtt"):
        for trials in sizes:
            walls: dict[bool, float] = {}
            for nodelay in (False, True):
                with mosquitto(nodelay=nodelay) as url:
                    times = [await _wall(url, client, trials) for _ in range(repeat)]
                walls[nodelay] = statistics.median(times)
            ratio = walls[False] / walls[True]
            print(f"  {client:<9}{trials:>7}{walls[False]:>20.3f}{walls[True]:>11.3f}{ratio:>8.2f}")
    print("target: Nagle on within 1.5x of Nagle off")


if __name__ == "__main__":
    run(main())
