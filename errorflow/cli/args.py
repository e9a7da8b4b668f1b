"""Arguments shared by every errorflow command: the parser (its errors take the one error
path: one line, exit code 2), clear messages for bad numbers, and the store option."""

from __future__ import annotations

import argparse
import re
from typing import NoReturn

from errorflow.cli.errors import UsageError
from errorflow.scenario.wording import closest


class Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is a `UsageError` (one line, no usage dump, the
    closest option for a typo); the subcommands' parsers are of this class too
    (argparse makes them `type(self)`)."""

    def error(self, message: str) -> NoReturn:
        close = self._closest(message)
        hint = f"did you mean {close!r}?" if close else f"see `{self.prog} --help`"
        raise UsageError(f"{message} ({hint})", where=self.prog)

    def _closest(self, message: str) -> str | None:
        """The option or choice an unknown one most likely meant."""
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            return closest(choice[1], re.findall(r"'([^']*)'", choice[2]))
        unknown = message.removeprefix("unrecognized arguments: ").split()
        if message.startswith("unrecognized") and unknown and unknown[0].startswith("--"):
            return closest(unknown[0].partition("=")[0], self.option_names())
        return None

    def option_names(self) -> set[str]:
        """Every `--option` of this parser and of its subcommands' (argparse reports an
        unknown option of a subcommand from the top-level parser)."""
        names = {o for o in self._option_string_actions if o.startswith("--")}
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for parser in action.choices.values():
                    names |= {o for o in parser._option_string_actions if o.startswith("--")}
        return names


def whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, found {text!r}") from None


def positive(text: str) -> int:
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, found {value}")
    return value


def nonneg(text: str) -> int:
    value = whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, found {value}")
    return value


def port(text: str) -> int:
    value = whole(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, found {value}")
    return value


def nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, found {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, found {text}")
    return value


def db_arg(parser: argparse.ArgumentParser) -> None:
    from errorflow.runtime.store import DEFAULT_DB  # a command with a store imports it anyway

    parser.add_argument(
        "--db",
        default=str(DEFAULT_DB),
        help=f"SQLite file runs are stored in (default: {DEFAULT_DB})",
    )
