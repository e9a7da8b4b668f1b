"""`errorflow report`, `errorflow runs` and `errorflow show`: what the store holds."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.table import Table

from errorflow.cli.args import EXIT_OK, UsageError, db_arg
from errorflow.cli.console import err, out
from errorflow.reports.report import ReportError, render
from errorflow.reports.tables import print_run
from errorflow.runtime.store import get_run, list_runs
from errorflow.scoring.summary import RunJson


def cmd_report(args: argparse.Namespace) -> int:
    try:
        text = render(Path(args.db), args.id, args.format)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        err.print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    rows = list_runs(Path(args.db))
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    table = Table(title=f"Runs in {args.db}", title_justify="left")
    for col in ("run id", "scenario", "seed", "trials", "propagation", "status", "started"):
        table.add_column(col)
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["started"]))
        table.add_row(
            r["run_id"],
            r["scenario"],
            str(r["seed"]),
            str(r["trials"]),
            r["propagation"],
            r["status"],
            started,
        )
    out.print(table)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    run = get_run(Path(args.db), args.run_id)
    if run is None:
        raise UsageError(f"no run {args.run_id!r} in {args.db} (see `errorflow runs`)")
    if args.json:
        print(json.dumps(run, indent=2, default=str))
        return EXIT_OK
    out.print(f"status: {run['status']}   stored: {run['counts']}")
    if run.get("summary"):
        print_run(out, _stored_run_json(run))
    return EXIT_OK


def _stored_run_json(run: Mapping[str, Any]) -> RunJson:
    """A stored run as `errorflow run` printed it."""
    summary = run["summary"]
    data = RunJson(
        run_id=run["run_id"],
        scenario=run["scenario"],
        seed=run["seed"],
        trials=summary["trials"],
        propagation=run["propagation"],
        broker=run["broker"],
        outcomes=summary["outcomes"],
        metrics=summary["metrics"],
        rejects=run["rejects_by_reason"],
    )
    if "amplification" in summary:
        data["amplification"] = summary["amplification"]
    return data


def add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rp = sub.add_parser(
        "report",
        help="write a report of a stored run or group (comparison, sweep)",
        description="Report a stored run, or a group of runs (`run --propagation both`, "
        "`sweep`), from the SQLite store: outcomes with 95% Wilson intervals, costs, "
        "amplification against the fault-free baseline, paired differences.",
    )
    rp.add_argument("id", help="run id or group id")
    rp.add_argument("--format", choices=["md", "json", "csv", "html"], default="md")
    rp.add_argument("-o", "--output", help="write to this file instead of stdout")
    db_arg(rp)
    rp.set_defaults(func=cmd_report)


def add_runs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rs = sub.add_parser("runs", help="list stored runs")
    rs.add_argument("--json", action="store_true")
    db_arg(rs)
    rs.set_defaults(func=cmd_runs)


def add_show(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sh = sub.add_parser("show", help="print one stored run")
    sh.add_argument("run_id", help="run id (a unique prefix is enough)")
    sh.add_argument("--json", action="store_true")
    db_arg(sh)
    sh.set_defaults(func=cmd_show)
