"""`errorflow validate`, `errorflow scenarios` and `errorflow schema`: commands that run
nothing and say what a scenario or a message must be."""

from __future__ import annotations

import argparse
import json

from rich.table import Table
from rich.text import Text

from errorflow.cli.command_table import summary
from errorflow.cli.console import fail, out, say
from errorflow.cli.errors import EXIT_OK, bounded
from errorflow.cli.paths import path_arg
from errorflow.cli.scenario_input import load_ref
from errorflow.core.display import for_terminal
from errorflow.core.errors import EXIT_FAILURE, EXIT_USAGE
from errorflow.core.tool_errors import ToolServerDown
from errorflow.models.api_keys import KEY_ENVS
from errorflow.models.backends import check_backends
from errorflow.protocol.envelope import json_schema
from errorflow.scenario.bundled import bundled, describe, resolve
from errorflow.scenario.loader import ScenarioError, in_file, warnings_for
from errorflow.scenario.problems import Problem
from errorflow.scenario.spec.model import Scenario
from errorflow.world.ground_truth import empty_truths, need_truths


def _problem_json(problem: Problem, file: str) -> dict[str, object]:
    return {
        "file": file,
        "line": problem.line,
        "column": problem.column,
        "path": problem.path,
        "message": problem.message,
    }


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        scenario = load_ref(args.scenario)
        # What a run works out first: its tools (MCP ones against their servers, which
        # alone know them) and the ground truth (it may call Python and MCP tools).
        truths = need_truths(scenario)
    except ScenarioError as exc:
        if exc.file == "<scenario>":
            exc = in_file(exc, resolve(args.scenario))
        if args.json:  # every problem, for an editor or a CI step to read
            problems = [_problem_json(p, exc.file) for p in exc.problems]
            print(json.dumps({"ok": False, "problems": problems}, indent=2))
            return EXIT_USAGE
        if not args.all:
            raise  # at most three lines, as every command says bad input
        lines = ["invalid scenario", *(p.render(exc.file) for p in exc.problems)]
        return fail("\n".join(bounded(line) for line in lines), EXIT_USAGE)
    except ToolServerDown as exc:  # not the file's problem: the server's, as a run says it
        if not args.json:
            raise
        print(json.dumps({"ok": False, "problems": [], "error": str(exc)}, indent=2))
        return EXIT_FAILURE
    check_backends(scenario, env=dict.fromkeys(KEY_ENVS.values(), "(not checked)"))
    warnings = warnings_for(scenario, resolve(args.scenario), empty_truths(scenario, truths))
    if args.json:
        print(json.dumps(_validated_json(args.scenario, scenario, warnings), indent=2))
        return EXIT_OK
    for line in warnings:
        say(f"warning: {line}")  # never wrapped: `path:line:col` is read by editors
    facts = (
        f"{args.scenario}: scenario {scenario.name!r}, "
        f"{len(scenario.agents)} agents, {len(scenario.tools)} tools, "
        f"{scenario.trials} trials, propagation {scenario.propagation}"
    )
    # The path is the user's: shown as text, never read as markup.
    shown = Text.assemble(("ok", "green"), " ", for_terminal(facts, limit=None))
    out.print(shown, highlight=False, soft_wrap=True)
    return EXIT_OK


def _validated_json(ref: str, scenario: Scenario, warnings: list[str]) -> dict[str, object]:
    return {
        "ok": True,
        "file": ref,
        "scenario": scenario.name,
        "agents": len(scenario.agents),
        "tools": len(scenario.tools),
        "trials": scenario.trials,
        "propagation": scenario.propagation,
        "warnings": warnings,
    }


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2))
    return EXIT_OK


def cmd_scenarios(args: argparse.Namespace) -> int:
    if args.json:
        rows = [
            {"name": name, "path": str(path), "description": describe(path)}
            for name, path in bundled().items()
        ]
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    table = Table(title="Bundled scenarios", title_justify="left")
    table.add_column("name")
    table.add_column("what it shows")
    for name, path in bundled().items():
        table.add_row(name, describe(path))
    out.print(table)
    out.print("run one with: errorflow run NAME   (or a path to your own YAML file)")
    return EXIT_OK


def add_validate(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    v = sub.add_parser("validate", help=summary("validate"))
    v.add_argument("scenario", type=path_arg)
    v.add_argument(
        "--all",
        action="store_true",
        help="say every problem, one a line (without: the first two and how many more)",
    )
    v.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: the scenario's facts and warnings, or every problem "
        "with its file, line, column and field (exit 2)",
    )
    v.set_defaults(func=cmd_validate)


def add_schema(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("schema", help=summary("schema"))
    s.set_defaults(func=cmd_schema)


def add_scenarios(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sc = sub.add_parser("scenarios", help=summary("scenarios"))
    sc.add_argument("--json", action="store_true", help="print them as a JSON list")
    sc.set_defaults(func=cmd_scenarios)
