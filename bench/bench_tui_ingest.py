"""TUI ingest: can the TUI keep up with 2,000 events/s, and how late does it show them?

The input is real traffic: a recorded in-process run of the contamination scenario
(messages and agent telemetry, in recorded order) is re-stamped with fresh ids, trial
numbers and per-sender seqs and repeated until it lasts the whole measurement. A paced
source hands the envelopes to the app's channel at a fixed rate (on an absolute
schedule, so it does not drift), exactly where a bus subscription would. The app runs
headless (`App.run_test`) at a given terminal size with its real timer (drain every
50 ms, one refresh per batch).

Latency of an event = from its arrival in the channel (`sink`) to the end of the
screen refresh that first renders the batch it was applied in (`call_after_refresh`
after the batch's views are updated). Reported per rate and size: the rate achieved,
p50/p95/p99/max latency, its ratio to the tick, the batches per second and their mean
size, the share of wall time the tick (drain + view updates) takes, and whether the
channel was empty within a second of the last event. Target: at 2,000 events/s the
backlog stays empty and p95 < 150 ms (three ticks).

    python bench/bench_tui_ingest.py [--quick]
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from _util import parse_args, quiet_logs, row, temp_db, verdict

from errorflow.bus.transport import InProcessBus
from errorflow.protocol.envelope import Envelope, Kind
from errorflow.runtime.runner import RunOptions, run_scenario
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import load
from errorflow.scenario.overrides import with_settings
from errorflow.scenario.spec.model import Scenario
from errorflow.tui.app import TICK_S, ErrorflowApp
from errorflow.tui.session import Session
from errorflow.tui.sources import (
    BusHolder,
    Sink,
    Source,
    stored_envelopes,
)

TARGET_RATE = 2_000
TARGET_P95_S = 0.150
RUN_ID = "bench-tui"


def template(db: Path, s: Scenario) -> list[Envelope]:
    """One recorded run's task/result messages and agent events (no control, no runner
    labels: those are per run and would point at ids of the original)."""
    asyncio.run(run_scenario(s, RunOptions(bus=InProcessBus(), db_path=db, run_id="tpl")))
    out = []
    for _, text in stored_envelopes(db, "tpl"):
        env = Envelope.model_validate_json(text)
        if env.kind is Kind.CONTROL or (env.sender == "runner" and env.kind is Kind.EVENT):
            continue
        out.append(env)
    return out


def synthesize(tpl: list[Envelope], trials: int, count: int) -> list[Envelope]:
    """`count` envelopes: copies of the template with fresh ids, trials and seqs."""
    out: list[Envelope] = []
    seqs: dict[str, int] = {}
    copy = 0
    while len(out) < count:
        ids = {e.id: uuid.uuid4().hex for e in tpl}
        for e in tpl:
            seq = seqs.get(e.sender, 0)
            seqs[e.sender] = seq + 1
            out.append(
                e.model_copy(
                    update={
                        "id": ids[e.id],
                        "run_id": RUN_ID,
                        "trial": e.trial + copy * trials,
                        "seq": seq,
                        "derived_from": [ids.get(d, d) for d in e.derived_from],
                    }
                )
            )
        copy += 1
    return out[:count]


@dataclass
class Paced:
    """Hands `envs` to the sink at `rate` per second on an absolute schedule."""

    envs: list[Envelope]
    rate: float
    scenario: Scenario
    run_id: str = RUN_ID
    last_sent: float = 0.0

    async def run(self, sink: Sink) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i, env in enumerate(self.envs):
            due = start + i / self.rate
            ahead = due - loop.time()
            if ahead > 0.002:  # sleep in 2 ms steps; everything due meanwhile goes at once
                await asyncio.sleep(ahead)
            sink(env)
        self.last_sent = time.perf_counter()
        await asyncio.sleep(3600)  # a live source stays subscribed


class PacedSession(Session):
    paced: Paced | None = None

    def first(self) -> Source:
        assert self.paced is not None
        return self.paced


class TimedApp(ErrorflowApp):
    tick_seconds = 0.0
    ticks = 0

    def _tick(self) -> None:
        t0 = time.perf_counter()
        super()._tick()
        self.tick_seconds += time.perf_counter() - t0
        self.ticks += 1


@dataclass
class Result:
    rate: float
    size: tuple[int, int]
    sent: int
    achieved: float
    latencies: list[float]
    batches: int
    tick_share: float
    drained_after_s: float | None


async def measure(s: Scenario, envs: list[Envelope], rate: float, size: tuple[int, int]) -> Result:
    latencies: list[float] = []
    batches = 0

    def probe(arrivals: list[float], rendered: float) -> None:
        nonlocal batches
        batches += 1
        latencies.extend(rendered - a for a in arrivals)

    paced = Paced(envs, rate, s)
    session = PacedSession("live", BusHolder(bus=InProcessBus()), Path("unused.db"), s)
    session.paced = paced
    app = TimedApp(session, probe=probe)
    async with app.run_test(size=size) as pilot:
        started = time.perf_counter()
        while paced.last_sent == 0.0:
            await pilot.pause(0.05)
        sent_s = paced.last_sent - started
        drained: float | None = None
        deadline = time.perf_counter() + 5
        while time.perf_counter() < deadline:
            if not app.channel.pending and len(latencies) == len(envs):
                drained = time.perf_counter() - paced.last_sent
                break
            await pilot.pause(0.01)
        wall = time.perf_counter() - started
        share = app.tick_seconds / wall
    return Result(rate, size, len(envs), len(envs) / sent_s, latencies, batches, share, drained)


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[int(q * 1000) - 1] if len(values) > 1 else 0.0


def report(r: Result) -> bool:
    lat = r.latencies
    p50, p95, p99 = pct(lat, 0.5), pct(lat, 0.95), pct(lat, 0.99)
    kept_up = r.drained_after_s is not None and r.drained_after_s < 1.0
    ok = kept_up and p95 < TARGET_P95_S
    w, h = r.size
    print(f"\n rate {r.rate:,.0f}/s at {w}x{h}: {r.sent:,} events")
    ratio = f"({r.achieved / r.rate:.2f}× target)"
    print(row("achieved input rate", f"{r.achieved:,.0f}/s", ratio))
    print(
        row(
            "latency p50 / p95 / p99 / max",
            f"{p50 * 1e3:.1f} / {p95 * 1e3:.1f} / {p99 * 1e3:.1f} / {max(lat) * 1e3:.1f} ms",
        )
    )
    print(row("p95 / tick", f"{p95 / TICK_S:.2f}× ({TICK_S * 1e3:.0f} ms tick)"))
    print(row("batches rendered", f"{r.batches}", f"mean {len(lat) / max(1, r.batches):.0f} ev"))
    print(row("tick time / wall time", f"{r.tick_share:.1%}"))
    drained = f"{r.drained_after_s * 1e3:.0f} ms" if r.drained_after_s is not None else "never"
    print(row("backlog empty after last event", drained))
    print(row("verdict (kept up, p95 < 150 ms)", verdict(ok)))
    return ok


def main() -> None:
    args = parse_args(__doc__)
    quiet_logs()
    seconds = 4 if args.quick else 10
    s = with_settings(load(resolve("contamination")), trials=50)
    with temp_db() as db:
        tpl = template(db, s)
    print(f"template: {len(tpl)} envelopes per {s.trials} trials "
          f"({sum(e.kind is Kind.EVENT for e in tpl)} events)")  # fmt: skip
    bench_s = with_settings(s, trials=10**5)  # the model counts trials up to this
    results = []
    for rate in (TARGET_RATE, TARGET_RATE * 2.5):
        envs = synthesize(tpl, s.trials, int(rate * seconds))
        for size in ((80, 24), (160, 48)):
            results.append(asyncio.run(measure(bench_s, envs, rate, size)))
            report(results[-1])
    at_target = [r for r in results if r.rate == TARGET_RATE]
    p95s = [pct(r.latencies, 0.95) for r in at_target]
    print(f"\nsummary: at {TARGET_RATE:,}/s, worst p95 {max(p95s) * 1e3:.1f} ms = "
          f"{max(p95s) / TARGET_P95_S:.2f}× the 150 ms target")  # fmt: skip


if __name__ == "__main__":
    main()
