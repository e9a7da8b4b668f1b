"""The commands of `errorflow`, named without importing them.

A command's module imports the runtime it needs (the runner, the scenario models, the
MQTT clients: about a second of start-up here). `errorflow --help`, a mistyped command,
or one command's own `--help` need none of the others, so the top-level parser names
every command from this table and builds only the one the command line asks for
(`errorflow.cli.main.build_parser`). Each builder takes its help line from here: one
text, listed and shown the same either way.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

AddCommands = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


@dataclass(frozen=True)
class Builder:
    """`module.function(subparsers)` adds the parsers of `commands` (name, help line)."""

    module: str
    function: str
    commands: tuple[tuple[str, str], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.commands)

    def load(self) -> AddCommands:
        return cast(AddCommands, getattr(importlib.import_module(self.module), self.function))


def _one(module: str, function: str, name: str, help_line: str) -> Builder:
    return Builder(f"errorflow.cli.commands.{module}", function, ((name, help_line),))


#: Every command, in the order `errorflow --help` lists them.
BUILDERS = (
    _one("run", "add_run", "run", "run a scenario's trials and print the outcomes"),
    _one("sweep", "add_sweep", "sweep",
         "vary up to three scenario fields and print the matrix"),
    _one("store", "add_report", "report",
         "write a report of a stored run or group (comparison, sweep)"),
    _one("agent", "add_agent", "agent",
         "run one agent of a scenario that joins a run on a broker"),
    _one("worker", "add_worker", "worker",
         "take trials of runs from a broker and run them (run --remote-workers)"),
    _one("broker", "add_broker_config_command", "broker-config",
         "write a least-privilege Mosquitto configuration (users, ACLs) for one run"),
    _one("info", "add_validate", "validate",
         "check a scenario file and explain every problem"),
    _one("info", "add_schema", "schema", "print the message envelope's JSON Schema"),
    _one("info", "add_scenarios", "scenarios", "list the bundled scenarios"),
    _one("calibrate", "add_calibrate", "calibrate",
         "measure the simulated model's behaviour parameters on a real model"),
    _one("profiles", "add_profiles", "profiles",
         "show the simulated model's profiles and where each parameter came from"),
    _one("store", "add_runs", "runs", "list stored runs"),
    _one("store", "add_show", "show", "print one stored run, or a group of runs"),
    _one("trace", "add_trace", "trace",
         "look inside one trial: its root cause, provenance tree and timeline"),
    _one("export", "add_export", "export", "write a stored run or group in another format"),
    _one("completion", "add_completion", "completion",
         "print a shell completion script (bash, zsh, tcsh)"),
    Builder("errorflow.cli.commands.tui", "add_commands", (
        ("tui", "watch a run live in a terminal UI (start one, attach to one, or replay one)"),
        ("serve", "serve the TUI in a browser (textual-serve, on 127.0.0.1)"),
    )),
)  # fmt: skip

_HELP = {name: text for b in BUILDERS for name, text in b.commands}

#: The top-level options that take a value (the command is not that value).
OPTIONS_WITH_VALUE = ("--mqtt-client",)


def summary(name: str) -> str:
    """The help line of command `name`, as `errorflow --help` lists it."""
    return _HELP[name]


def named_command(argv: Sequence[str]) -> str:
    """The command a command line names: its first word that is not a top-level option
    or an option's value ('' when there is none, as in `errorflow --help`)."""
    words = iter(argv)
    for word in words:
        if _takes_value(word):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return ""


def _takes_value(word: str) -> bool:
    """An option with a value, or an abbreviation argparse reads as one (`--mqtt`)."""
    return len(word) > 2 and any(option.startswith(word) for option in OPTIONS_WITH_VALUE)
