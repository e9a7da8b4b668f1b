"""`errorflow tui` and `errorflow serve`: the command-line entry points of the TUI.

`add_commands` registers both on the main parser (errorflow/cli/main.py); each returns an
exit code: 0 ok, 1 a runtime failure, 2 bad input, with one line on stderr.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import tempfile
from pathlib import Path

from errorflow.cli.args import (
    db_arg,
    nonneg_float,
    port,
    run_id_arg,
)
from errorflow.cli.command_table import summary
from errorflow.cli.commands.store import stored_id
from errorflow.cli.errors import EXIT_OK, RunFailure, UsageError
from errorflow.cli.paths import path_arg
from errorflow.cli.preflight import broker_of, free_port, writable_db
from errorflow.cli.run_keys import observer_key
from errorflow.cli.run_options import scenario_args
from errorflow.cli.scenario_input import (
    check_axis,
    configure,
    folder_of,
    parse_sets,
    scenario_from,
)
from errorflow.runtime.experiment import sweep_arms
from errorflow.scenario.checks.wording import closest
from errorflow.scenario.run_plan import RunSettings
from errorflow.scenario.spec.model import Scenario
from errorflow.tui.session import Session
from errorflow.tui.sources import BusHolder, find_run

SERVE_HOST = "127.0.0.1"  # the browser UI can start runs: never on a public interface


class BadInput(UsageError):
    """Exit code 2 with a one-line explanation."""


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    t = sub.add_parser(
        "tui",
        help=summary("tui"),
        description="Start SCENARIO and watch it live; or --attach RUN_ID --broker URL to "
        "watch a run another process drives; or --replay RUN_ID to play a stored run back.",
    )
    t.add_argument(
        "scenario", nargs="?", type=path_arg, help="scenario file or bundled scenario name"
    )
    _run_args(t)
    t.add_argument("--attach", type=run_id_arg, metavar="RUN_ID", help="watch this run on --broker")
    t.add_argument(
        "--replay",
        metavar="RUN_ID",
        help="replay this stored run from --db (a unique prefix is enough)",
    )
    t.add_argument(
        "--key-file",
        type=path_arg,
        metavar="PATH",
        help="--attach: the run key, to verify what is shown (default: $ERRORFLOW_RUN_KEY)",
    )
    t.set_defaults(func=cmd_tui)

    s = sub.add_parser(
        "serve",
        help=summary("serve"),
        description="Serve `errorflow tui SCENARIO` in a browser through textual-serve. "
        "Every browser tab starts its own run.",
    )
    s.add_argument("scenario", type=path_arg, help="scenario file or bundled scenario name")
    _run_args(s)
    s.add_argument("--port", type=port, default=8000, help="port (default: 8000)")
    s.set_defaults(func=cmd_serve)


def _run_args(p: argparse.ArgumentParser) -> None:
    """The options of `run` that choose the scenario, a sweep's cell, and the pace."""
    scenario_args(p, ["explicit", "implicit"], "to run")
    p.add_argument(
        "--cell",
        metavar="LABEL",
        help="one cell of the scenario's sweep: block, by its label as `sweep` prints it "
        "(e.g. hierarchy/implicit)",
    )
    p.add_argument(
        "--speed", type=nonneg_float, default=1.0, metavar="X",
        help="pace of the display: X times ×1 (two messages a second), 0 = as fast as "
        "they come; + and - change it (default: 1)",
    )  # fmt: skip
    p.add_argument("--broker", metavar="URL", help="mqtt://HOST:PORT (default: embedded)")
    db_arg(p)


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
        _no_scenario_options(args, "--replay plays the stored run as it was")
        stored = find_run(db, stored_id(args.db, args.replay, groups=False).id)
        if stored is None:
            raise BadInput(f"no run {args.replay!r} in {db} (see `errorflow runs`)")
        return Session("replay", holder, db, stored.scenario, stored.run_id, args.speed, stored)
    if args.attach:
        if broker is None:
            raise BadInput("--attach needs --broker URL (the broker the run is on)")
        if not args.scenario:
            _no_scenario_options(args, "--attach without a SCENARIO shows the run as stored")
        scenario = _scenario(args) if args.scenario else None
        if scenario is None and db.exists():
            stored = find_run(db, args.attach)  # the run may be recorded here already
            scenario = stored.scenario if stored else None
        key = observer_key(getattr(args, "key_file", None))
        return Session("attach", holder, db, scenario, args.attach, args.speed, run_key=key)
    if not args.scenario:
        raise BadInput("give a SCENARIO to run, or --attach RUN_ID, or --replay RUN_ID")
    scenario = _scenario(args)
    writable_db(args.db)  # a bad --db is one line here, not an error inside the app
    return Session("live", holder, db, scenario, speed=args.speed)


