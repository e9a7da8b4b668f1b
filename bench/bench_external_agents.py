"""External agents on Mosquitto: N trials of a scenario with every agent its own
`errorflow agent` process, and how many ended `bus_fault` with nothing injected.

One Mosquitto subprocess on a free 127.0.0.1 port; the runner
(`errorflow run SCEN --trials N --broker URL --external-agents --run-id ID`) and one
`errorflow agent SCEN --name NAME --broker URL --run ID` per agent of the scenario, all
with one run key from the environment (ERRORFLOW_RUN_KEY, so no process waits for a key
file). Reported, from the run's store: the outcome counts; the `bus_fault` trials, with
how many of them have their final result to the runner in the store all the same (a
trial delivered but never resolved: the runner's bookkeeping, not the bus); the runner's exit
code; wall time of the runner process (start-up and presence included) and the trial
window (first task to last final result), with trials/s over it. A fault-free scenario
should give 0 `bus_fault`. All commands go through `python -m errorflow` with this
interpreter; to measure another tree, run the script from outside the repository (the
working directory comes first on `-m`'s path) with PYTHONPATH=TREE.

`--outsider-rate R`: a client that is no participant publishes R forged envelopes a
second (QoS 0, unsigned) to the runner's inbox for the whole run; the runner rejects
and stores each: load on its loop, under which the ack of a task it published can be
handled after the results that task set off.

    python bench/bench_external_agents.py [--quick] [--trials N] [--scenario REF]
        [--outsider-rate R]
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from _util import cpu_count, mosquitto, parse_args, quiet_logs, row, scenario, stop_process
from bench_scale_out import trial_window
from paho.mqtt.enums import CallbackAPIVersion

from errorflow.bus.url import BrokerURL
from errorflow.protocol import signing, topics

CLI = [sys.executable, "-m", "errorflow"]
AGENT_EXIT_S = 30.0  # agents leave on the runner's stop
OUTSIDER_TICK_S = 0.01


@contextlib.contextmanager
def outsider(url: BrokerURL, run_id: str, rate: float) -> Iterator[None]:
    """`rate` forged envelopes a second to the runner's inbox until the block ends."""
    if rate <= 0:
        yield
        return
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"outsider-{run_id}")
    client.connect(url.host, url.port)
    client.loop_start()
    forged = json.dumps(
        {"v": 1, "id": "x" * 32, "run_id": run_id, "trial": 0, "seq": 0, "sender": "writer",
         "recipient": topics.RUNNER, "kind": "result", "trace_id": "t", "payload": {"a": "b" * 200}}
    ).encode()  # fmt: skip
    stop = threading.Event()

    def flood() -> None:
        sent, started = 0, time.monotonic()
        while not stop.wait(OUTSIDER_TICK_S):
            due = int((time.monotonic() - started) * rate)
            for _ in range(due - sent):
                client.publish(topics.inbox(run_id, topics.RUNNER), forged, qos=0)
            sent = max(sent, due)

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        client.loop_stop()
        client.disconnect()


def outcomes(db: Path, run_id: str) -> tuple[Counter[str], Counter[str], int, float, int]:
    """Outcome counts, bus_fault reasons, bus_fault trials whose final result is stored,
    the trial window in seconds (first task to last final result), rejects stored."""
    conn = sqlite3.connect(db)
    try:
        counts = Counter(
            dict(
                conn.execute(
                    "SELECT outcome, count(*) FROM trials WHERE run_id = ? GROUP BY outcome",
                    (run_id,),
                ).fetchall()
            )
        )
        reasons = Counter(
            dict(
                conn.execute(
                    "SELECT reason, count(*) FROM trials WHERE run_id = ? AND outcome = "
                    "'bus_fault' GROUP BY reason",
                    (run_id,),
                ).fetchall()
            )
        )
        (delivered,) = conn.execute(
            "SELECT count(*) FROM trials t WHERE t.run_id = ? AND t.outcome = 'bus_fault' "
            "AND EXISTS (SELECT 1 FROM messages m WHERE m.run_id = t.run_id AND "
            "m.trial = t.trial AND m.kind = 'result' AND m.recipient = 'runner')",
            (run_id,),
        ).fetchone()
        window, _, _ = trial_window(db, run_id)
        (rejects,) = conn.execute(
            "SELECT count(*) FROM rejects WHERE run_id = ?", (run_id,)
        ).fetchone()
        return counts, reasons, int(delivered), window, int(rejects)
    finally:
        conn.close()


