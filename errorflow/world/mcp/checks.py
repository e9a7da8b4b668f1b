"""A scenario's MCP tools against their servers, when a run loads them: each need's
arguments fit the tool's input schema (its own tool's and its second sources'), and a
`wrong_entity` fault has another entity to answer for. Problems are the scenario's
(`task.needs.0.args: ...`), raised together as one ScenarioError."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pydantic import ValidationError

from errorflow.scenario.problems import Problem, ScenarioError
from errorflow.scenario.spec.model import NeedSpec, Scenario
from errorflow.scenario.spec.tool_args import enum_options
from errorflow.world.mcp.tool import McpTool


def check_mcp_tools(scenario: Scenario, tools: Mapping[str, McpTool]) -> None:
    problems = [*_need_problems(scenario, tools), *_entity_problems(scenario, tools)]
    if problems:
        raise ScenarioError("<scenario>", problems)


def _need_problems(scenario: Scenario, tools: Mapping[str, McpTool]) -> Iterator[Problem]:
    for i, need in enumerate(scenario.task.needs):
        places = [(need.tool, f"task.needs.{i}.args")]
        places += [(s, f"task.needs.{i}.sources.{j}") for j, s in enumerate(need.sources)]
        for name, at in places:
            tool = tools.get(name)
            why = _refused(need, tool) if tool is not None else None
            if tool is not None and why is not None:
                msg = f"tool {name!r} ({tool.session.name}) refuses the need's arguments: {why}"
                yield Problem(at, None, None, msg)


def _refused(need: NeedSpec, tool: McpTool) -> str | None:
    """Why the tool's schema refuses the arguments the need states (those taken from
    another need are known only at run time: left out, and may be missing)."""
    depends = need.depends_on()
    given = {k: v for k, v in need.arguments().items() if k not in depends}
    try:
        tool.args_model.model_validate(given)
    except ValidationError as exc:
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            if err["type"] == "missing" and name in depends:
                continue
            if err["type"] == "extra_forbidden":
                known = ", ".join(tool.input_schema.get("properties") or {}) or "none"
                return f"it takes no argument {name!r} (it takes {known})"
            return f"{name}: {err['msg']}"
    return None


def _entity_problems(scenario: Scenario, tools: Mapping[str, McpTool]) -> Iterator[Problem]:
    """`wrong_entity` answers another need's call or another value of an argument with
    fixed options (an `enum` in the schema): a tool needs one of them."""
    for name, tool in tools.items():
        needs = [n for n in scenario.task.needs if n.tool == name]
        calls = {repr(sorted(n.arguments().items())) for n in needs}
        options = [v for v in enum_options(tool.args_model).values() if len(v) > 1]
        if len(calls) > 1 or options:
            continue
        for i, fault in enumerate(scenario.tools[name].faults):
            if fault.kind == "wrong_entity":
                msg = (
                    "fault 'wrong_entity' needs another entity to answer for: an MCP tool "
                    "answers another need's arguments or another value of an argument its "
                    "schema gives an enum; give it a second need"
                )
                yield Problem(f"tools.{name}.faults.{i}.kind", None, None, msg)
