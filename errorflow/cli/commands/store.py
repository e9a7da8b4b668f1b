"""`errorflow report`, `errorflow runs` and `errorflow show`: what the store holds.

Ids are what a user types: a whole run or group id, or a prefix only one of them has
(an ambiguous prefix lists what it could be). Tables fit 80 columns without ever
cutting an id: the ids are what `show`, `report` and `tui --replay` need.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.text import Text

from errorflow.cli.args import db_arg
from errorflow.cli.columns import columns
from errorflow.cli.command_table import summary
from errorflow.cli.console import out, say
from errorflow.cli.errors import (
    EXIT_OK,
    UsageError,
    db_option,
    id_problem,
)
from errorflow.cli.paths import path_arg, write_output
from errorflow.cli.resume import resume_command
from errorflow.core.display import for_terminal
from errorflow.reports.propagation.trace_page import trace_file_name, trace_html
from errorflow.reports.report import ReportError, render
from errorflow.reports.root_cause_view import summary_lines
from errorflow.reports.tables import SHOWN_WHEN_PRESENT, print_run
from errorflow.scoring.root_cause_summary import summarize_causes
from errorflow.scoring.summary import RunJson
from errorflow.store import root_causes
from errorflow.store.readers import (
    RunListing,
    StoredRun,
    get_run,
    group_runs,
    list_runs,
)
from errorflow.store.run_ids import IdLookupError, StoredId, resolve_id
from errorflow.store.trial_store import load_trace, telling_trial


def stored_id(db: str, ident: str, *, groups: bool = True) -> StoredId:
    """The run or group a user's id or prefix names, or a `UsageError` that says why not."""
    try:
        return resolve_id(Path(db), ident, groups=groups)
    except IdLookupError as exc:
        runs = list_runs(Path(db))
        known = {r["run_id"] for r in runs}
        if groups:
            known |= {r["group_id"] for r in runs if r["group_id"]}
        raise id_problem(exc, db, "run or group" if groups else "run", known=known) from None


