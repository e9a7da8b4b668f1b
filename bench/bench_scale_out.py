"""Scale-out: a fan-in scenario as one `errorflow agent` process per agent, on Mosquitto,
against the same scenario with every agent in one process.

Scenario: bench/fan_in.yaml (researchers -> writer -> reviewer, the reviewer may send
the report back to the writer once), with 1, 2, 4 and 6 researchers (the smaller ones
drop researchers from the file). Per size, two runs on one Mosquitto subprocess:

- one process:    `errorflow run SCEN --broker URL` (agents are tasks of the runner)
- multi-process:  `errorflow run SCEN --broker URL --external-agents --run-id ID` plus
                  `errorflow agent SCEN --name N --broker URL --run ID` per agent
                  (researchers + writer + reviewer: 3 to 8 processes)

Throughput is trials / (time of the last result to the runner - time of the first
task), read from the recorded run (the `received` column), so process start-up and
the presence handshake are not counted. Reported: trials/s of each, multi/one ratio,
and how each grows with the number of researchers (work per trial grows with them).
All commands go through `python -m errorflow` with this interpreter.

    python bench/bench_scale_out.py [--quick]
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from _util import BENCH_DIR, cpu_count, mosquitto, parse_args, quiet_logs, row, stop_process

from errorflow.bus.url import BrokerURL

CLI = [sys.executable, "-m", "errorflow"]


def variant(researchers: int, trials: int, tmp: Path) -> Path:
    doc = yaml.safe_load((BENCH_DIR / "fan_in.yaml").read_text())
    keep = {f"r{i}" for i in range(1, researchers + 1)}
    doc["agents"] = {
        n: a
        for n, a in doc["agents"].items()
        if not n.startswith("r") or n in keep or n == "reviewer"
    }
    doc["trials"] = trials
    path = tmp / f"fan_in_{researchers}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def trial_window(db: Path, run_id: str) -> tuple[float, int, int]:
    conn = sqlite3.connect(db)
    try:
        first, last = conn.execute(
            "SELECT min(CASE WHEN sender = 'runner' AND kind = 'task' THEN received END), "
            "max(CASE WHEN recipient = 'runner' AND kind = 'result' THEN received END) "
            "FROM messages WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        published = conn.execute(
            "SELECT (SELECT count(*) FROM messages WHERE run_id = ?) + "
            "(SELECT count(*) FROM events WHERE run_id = ?)",
            (run_id, run_id),
        ).fetchone()[0]
        faults = conn.execute(
            "SELECT count(*) FROM trials WHERE run_id = ? AND outcome = 'bus_fault'", (run_id,)
        ).fetchone()[0]
        return float(last - first), int(published), int(faults)
    finally:
        conn.close()


def run_one(scen: Path, url: BrokerURL, db: Path, trials: int) -> dict[str, Any]:
    run_id = f"scale-one-{uuid.uuid4().hex[:6]}"
    proc = subprocess.run(
        [
            *CLI,
            "run",
            str(scen),
            "--broker",
            str(url),
            "--run-id",
            run_id,
            "--db",
            str(db),
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"errorflow run failed: {proc.stderr[-2000:]}")
    window, published, faults = trial_window(db, run_id)
    return {
        "trials_s": trials / window,
        "window": window,
        "msgs_per_trial": published / trials,
        "bus_faults": faults,
        "processes": 1,
    }


def run_multi(
    scen: Path, url: BrokerURL, db: Path, trials: int, agents: list[str]
) -> dict[str, Any]:
    run_id = f"scale-multi-{uuid.uuid4().hex[:6]}"
    procs = [
        subprocess.Popen(
            [*CLI, "agent", str(scen), "--name", name, "--broker", str(url), "--run", run_id],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for name in agents
    ]
    try:
        runner = subprocess.run(
            [
                *CLI,
                "run",
                str(scen),
                "--broker",
                str(url),
                "--run-id",
                run_id,
                "--db",
                str(db),
                "--external-agents",
                "--wait",
                "60",
                "--json",
                "-q",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if runner.returncode != 0:
            raise RuntimeError(f"errorflow run --external-agents failed: {runner.stderr[-2000:]}")
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(20)  # agents exit on the runner's stop
    finally:
        for p in procs:
            stop_process(p)
    window, published, faults = trial_window(db, run_id)
    return {
        "trials_s": trials / window,
        "window": window,
        "msgs_per_trial": published / trials,
        "bus_faults": faults,
        "processes": len(agents) + 1,
    }


def main() -> None:
    args = parse_args(__doc__)
    quiet_logs()
    sizes = (1, 6) if args.quick else (1, 2, 4, 6)
    trials = 60 if args.quick else 150
    results: dict[int, dict[str, dict[str, Any]]] = {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="errorflow-scale-") as tmp_s, mosquitto() as url:
        tmp = Path(tmp_s)
        db = tmp / "scale.db"
        for n in sizes:
            scen = variant(n, trials, tmp)
            agents = list(yaml.safe_load(scen.read_text())["agents"])
            # alternate the order per size so load drift does not favour one mode
            modes = ["one", "multi"] if n % 2 else ["multi", "one"]
            results[n] = {}
            for mode in modes:
                if mode == "one":
                    results[n][mode] = run_one(scen, url, db, trials)
                else:
                    results[n][mode] = run_multi(scen, url, db, trials, agents)
    wall = time.perf_counter() - t0
    print(
        f"scale-out: bench/fan_in.yaml on Mosquitto, {trials} trials per run, "
        f"{cpu_count()} CPUs, {wall:.0f} s in all"
    )
    print()
    print(
        row(
            "researchers",
            "one process trials/s   multi-process trials/s (procs)   multi/one   msgs/trial",
            width=12,
        )
    )
    base = results[sizes[0]]
    for n in sizes:
        one, multi = results[n]["one"], results[n]["multi"]
        faults = one["bus_faults"] + multi["bus_faults"]
        print(
            row(
                str(n),
                f"{one['trials_s']:20.1f}   {multi['trials_s']:22.1f} "
                f"({multi['processes']})   {multi['trials_s'] / one['trials_s']:9.2f}   "
                f"{one['msgs_per_trial']:10.1f}" + (f"   bus_fault {faults}" if faults else ""),
                width=12,
            )
        )
    print()
    print("growth with researchers (trials/s relative to 1 researcher; work per trial grows):")
    for mode in ("one", "multi"):
        rel = ", ".join(
            f"{n}: {results[n][mode]['trials_s'] / base[mode]['trials_s']:.2f}" for n in sizes
        )
        msgs = ", ".join(
            f"{n}: {results[n][mode]['trials_s'] * results[n][mode]['msgs_per_trial']:.0f}"
            for n in sizes
        )
        print(f"  {mode:5s} trials/s ratio {rel};  messages/s {msgs}")
    if os.environ.get("BENCH_JSON"):
        print(json.dumps(results))


if __name__ == "__main__":
    main()
