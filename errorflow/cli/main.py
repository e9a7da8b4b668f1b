"""The `errorflow` command line: the parser, one builder per command, and the exit codes
every command shares (0 ok, 1 a runtime failure, 2 bad input, with one line on stderr;
errorflow/cli/errors.py is the one place failures are turned into text)."""

from __future__ import annotations

import argparse
import contextvars
import logging
import os
import sys
from collections.abc import Sequence
from typing import cast

from errorflow import __version__
from errorflow.cli.args import Parser
from errorflow.cli.argv import check_words
from errorflow.cli.command_table import BUILDERS, named_command
from errorflow.cli.console import fail
from errorflow.cli.errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, explain
from errorflow.cli.mqtt_client_option import add_mqtt_client_option, apply_mqtt_client_option


def build_parser(only: str | None = None) -> Parser:
    """The whole command line (None), or every command named and only `only` built:
    the one a command line asks for (`named_command`), so its start-up imports that
    command's module alone ('' or an unknown word: none, for `--help` and typos)."""
    p = Parser(
        prog="errorflow",
        description="Simulate multi-agent LLM systems over MQTT, inject tool faults and "
        "measure whether failures are contained or contaminate downstream agents.",
        epilog="Scenario arguments take a path or the name of a bundled scenario "
        "(see `errorflow scenarios`).",
    )
    p.add_argument("--version", action="version", version=f"errorflow {__version__}")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="log errorflow's debug output to stderr"
    )
    add_mqtt_client_option(p)
    # The subcommands' parsers are `Parser`s too; the builders only add arguments to them.
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        p.add_subparsers(dest="command", metavar="COMMAND", required=True),
    )
    for builder in BUILDERS:
        if only is None or only in builder.names:
            builder.load()(sub)
        else:  # named, for the listing and the choices; never chosen on this command line
            for name, help_line in builder.commands:
                sub.add_parser(name, help=help_line)
    return p


def configure_logging(verbose: bool) -> None:
    """Warnings of everything; with -v, errorflow's own debug lines too (the drivers'
    debug output, aiosqlite's and the MQTT clients', would bury them)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("errorflow").setLevel(logging.DEBUG if verbose else logging.WARNING)
    # The embedded broker logs every delivery it gives up on (a PUBACK 5 s late) as an
    # error with a traceback; errorflow's own acks and resends recover them, so only -v
    # shows them.
    logging.getLogger("amqtt").setLevel(logging.WARNING if verbose else logging.CRITICAL)


def main(argv: Sequence[str] | None = None) -> int:
    args: argparse.Namespace | None = None
    try:
        try:
            words = sys.argv[1:] if argv is None else list(argv)
            check_words(words)  # UTF-8 and bounded, whatever the option
            args = build_parser(named_command(words)).parse_args(words)
        except SystemExit as exc:  # --help, --version
            return exc.code if isinstance(exc.code, int) else 0
        configure_logging(args.verbose)
        apply_mqtt_client_option(args)
        # In a context of its own: what a command installs (how real models are served)
        # ends with it, when main() is called again in the same thread.
        code = int(contextvars.copy_context().run(args.func, args))
        sys.stdout.flush()  # a closed pipe fails here, where it is caught
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)
    except Exception as exc:
        known = explain(_in_its_file(exc, args))
        if known is None:
            raise  # a bug: keep its traceback
        code, text = known
        return fail(text, code)


def _in_its_file(exc: Exception, args: argparse.Namespace | None) -> Exception:
    """A problem of the scenario found once it was loaded (its MCP servers' tools, a
    tool's ground truth) at the lines of the command's scenario file."""
    from errorflow.scenario.problems import ScenarioError

    ref = getattr(args, "scenario", None)
    if isinstance(exc, ScenarioError) and exc.file == "<scenario>" and isinstance(ref, str):
        from errorflow.scenario.bundled import resolve
        from errorflow.scenario.loader import in_file

        return in_file(exc, resolve(ref))
    return exc


def _quiet_stdout() -> None:
    """The reader went away (`| head`): nothing more to say, and nothing to say it to.
    Point stdout at /dev/null so the interpreter's last flush does not fail again."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return  # not a file (a test's capture): nothing will flush to a pipe
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
