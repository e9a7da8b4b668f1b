"""The `errorflow` command line: the parser, one builder per command, and the exit codes
every command shares (0 ok, 1 a runtime failure, 2 bad input, with one line on stderr)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from errorflow import __version__
from errorflow.agents.backends import ConfigurationError
from errorflow.bus.url import BrokerURLError
from errorflow.cli import info_commands, run_commands, store_commands, sweep_command, tui_commands
from errorflow.cli.args import EXIT_FAILURE, EXIT_USAGE, UsageError
from errorflow.cli.console import fail
from errorflow.runtime.store import StoreError
from errorflow.scenario.loader import ScenarioError
from errorflow.scenario.overrides import OverrideError

#: Every command's parser builder, in the order `errorflow --help` lists them.
COMMANDS = (
    run_commands.add_run,
    sweep_command.add_sweep,
    store_commands.add_report,
    run_commands.add_agent,
    info_commands.add_validate,
    info_commands.add_schema,
    info_commands.add_scenarios,
    store_commands.add_runs,
    store_commands.add_show,
    tui_commands.add_commands,  # `tui` and `serve`
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="errorflow",
        description="Simulate multi-agent LLM systems over MQTT, inject tool faults and "
        "measure whether failures are contained or contaminate downstream agents.",
        epilog="Scenario arguments take a path or the name of a bundled scenario "
        "(see `errorflow scenarios`).",
    )
    p.add_argument("--version", action="version", version=f"errorflow {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug output to stderr")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in COMMANDS:
        add(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except ScenarioError as exc:
        return fail(f"invalid scenario\n{exc}", EXIT_USAGE)
    except (UsageError, BrokerURLError, ConfigurationError, OverrideError) as exc:
        return fail(str(exc), EXIT_USAGE)
    except FileNotFoundError as exc:
        return fail(str(exc), EXIT_USAGE)
    except (ConnectionError, TimeoutError, StoreError) as exc:
        return fail(str(exc), EXIT_FAILURE)
    except KeyboardInterrupt:
        return fail("interrupted", 130)


if __name__ == "__main__":
    sys.exit(main())
