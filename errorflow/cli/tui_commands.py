"""`errorflow tui` and `errorflow serve`: the command-line entry points of the TUI.

`add_commands` registers both on the main parser (errorflow/cli/main.py); each returns an
exit code: 0 ok, 1 a runtime failure, 2 bad input, with one line on stderr.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from errorflow.cli.args import nonneg, nonneg_float, port, positive
from errorflow.cli.errors import EXIT_OK, RunFailure, UsageError
from errorflow.cli.preflight import broker_of, free_port
from errorflow.cli.run_keys import observer_key
from errorflow.cli.scenario_input import RunSettings, scenario_from
from errorflow.cli.store_commands import stored_id
from errorflow.runtime.store import DEFAULT_DB
from errorflow.scenario.model import Scenario
from errorflow.tui.session import Session
from errorflow.tui.sources import BusHolder, find_run

SERVE_HOST = "127.0.0.1"  # the browser UI can start runs: never on a public interface


class BadInput(UsageError):
    """Exit code 2 with a one-line explanation."""


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    t = sub.add_parser(
        "tui",
        help="watch a run live in a terminal UI (start one, attach to one, or replay one)",
        description="Start SCENARIO and watch it live; or --attach RUN_ID --broker URL to "
        "watch a run another process drives; or --replay RUN_ID to play a stored run back.",
    )
    t.add_argument("scenario", nargs="?", help="scenario file or bundled scenario name")
    _run_args(t)
    t.add_argument("--attach", metavar="RUN_ID", help="watch this run on --broker")
    t.add_argument(
        "--replay",
        metavar="RUN_ID",
        help="replay this stored run from --db (a unique prefix is enough)",
    )
    t.add_argument(
        "--key-file",
        metavar="PATH",
        help="--attach: the run key, to verify what is shown (default: $ERRORFLOW_RUN_KEY)",
    )
    t.add_argument(
        "--speed", type=nonneg_float, default=1.0, metavar="X",
        help="replay speed: X times real time, 0 = at once (default: 1)",
    )  # fmt: skip
    t.set_defaults(func=cmd_tui)

    s = sub.add_parser(
        "serve",
        help="serve the TUI in a browser (textual-serve, on 127.0.0.1)",
        description="Serve `errorflow tui SCENARIO` in a browser through textual-serve. "
        "Every browser tab starts its own run.",
    )
    s.add_argument("scenario", help="scenario file or bundled scenario name")
    _run_args(s)
    s.add_argument("--port", type=port, default=8000, help="port (default: 8000)")
    s.set_defaults(func=cmd_serve)


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trials", type=positive, help="number of trials (default: the scenario's)")
    p.add_argument("--seed", type=nonneg, help="seed (default: the scenario's)")
    p.add_argument("--propagation", choices=["explicit", "implicit"])
    p.add_argument("--broker", metavar="URL", help="mqtt://HOST:PORT (default: embedded)")
    p.add_argument("--db", default=str(DEFAULT_DB), help=f"SQLite file (default: {DEFAULT_DB})")


def build_session(args: argparse.Namespace) -> Session:
    """The session the arguments describe, or BadInput."""
    if args.attach and args.replay:
        raise BadInput("give --attach or --replay, not both")
    db = Path(args.db)
    broker = broker_of(args.broker)
    holder = BusHolder(broker)
    if args.replay:
        if args.scenario:
            raise BadInput("--replay plays a stored run; it takes no SCENARIO")
        stored = find_run(db, stored_id(args.db, args.replay, groups=False).id)
        if stored is None:
            raise BadInput(f"no run {args.replay!r} in {db} (see `errorflow runs`)")
        return Session("replay", holder, db, stored.scenario, stored.run_id, args.speed, stored)
    if args.attach:
        if broker is None:
            raise BadInput("--attach needs --broker URL (the broker the run is on)")
        scenario = _scenario(args) if args.scenario else None
        if scenario is None and db.exists():
            stored = find_run(db, args.attach)  # the run may be recorded here already
            scenario = stored.scenario if stored else None
        key = observer_key(getattr(args, "key_file", None))
        return Session("attach", holder, db, scenario, args.attach, run_key=key)
    if not args.scenario:
        raise BadInput("give a SCENARIO to run, or --attach RUN_ID, or --replay RUN_ID")
    return Session("live", holder, db, _scenario(args))


def _scenario(args: argparse.Namespace) -> Scenario:
    settings = RunSettings(trials=args.trials, seed=args.seed, propagation=args.propagation)
    return scenario_from(args.scenario, (), settings)


def cmd_tui(args: argparse.Namespace) -> int:
    from errorflow.tui.app import ErrorflowApp  # Textual loads only for the TUI commands

    app = ErrorflowApp(build_session(args))  # bad input raises: the CLI's one error path
    app.run()
    return app.return_code or EXIT_OK


def serve_command(args: argparse.Namespace) -> str:
    """The command textual-serve runs for each browser tab."""
    scenario = args.scenario
    if Path(scenario).exists():
        scenario = str(Path(scenario).resolve())  # the child may start elsewhere
    argv = [sys.executable, "-m", "errorflow", "tui", scenario,
            "--db", str(Path(args.db).resolve())]  # fmt: skip
    for flag in ("trials", "seed", "propagation", "broker"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag}", str(value)]
    return shlex.join(argv)


def cmd_serve(args: argparse.Namespace) -> int:
    _scenario(args)  # fail here, not in every browser tab
    broker_of(args.broker)
    free_port(SERVE_HOST, args.port)
    try:
        from textual_serve.server import Server
    except ImportError:
        raise RunFailure("serving needs textual-serve: pip install 'errorflow[serve]'") from None

    server = Server(serve_command(args), host=SERVE_HOST, port=args.port,
                    title=f"errorflow {args.scenario}")  # fmt: skip
    server.serve()
    return EXIT_OK
