"""The command table: every command named without importing it, one built when chosen."""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys

import pytest

from errorflow.bus.url import CLIENT_ENV
from errorflow.cli.command_table import BUILDERS, named_command, summary
from errorflow.cli.main import build_parser, main

NAMES = [name for builder in BUILDERS for name in builder.names]


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_listing_is_the_same_with_no_command_built() -> None:
    whole, named = build_parser(), build_parser("")
    assert named.format_help() == whole.format_help()
    assert list(_commands(named)) == list(_commands(whole)) == NAMES
    assert summary("run") in whole.format_help()


@pytest.mark.parametrize("name", NAMES)
def test_a_chosen_command_is_built_as_in_the_whole_parser(name: str) -> None:
    built = _commands(build_parser(name))[name]
    assert built.format_help() == _commands(build_parser())[name].format_help()
    assert built.get_default("func") is not None  # it runs (a name alone would not)


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        ([], ""),
        (["--help"], ""),
        (["-v", "run", "contamination"], "run"),
        (["--mqtt-client", "gmqtt", "scenarios"], "scenarios"),
        (["--mqtt", "gmqtt", "runs"], "runs"),  # argparse takes the abbreviation too
        (["--mqtt-client=gmqtt", "show", "x"], "show"),
        (["bogus", "run"], "bogus"),
    ],
)
def test_the_command_is_the_first_word_no_option_takes(argv: list[str], command: str) -> None:
    assert named_command(argv) == command


def test_abbreviated_and_whole_options_reach_the_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CLIENT_ENV, "aiomqtt")  # restored after the option changes it
    assert main(["--mqtt", "gmqtt", "scenarios"]) == 0
    assert "contamination" in capsys.readouterr().out
    assert os.environ[CLIENT_ENV] == "gmqtt"
    assert main(["bogus"]) == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err


def _loaded_after(*argvs: list[str]) -> list[str]:
    """The heavy modules a fresh interpreter has imported after running these."""
    code = (
        "import sys\n"
        "from errorflow.cli.main import main\n"
        f"for argv in {list(argvs)!r}:\n"
        "    main(argv)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('errorflow.runtime',"
        " 'errorflow.store', 'errorflow.agents', 'errorflow.scenario.spec.model', 'errorflow.tui',"
        " 'aiomqtt',"
        " 'gmqtt', 'aiosqlite', 'textual'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return list(ast.literal_eval(done.stdout.splitlines()[-1]))


def test_help_and_a_mistyped_command_import_no_runtime() -> None:
    # Before the table, `errorflow --help` imported every command (about a second here).
    assert _loaded_after(["--help"], ["bogus"]) == []


def test_a_command_imports_its_own_module_only() -> None:
    loaded = _loaded_after(["runs", "--db", "/nonexistent/errorflow.db"])
    assert "errorflow.store.readers" in loaded  # what `runs` needs
    assert not [m for m in loaded if m.startswith(("errorflow.tui", "textual"))]