def _no_scenario_options(args: argparse.Namespace, why: str) -> None:
    """Refuse the options that shape a scenario where none is made (they would be
    ignored without a word)."""
    given = [
        option
        for option, value in (
            (f"--{name.replace('_', '-')}", getattr(args, name, None))
            for name in ("trials", "seed", "propagation", "set", "no_faults", "cell")
        )
        if value not in (None, False, [])
    ]
    if given:
        raise BadInput(f"{given[0]}: {why}; it takes no option that changes a scenario")


def _scenario(args: argparse.Namespace) -> Scenario:
    """The scenario file, its `--set` overrides, a sweep cell (`--cell`), then the run
    settings: as `sweep` runs a cell (`--propagation` is a default the cell may vary,
    `--trials` and `--seed` win over the cell's)."""
    sets = parse_sets(getattr(args, "set", None))
    cell = getattr(args, "cell", None)
    if cell is None:
        settings = RunSettings(trials=args.trials, seed=args.seed, propagation=args.propagation)
        return scenario_from(args.scenario, sets, settings)
    base = scenario_from(args.scenario, sets, RunSettings(propagation=args.propagation))
    return configure(sweep_cell(base, cell, args.scenario), (),
                     RunSettings(trials=args.trials, seed=args.seed))  # fmt: skip


def sweep_cell(scenario: Scenario, label: str, where: str) -> Scenario:
    """The cell `label` (`row/col`, or `value` for one axis) of the scenario's sweep."""
    if scenario.sweep is None:
        raise BadInput(f"{where} has no sweep: block, so no cells for --cell")
    axes = [(a.name, a.values) for a in scenario.sweep.axes]
    for name, values in axes:
        check_axis(scenario, f"sweep: {name}", values, folder_of(where))
    arms = {a.label: a.scenario for a in sweep_arms(scenario, axes, folder_of(where))}
    if label in arms:
        return arms[label]
    close = closest(label, list(arms))
    hint = f"did you mean {close!r}?" if close else "the cells are " + ", ".join(arms)
    raise BadInput(f"no cell {label!r} in the sweep of {where} ({hint})")


def cmd_tui(args: argparse.Namespace) -> int:
    from errorflow.tui.app import ErrorflowApp

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
    for flag in ("trials", "seed", "propagation", "cell", "speed", "broker"):
        value = getattr(args, flag, None)
        if value is not None:
            argv += [f"--{flag}", str(value)]
    for spec in getattr(args, "set", None) or []:
        argv += ["--set", spec]
    return shlex.join(argv)


#: The page textual-serve shows, made to measure the terminal in the font it draws in:
#: its own copy of Roboto Mono instead of a web font that arrives after the terminal
#: has counted its columns (a wider font then pushes the right end out of the window),
#: and a page that can never grow a scrollbar over the last columns.
PAGE_FIXES = """
    <style>
      @font-face {
        font-family: "Roboto Mono"; font-display: block;
        src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf");
      }
      html, body { margin: 0; padding: 0; overflow: hidden; }
    </style>
    <script>
      const startTerminal = window.onload;  // textual.js's: fit the terminal, connect
      window.onload = (event) => document.fonts.load("16px 'Roboto Mono'")
        .catch(() => null).finally(() => startTerminal && startTerminal(event));
    </script>
"""
WEB_FONT = re.compile(r"<link[^>]*fonts\.googleapis\.com[^>]*/>", re.S)


def serve_templates(into: Path) -> Path:
    """A copy of textual-serve's page template with `PAGE_FIXES`, in `into`."""
    from textual_serve import server

    page = (Path(server.__file__).parent / "templates" / "app_index.html").read_text()
    page = WEB_FONT.sub("", page)
    page = page.replace("</head>", PAGE_FIXES + "  </head>", 1)
    into.mkdir(parents=True, exist_ok=True)
    (into / "app_index.html").write_text(page)
    return into


def cmd_serve(args: argparse.Namespace) -> int:
    _scenario(args)  # fail here, not in every browser tab
    broker_of(args.broker)
    writable_db(args.db)
    free_port(SERVE_HOST, args.port)
    try:
        from textual_serve.server import Server
    except ImportError:
        raise RunFailure("serving needs textual-serve: pip install 'errorflow[serve]'") from None

    with tempfile.TemporaryDirectory(prefix="errorflow-serve-") as tmp:
        server = Server(serve_command(args), host=SERVE_HOST, port=args.port,
                        title=f"errorflow {args.scenario}",
                        templates_path=serve_templates(Path(tmp)))  # fmt: skip
        server.serve()
    return EXIT_OK