def run_external(
    ref: str, url: BrokerURL, db: Path, trials: int, timeout_s: float, outsider_rate: float
) -> dict[str, Any]:
    run_id = f"bench-ext-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, signing.KEY_ENV: signing.new_key().hex()}
    broker = ["--broker", str(url)]
    agents = [
        subprocess.Popen(
            [*CLI, "agent", ref, "--name", name, *broker, "--run", run_id],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name in scenario(ref).agents
    ]
    started = time.perf_counter()
    try:
        with outsider(url, run_id, outsider_rate):
            runner = subprocess.run(
                [*CLI, "run", ref, "--trials", str(trials), *broker, "--external-agents",
                 "--run-id", run_id, "--db", str(db), "--wait", "60", "--json", "-q"],
                env=env, capture_output=True, text=True, timeout=timeout_s, check=False,
            )  # fmt: skip
        wall = time.perf_counter() - started
        agent_codes: list[int | None] = []
        for proc in agents:
            try:
                agent_codes.append(proc.wait(AGENT_EXIT_S))
            except subprocess.TimeoutExpired:
                agent_codes.append(None)
    finally:
        for proc in agents:
            stop_process(proc)
    counts, reasons, delivered, window, rejects = outcomes(db, run_id)
    return {
        "run_id": run_id,
        "returncode": runner.returncode,
        "stderr": runner.stderr.strip().splitlines()[-1:] if runner.returncode else [],
        "agent_codes": agent_codes,
        "outcomes": dict(counts),
        "bus_fault": counts["bus_fault"],
        "bus_fault_delivered": delivered,
        "bus_fault_reasons": dict(reasons),
        "wall_s": wall,
        "window_s": window,
        "rejects": rejects,
    }


def main() -> None:
    args = parse_args(
        __doc__,
        [
            ("--trials", {"type": int, "help": "trials (default 10,000; quick 500)"}),
            (
                "--scenario",
                {"default": "contamination", "help": "scenario (default contamination)"},
            ),
            ("--timeout", {"type": float, "default": 3600.0, "help": "runner limit, s (3600)"}),
            ("--outsider-rate", {"type": float, "default": 0.0, "help": "forged msgs/s (0)"}),
        ],
    )
    quiet_logs()
    trials = args.trials or (500 if args.quick else 10_000)
    with tempfile.TemporaryDirectory(prefix="errorflow-ext-") as tmp, mosquitto() as url:
        db = Path(tmp) / "ext.db"
        r = run_external(args.scenario, url, db, trials, args.timeout, args.outsider_rate)
    scored = sum(r["outcomes"].values())
    outsiders = f", an outsider at {args.outsider_rate:g} msg/s" if args.outsider_rate else ""
    print(
        f"{args.scenario}, {trials:,} trials, external agents on Mosquitto{outsiders}, "
        f"{cpu_count()} cores"
    )
    print(row("runner exit code", f"{r['returncode']}  {' '.join(r['stderr'])}"))
    print(row("agent exit codes", ", ".join(str(c) for c in r["agent_codes"])))
    print(row("trials scored", f"{scored:,}"))
    for outcome, n in sorted(r["outcomes"].items()):
        print(row(f"  {outcome}", f"{n:,}"))
    print(
        row("bus_fault", f"{r['bus_fault']:,}  (final result stored: {r['bus_fault_delivered']:,})")
    )
    for reason, n in sorted(r["bus_fault_reasons"].items()):
        print(row(f"  {reason}", f"{n:,}"))
    rate = scored / r["window_s"] if r["window_s"] else 0.0
    print(row("wall time (runner process)", f"{r['wall_s']:.1f} s"))
    print(row("rejects stored (outsider)", f"{r['rejects']:,}"))
    print(row("trial window", f"{r['window_s']:.1f} s  {rate:.0f} trials/s"))
    if os.environ.get("BENCH_JSON"):
        print(json.dumps(r))


if __name__ == "__main__":
    main()