def cmd_report(args: argparse.Namespace) -> int:
    found = stored_id(args.db, args.id)
    folder = Path(args.output).parent if args.output else None
    if folder is not None and not folder.is_dir():  # said of the report, not of a page beside it
        raise UsageError(f"{folder} is not a directory", where=f"-o {args.output}")
    links = _write_traces(args) if args.format == "html" and args.output else None
    try:
        text = render(Path(args.db), found.id, args.format, links)
    except ReportError as exc:
        raise UsageError(str(exc), where=args.id) from None
    if args.output:
        write_output(args.output, text, "-o")
        say(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _write_traces(args: argparse.Namespace) -> dict[str, str]:
    """Beside an HTML report written to a file, each run's telling trial as its own page
    (errorflow.reports.propagation.trace_page); by run id, the page's name for the report's link."""
    found = stored_id(args.db, args.id)
    db, links = Path(args.db), {}
    run_ids = [r["run_id"] for r in group_runs(db, found.id)] or [found.id]
    for run_id in run_ids:
        trial = telling_trial(db, run_id)
        trace = load_trace(db, run_id, trial) if trial is not None else None
        if trace is None or trace.outcome not in ("contaminated", "contained"):
            continue
        name = trace_file_name(run_id, trace.trial)
        write_output(str(Path(args.output).parent / name), trace_html(trace), "-o")
        links[run_id] = name
    return links


# -- runs ---------------------------------------------------------------------------------


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else ""


RUN_COLUMNS = ("run id", "group", "scenario", "propagation", "trials", "seed", "status", "started")


def runs_lines(rows: list[RunListing], width: int) -> list[str]:
    """The listing of `errorflow runs`, fitted to `width` (ids whole, on one line)."""
    cells = [
        [
            r["run_id"],
            r["group_id"] or "–",
            r["scenario"],
            r["propagation"],
            str(r["trials"]),
            str(r["seed"]),
            r["status"],
            _when(r["started"]),
        ]
        for r in rows
    ]
    started = len("2026-12-01")  # wraps at the space between date and time
    return columns(RUN_COLUMNS, cells, width, right=frozenset({4, 5}), floors={7: started})


def cmd_runs(args: argparse.Namespace) -> int:
    rows = list_runs(Path(args.db))
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    out.print(Text(for_terminal(f"Runs in {args.db} (newest first)"), "bold"), highlight=False)
    for line in runs_lines(rows, out.width):
        out.print(Text(line), highlight=False, soft_wrap=True)
    return EXIT_OK


# -- show ---------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    found = stored_id(args.db, args.run_id)
    if found.kind == "group":
        runs = group_runs(Path(args.db), found.id)
        if args.json:
            print(json.dumps({"group_id": found.id, "runs": runs}, indent=2))
        else:
            for line in group_lines(found.id, runs, args.db, out.width):
                out.print(Text(for_terminal(line)), highlight=False, soft_wrap=True)
        return EXIT_OK
    run = get_run(Path(args.db), found.id)
    assert run is not None  # resolved just now
    causes = summarize_causes(root_causes.load(Path(args.db), run["run_id"]).values())
    if args.json:
        print(json.dumps({**run, "root_causes": causes}, indent=2))
        return EXIT_OK
    for fact in run_lines(run, args.db):
        out.print(fact, highlight=False)
    if run["summary"]:
        print_run(out, stored_run_json(run))
    for line in summary_lines(causes, out.width, run["run_id"]):
        out.print(Text(for_terminal(line, limit=None)), highlight=False, soft_wrap=True)
    return EXIT_OK


def _ended(status: str) -> str:
    """What the run's end time says: it finished, or it stopped (an interrupted run)."""
    return "finished" if status in ("finished", "running") else "stopped"


def run_lines(run: StoredRun, db: str) -> list[Text]:
    """A stored run's identity, state and row counts, a fact a line (what the store
    holds is shown with its control characters made visible)."""
    c = run["counts"]
    took = f" ({run['finished'] - run['started']:.1f}s)" if run["finished"] else ""
    lines = [
        Text.assemble(("run ", "bold"), for_terminal(run["run_id"]), "  ", _status(run["status"])),
        Text(
            for_terminal(
                f"scenario {run['scenario']} · seed {run['seed']} · {run['trials']} trials · "
                f"propagation {run['propagation']}"
            )
        ),
        Text(
            f"started {_when(run['started'])} · {_ended(run['status'])} "
            f"{_when(run['finished']) or '–'}{took}"
        ),
        Text(
            f"stored: {c['messages']} messages, {c['events']} events, {c['rejects']} rejected, "
            f"{c['trials']} trial outcomes"
        ),
    ]
    if run["group_id"]:
        lines.insert(2, Text(for_terminal(f"group {run['group_id']} (as {run['label'] or '–'})")))
    if run["status"] == "interrupted":
        hint = f"interrupted; resume with: {resume_command(run['run_id'], db)}"
        lines.append(Text(for_terminal(hint)))
    return lines


def _status(status: str) -> Text:
    colour = {"finished": "green", "interrupted": "yellow", "running": "cyan"}.get(status, "")
    return Text(for_terminal(status), style=colour)


GROUP_COLUMNS = ("run id", "as", "status", "success", "contained", "contaminated")


def group_lines(group_id: str, runs: list[StoredRun], db: str, width: int) -> list[str]:
    """A group's runs, one each (outcome counts once finished), and how to report it."""
    first = runs[0]
    outcomes = [r["summary"]["outcomes"] if r["summary"] else {} for r in runs]
    # bus and infra faults as run prints them: a column when some run has any
    shown = [
        *GROUP_COLUMNS[3:],
        *(k for k in SHOWN_WHEN_PRESENT if any(o.get(k) for o in outcomes)),
    ]
    rows = []
    for r, o in zip(runs, outcomes, strict=True):
        counts = [str(o[k]) if k in o else "–" for k in shown]
        rows.append([r["run_id"], r["label"] or "–", r["status"], *counts])
    head = (
        f"group {group_id}: scenario {first['scenario']} · seed {first['seed']} · "
        f"{first['trials']} trials · {len(runs)} runs"
    )
    names = (*GROUP_COLUMNS[:3], *shown)
    table = columns(names, rows, width, right=frozenset(range(3, len(names))))
    return [head, *table, f"full report: errorflow report {group_id}{db_option(db)}"]


def stored_run_json(run: StoredRun) -> RunJson:
    """A stored run as `errorflow run` printed it."""
    summary = run["summary"]
    assert summary is not None
    doc = RunJson(
        run_id=run["run_id"],
        scenario=run["scenario"],
        seed=run["seed"],
        trials=summary["trials"],
        propagation=run["propagation"],
        broker=run["broker"] or "",
        outcomes=summary["outcomes"],
        metrics=summary["metrics"],
        rejects=run["rejects_by_reason"],
    )
    if "services" in summary:
        doc["services"] = summary["services"]
    # what fired where, as the run printed it
    for key in ("bus_faults", "bus_recovery", "agent_faults", "tool_faults", "model_faults"):
        if key in summary:
            doc[key] = summary[key]
    return doc


# -- the parsers --------------------------------------------------------------------------


def add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rp = sub.add_parser(
        "report",
        help=summary("report"),
        description="Report a stored run, or a group of runs (`run --propagation both`, "
        "`sweep`), from the SQLite store: outcomes with 95% Wilson intervals, costs, "
        "amplification against the fault-free baseline, paired differences.",
    )
    rp.add_argument("id", help="run id or group id (a unique prefix is enough)")
    rp.add_argument("--format", choices=["md", "json", "csv", "html"], default="md")
    rp.add_argument("-o", "--output", type=path_arg, help="write to this file instead of stdout")
    db_arg(rp)
    rp.set_defaults(func=cmd_report)


def add_runs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rs = sub.add_parser("runs", help=summary("runs"))
    rs.add_argument("--json", action="store_true")
    db_arg(rs)
    rs.set_defaults(func=cmd_runs)


def add_show(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sh = sub.add_parser("show", help=summary("show"))
    sh.add_argument("run_id", metavar="ID", help="run or group id (a unique prefix is enough)")
    sh.add_argument("--json", action="store_true", help="print it as one JSON object")
    db_arg(sh)
    sh.set_defaults(func=cmd_show)
