"""`errorflow completion SHELL`: a completion script for bash, zsh or tcsh.

The script is generated from the parser itself by shtab (a maintained library that
reads argparse), so every command and option completes as `--help` lists them; scenario
arguments complete bundled scenario names and files, and `--db` files.
"""

from __future__ import annotations

import argparse

import shtab

from errorflow.cli.command_table import summary
from errorflow.cli.errors import EXIT_OK
from errorflow.cli.main import build_parser
from errorflow.scenario.bundled import bundled

SHELLS = ("bash", "zsh", "tcsh")
_FUNCTION = "_errorflow_scenario"


def _preamble() -> dict[str, str]:
    """Shell functions completing a scenario: the bundled names, and files."""
    names = " ".join(bundled())
    return {
        "bash": (f'{_FUNCTION}() {{\n  compgen -W "{names}" -- "$1"\n  compgen -f -- "$1"\n}}\n'),
        "zsh": (
            f"{_FUNCTION}() {{\n"
            f"  _alternative 'scenarios:bundled:({names})' 'files:file:_files'\n"
            "}\n"
        ),
    }


def mark_scenarios(parser: argparse.ArgumentParser) -> None:
    """Scenario positionals complete bundled names and files; `--db` completes files."""
    for action in parser._actions:
        if action.dest == "scenario":
            action.complete = {"bash": _FUNCTION, "zsh": _FUNCTION, "tcsh": "f"}  # type: ignore[attr-defined]
        elif action.dest == "db":
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                mark_scenarios(sub)


def cmd_completion(args: argparse.Namespace) -> int:
    parser = build_parser(None)  # every command built: the script lists them all
    mark_scenarios(parser)
    print(shtab.complete(parser, shell=args.shell, preamble=_preamble().get(args.shell, "")))
    return EXIT_OK


def add_completion(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser(
        "completion",
        help=summary("completion"),
        description="Print a shell completion script. Load it with, for bash: "
        'eval "$(errorflow completion bash)" (in ~/.bashrc); zsh: errorflow completion zsh '
        "> ~/.zfunc/_errorflow (with ~/.zfunc on fpath); tcsh: eval `errorflow completion tcsh`.",
    )
    c.add_argument("shell", choices=SHELLS)
    c.set_defaults(func=cmd_completion)
