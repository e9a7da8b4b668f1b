"""`errorflow trace RUN_ID [--trial N] [--json | --format html -o FILE]`: one trial of a
stored run, looked at whole (the root cause, the provenance tree, the timeline;
errorflow.reports.trace_view; as a self-contained page, errorflow.reports.propagation.trace_page).

Without `--trial`, the first contaminated trial (else the first contained failure) is
shown, and stderr says which one it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.text import Text

from errorflow.cli.args import db_arg, nonneg
from errorflow.cli.command_table import summary
from errorflow.cli.commands.store import stored_id
from errorflow.cli.console import out, say
from errorflow.cli.errors import EXIT_OK, UsageError
from errorflow.cli.paths import path_arg, write_output
from errorflow.core.display import for_terminal
from errorflow.reports.propagation.trace_page import trace_html
from errorflow.reports.trace_view import trace_lines
from errorflow.scoring.trial_trace import to_json
from errorflow.store.trial_store import load_trace, telling_trial


def cmd_trace(args: argparse.Namespace) -> int:
    run_id = stored_id(args.db, args.run_id, groups=False).id
    trial = args.trial
    if trial is None:
        trial = telling_trial(Path(args.db), run_id)
        if trial is None:
            raise UsageError(f"run {run_id} has no scored trial yet", where="--trial")
    trace = load_trace(Path(args.db), run_id, trial)
    if trace is None:
        raise UsageError(f"run {run_id} has no trial {trial} stored", where=f"--trial {trial}")
    if args.trial is None:
        say(f"trial {trial}: the first trial with outcome {trace.outcome} (another: --trial N)")
    fmt = "json" if args.json else args.format
    if fmt != "text" or args.output:
        text = (
            json.dumps(to_json(trace), indent=2, ensure_ascii=False, default=str) + "\n"
            if fmt == "json"
            else trace_html(trace)
            if fmt == "html"
            else "\n".join(trace_lines(trace, 100)) + "\n"
        )
        if args.output:
            write_output(args.output, text, "-o")
            say(f"wrote {args.output}")
        else:
            sys.stdout.write(text)
        return EXIT_OK
    for line in trace_lines(trace, out.width):
        out.print(Text(for_terminal(line, limit=None)), highlight=False, soft_wrap=True)
    return EXIT_OK


def add_trace(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tr = sub.add_parser(
        "trace",
        help=summary("trace"),
        description="One trial of a stored run: the origin of its failure (agent, tool, "
        "step, error class), who swallowed or carried it, every message with its status, "
        "confidence, errors, label and the label's reason, what each model was shown, "
        "and the policy decisions in order.",
    )
    tr.add_argument("run_id", metavar="RUN_ID", help="run id (a unique prefix is enough)")
    tr.add_argument(
        "--trial",
        type=nonneg,
        help="the trial number (default: the first contaminated, else failed, trial)",
    )
    tr.add_argument("--json", action="store_true", help="print all of it as one JSON object")
    tr.add_argument(
        "--format",
        choices=["text", "json", "html"],
        default="text",
        help="text (default), json (as --json), or html: one self-contained page with the "
        "trial's propagation graph",
    )
    tr.add_argument("-o", "--output", type=path_arg, help="write to this file instead of stdout")
    db_arg(tr)
    tr.set_defaults(func=cmd_trace)
