"""`errorflow export ID --format FORMAT [-o FILE]`: a stored run (or a group: a paired
comparison, a sweep) written in another form.

Adding a format is one function and one entry in `FORMATS`: the function takes an
`ExportSource` (the store, the id as resolved, its runs, the command's options) and
returns the document's text; the entry names it, says what it is, and may add options
of its own to the command (`cassette` adds `--traffic`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from errorflow.bus.url import URLError, check_http_url
from errorflow.cli import trace_exports
from errorflow.cli.args import db_arg
from errorflow.cli.command_table import summary
from errorflow.cli.commands.store import stored_id
from errorflow.cli.console import say
from errorflow.cli.errors import EXIT_OK, UsageError
from errorflow.cli.paths import check_directory, path_arg, write_output
from errorflow.core.regular_file import FileRefused, regular_stat
from errorflow.models.cassette import (
    MAX_CASSETTE_BYTES,
    RecordedRun,
    RunWindow,
    cassette_document,
)
from errorflow.models.exchange_store import SUFFIX, read_records, traffic_dir_for
from errorflow.store.readers import StoredRun, get_run, group_runs
from errorflow.store.run_ids import StoredId


@dataclass(frozen=True)
class ExportSource:
    db: Path
    found: StoredId  # what the id named: a run, or a group
    runs: list[StoredRun]  # the run, or the group's runs in the order they ran
    args: argparse.Namespace  # the command's options (a format reads its own)


Exporter = Callable[[ExportSource], str]


@dataclass(frozen=True)
class ExportFormat:
    write: Exporter
    help: str
    options: Callable[[argparse.ArgumentParser], None] | None = None


# -- cassette: the model traffic, for --backend replay:FILE ----------------------------


def _recorded(run: StoredRun) -> RecordedRun:
    return {
        "run_id": run["run_id"],
        "scenario": run["scenario"],
        "seed": run["seed"],
        "trials": run["trials"],
        "propagation": run["propagation"],
        "label": run["label"],
        "scenario_sha": run["scenario_sha"] or "",
    }


def export_cassette(source: ExportSource) -> str:
    directory = _traffic(source)
    windows = [RunWindow(_recorded(r), r["started"], r["finished"]) for r in source.runs]
    doc = cassette_document(windows, list(read_records(directory)))
    if not doc["exchanges"]:
        raise UsageError(
            f"no model traffic of {source.found.kind} {source.found.id} in {directory} "
            "(only runs that call a real model, or replay one, log it)",
            where="--format cassette",
        )
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def _traffic(source: ExportSource) -> Path:
    """The traffic log to read: a directory of regular files a cassette can hold (a FIFO
    or a device among them would hang or flood the export; each is looked at first)."""
    given = source.args.traffic
    directory = check_directory(given, "--traffic") if given else traffic_dir_for(source.db)
    for entry in sorted(directory.glob(f"*{SUFFIX}")) if directory.is_dir() else ():
        try:
            regular_stat(entry, MAX_CASSETTE_BYTES)
        except FileRefused as exc:
            raise UsageError(f"{entry.name}: {exc}", where=f"--traffic {directory}") from None
    return directory


def _cassette_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--traffic",
        type=path_arg,
        metavar="DIR",
        help="the traffic log to read (default: the store's, DB.traffic next to --db)",
    )


def otlp_url(text: str) -> str:
    """An argparse type: an OTLP/HTTP receiver's URL, checked before any trace is built."""
    try:
        check_http_url(text)
    except URLError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _otlp_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--otlp",
        type=otlp_url,
        metavar="URL",
        help="send every trial as an OpenTelemetry trace to this OTLP/HTTP receiver "
        "(http://HOST:4318); no --format needed. Headers (a Langfuse key) come from "
        "OTEL_EXPORTER_OTLP_HEADERS",
    )
    span_time_option(sp)


def span_time_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--span-time",
        choices=["wall", "sim"],
        default=None,  # wall (`span_time`); None tells an option given for nothing
        help="with --otlp (or --format otlp-json): span times from the agents' wall "
        "clocks (default) or the simulated clock: a retried call's backoff and a 30 s "
        "timeout then show as they were simulated",
    )


def span_time(args: argparse.Namespace) -> str:
    return str(args.span_time or "wall")


FORMATS: dict[str, ExportFormat] = {
    "cassette": ExportFormat(
        export_cassette,
        "the run's model traffic, redacted, to replay with --backend replay:FILE",
        _cassette_options,
    ),
    # Built from trial traces (errorflow.cli.trace_exports).
    "who-when": ExportFormat(
        lambda s: trace_exports.who_when_jsonl(s.db, s.runs),
        "each failed trial in the Who&When layout, with its ground-truth mistake agent "
        "and step (-o DIR: one TRIAL.json each; stdout: JSON Lines)",
    ),
    "otlp-json": ExportFormat(
        lambda s: trace_exports.otlp_json_lines(s.db, s.runs, span_time(s.args)),
        "each trial as an OpenTelemetry trace, OTLP/JSON, a line each (needs the otel extra)",
        _otlp_options,
    ),
}


# -- the command ------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    found = stored_id(args.db, args.id)
    db = Path(args.db)
    if found.kind == "group":
        runs = group_runs(db, found.id)
    else:
        run = get_run(db, found.id)
        runs = [run] if run is not None else []
    _used_options(args)
    baselines = [r["run_id"] for r in runs if (r["label"] or "").endswith(":baseline")]
    if baselines and (args.otlp or args.format == "otlp-json"):
        say(
            f"{len(baselines)} of the group's {len(runs)} runs are fault-free baselines; "
            f"their traces are included (errorflow.run_id {', '.join(baselines[:3])}"
            f"{', ...' if len(baselines) > 3 else ''})"
        )
    if args.otlp:  # a receiver, not a file
        say(trace_exports.send_otlp(db, runs, args.otlp, span_time(args)))
        return EXIT_OK
    if args.format is None:
        raise UsageError("say what to write: --format FORMAT, or --otlp URL", where="export")
    if args.format == "who-when" and args.output:  # a directory, a file per trial
        say(trace_exports.save_who_when(db, runs, Path(args.output)))
        return EXIT_OK
    text = FORMATS[args.format].write(ExportSource(db, found, runs, args))
    if args.output:
        write_output(args.output, text, "-o")
        say(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _used_options(args: argparse.Namespace) -> None:
    """Refuse an option the export asked for would not use (it was ignored)."""
    if args.otlp and args.format:
        raise UsageError(
            f"--otlp sends the traces to a receiver and --format {args.format} writes "
            "them: give one", where="export"
        )  # fmt: skip
    if args.span_time is not None and not (args.otlp or args.format == "otlp-json"):
        raise UsageError("only --otlp and --format otlp-json have span times", where="--span-time")
    if args.traffic is not None and args.format != "cassette":
        raise UsageError("only --format cassette reads the traffic log", where="--traffic")


def add_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    listed = "; ".join(f"{name}: {f.help}" for name, f in FORMATS.items())
    e = sub.add_parser(
        "export",
        help=summary("export"),
        description=f"Write a stored run, or a group of runs, in another format ({listed}).",
    )
    e.add_argument("id", metavar="ID", help="run or group id (a unique prefix is enough)")
    e.add_argument("--format", choices=sorted(FORMATS), help="what to write")
    e.add_argument(
        "-o", "--output", type=path_arg, metavar="PATH", help="write to PATH (default: stdout)"
    )
    db_arg(e)
    for fmt in FORMATS.values():
        if fmt.options is not None:
            fmt.options(e)
    e.set_defaults(func=cmd_export)
