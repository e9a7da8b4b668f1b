"""The exception root: what an errorflow error says on the command line, and its code."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import errorflow
from errorflow.cli.errors import (
    Interrupted,
    RunFailure,
    UsageError,
    explain,
)
from errorflow.core.errors import (
    EXIT_FAILURE,
    EXIT_USAGE,
    ErrorflowError,
    InputError,
    clipped,
    first_line,
)


def test_the_root_is_exported_from_the_package() -> None:
    assert errorflow.ErrorflowError is ErrorflowError


def test_an_error_says_its_first_line_led_by_where() -> None:
    class Failed(ErrorflowError):
        pass

    class Refused(InputError, ValueError):
        where = "--thing"

    assert Failed("it broke\nat depth").text == "it broke"
    assert Failed().text == "Failed"
    assert Failed.exit_code == EXIT_FAILURE and Refused.exit_code == EXIT_USAGE
    assert Refused("no such thing").text == "--thing: no such thing"
    assert isinstance(Refused("x"), ValueError)  # its other base still catches it


def test_a_long_where_is_clipped_to_one_line() -> None:
    assert clipped("a\nb") == "a\\nb"
    said = clipped("x" * 10_000)
    assert said.startswith("xxx") and "(10,000 characters)" in said and len(said) < 100


def test_first_line_of_an_empty_message_is_the_class_name() -> None:
    assert first_line(ValueError("  ")) == "ValueError"


@pytest.mark.parametrize(
    ("error", "code", "text"),
    [
        (RunFailure("the broker went away\nmore"), 1, "the broker went away"),
        (UsageError("bad", where="--trials"), 2, "--trials: bad"),
        (Interrupted("interrupted\nresume with x"), 130, "interrupted\nresume with x"),
    ],
)
def test_the_command_line_prints_what_the_error_says(
    error: ErrorflowError, code: int, text: str
) -> None:
    assert explain(error) == (code, text)


def test_any_errorflow_error_is_one_line_not_a_traceback() -> None:
    from errorflow.models.cassette import CassetteError

    assert explain(CassetteError("a cassette of another run")) == (1, "a cassette of another run")
    assert explain(RuntimeError("a bug")) is None  # anything else keeps its traceback


def test_family_texts_keep_their_forms(tmp_path: Path) -> None:
    from errorflow.bus.url import BrokerURLError
    from errorflow.protocol.signing import RunKeyError
    from errorflow.scenario.overrides import InvalidOverride
    from errorflow.scenario.problems import Problem
    from errorflow.store.opening import UnusableStore

    assert explain(BrokerURLError("no host")) == (2, "--broker: no host")
    assert explain(RunKeyError("too short")) == (2, "run key: too short")
    store = UnusableStore(tmp_path, "a directory", "a file")
    assert explain(store) == (2, f"--db {tmp_path}: a directory; expected a file")
    assert isinstance(store, sqlite3.DatabaseError)
    invalid = InvalidOverride("--set", [Problem("trials", None, None, "expected a number")])
    assert explain(invalid) == (2, "invalid scenario\n--set: trials: expected a number")
    assert isinstance(invalid, ValueError)
