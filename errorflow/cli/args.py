"""Arguments shared by every errorflow command: the parser (its errors take the one error
path: one line, exit code 2), clear messages for bad numbers, and the store option."""

from __future__ import annotations

import argparse
import math
import re
from typing import NoReturn

from errorflow.cli.errors import UsageError, shown
from errorflow.cli.paths import path_arg
from errorflow.scenario.checks.wording import closest


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


#: Digits of a whole-number option: every count, seed and index fits in a signed 64-bit
#: integer (SQLite's, the bus's JSON readers'), and Python cannot print more than 4,300.
MAX_WHOLE_DIGITS = 18
_WHOLE = re.compile(r"[+-]?[0-9]+")
#: Characters of a number option (`1e-3`, `0.25`, `3600`): more is no number meant.
MAX_NUMBER_CHARS = 32
#: The longest wait an option takes (`--wait`): a day, far beyond any start-up.
MAX_WAIT_S = 86_400.0


def whole(text: str) -> int:
    """A whole number written in ASCII digits (int() would also take '1_000', ' 7 ' and
    other scripts' digits), of at most `MAX_WHOLE_DIGITS` digits."""
    if not _WHOLE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a whole number, found {shown(text)}")
    digits = len(text.lstrip("+-"))
    if digits > MAX_WHOLE_DIGITS:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of at most {MAX_WHOLE_DIGITS} digits, found {digits:,}"
        )
    return int(text)


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


def number(text: str) -> float:
    """A finite number (float() would also take 'nan', 'inf', '1_0' and a thousand
    digits), written in at most `MAX_NUMBER_CHARS` characters."""
    try:
        plain = text.isascii() and "_" not in text and len(text) <= MAX_NUMBER_CHARS
        value = float(text) if plain else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, found {shown(text)}")
    return value


def nonneg_float(text: str) -> float:
    value = number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, found {text}")
    return value


def positive_float(text: str) -> float:
    value = number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, found {text}")
    return value


def wait_seconds(text: str) -> float:
    value = positive_float(text)
    if value > MAX_WAIT_S:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_WAIT_S:,.0f} seconds (a day), found {text}"
        )
    return value


#: A run id is one MQTT topic level; a generated one is the scenario's name (at most 64
#: characters) and 9 more.
RUN_ID = re.compile(r"[A-Za-z0-9_.\-]{1,80}")


def run_id_arg(text: str) -> str:
    """An argparse type: a run id as a topic level takes it (no `/`, `+`, `#`, spaces)."""
    if not RUN_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            "expected 1 to 80 letters, digits, '.', '_' or '-' (one topic level), "
            f"found {shown(text)}"
        )
    return text


def db_arg(parser: argparse.ArgumentParser) -> None:
    from errorflow.store.opening import DB_ENV, DEFAULT_DB, default_db

    parser.add_argument(
        "--db",
        type=path_arg,  # also applied to the default: $ERRORFLOW_DB is checked like --db
        default=str(default_db()),
        help=f"SQLite file runs are stored in (default: ${DB_ENV}, else {DEFAULT_DB})",
    )
