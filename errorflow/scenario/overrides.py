"""Dotted-path overrides of a scenario: `agents.researcher.policy.strategy=classify`.

Used by the command line (`--set`), by sweeps (`errorflow sweep --vary PATH=V1,V2`,
the scenario `sweep:` block), by the fault-free baseline, and by the run settings a
caller gives. The result goes through the loader's pipeline (errorflow.scenario.loader
`validate_data`) as a whole scenario, so an override or a setting can never produce a
scenario `errorflow validate` would refuse: the same checks, the same limits, and a
`ScenarioError` (also an `OverrideError`) worded as `validate` words a file's problems.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from errorflow.scenario.checks.wording import short
from errorflow.scenario.loader import validate_data
from errorflow.scenario.marked_yaml import NotYAML, ValueBudget, read_value
from errorflow.scenario.paths import OverrideError, set_path
from errorflow.scenario.problems import Problem, ScenarioError
from errorflow.scenario.python_ref import resolve_agent_paths, resolve_tool_paths
from errorflow.scenario.spec.mcp_model import resolve_mcp_paths
from errorflow.scenario.spec.model import Scenario

__all__ = [
    "InvalidOverride",
    "OverrideError",
    "apply",
    "parse_value",
    "set_path",
    "with_settings",
    "without_faults",
]

#: How the source of a scenario made by overrides reads in its problems.
OVERRIDES = "<overrides>"


class InvalidOverride(OverrideError, ScenarioError):
    """Overrides (or run settings) that give an invalid scenario: every problem, one a
    line, as `validate` says them."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        ScenarioError.__init__(self, file, problems)
        self.path = ""


def data_of(scenario: Scenario) -> dict[str, object]:
    """The plain data of a scenario, as overrides write into it: Python's dump, which
    validates back to the same scenario (the JSON dump would turn an infinity into
    null)."""
    return copy.deepcopy(scenario.model_dump())


def validated(data: dict[str, object], source: str = OVERRIDES) -> Scenario:
    """`data` through the loader's pipeline (the `sweep:` block stays as it was
    checked); InvalidOverride names `source`."""
    try:
        return validate_data(data, source, sweep=False)
    except ScenarioError as exc:
        raise InvalidOverride(exc.file, exc.problems) from None


def apply(
    scenario: Scenario, overrides: Mapping[str, object], base_dir: Path | None = None
) -> Scenario:
    """`scenario` with each path set to its value; `base_dir`: the scenario file's folder,
    against which a path a value names (a Python tool's or agent's `function`, a server's
    `cwd`) is read, as the file's own are."""
    data = data_of(scenario)
    for path, value in overrides.items():
        set_path(data, path, copy.deepcopy(value))
    if base_dir is not None:
        resolved = resolve_agent_paths(resolve_tool_paths(data, base_dir), base_dir)
        data = cast(dict[str, object], resolve_mcp_paths(resolved, base_dir))  # a dict in, out
    if not overrides:
        return validated(data)
    shown = ", ".join(f"{path}={short(value, 40)}" for path, value in overrides.items())
    return validated(data, f"override {shown}" if len(shown) <= 120 else OVERRIDES)


def parse_value(text: str, source: str = "<value>", budget: ValueBudget | None = None) -> object:
    """A value as YAML reads it: `3` is an int, `0.5` a float, `[a, b]` a list; text that
    is not YAML is itself. The limits of a scenario file hold (size, nesting, alias
    expansion, integer digits, characters), and `budget` bounds the nodes of all the
    values of one command line: a value over a limit raises ScenarioError naming
    `source` (an alias bomb of 500 bytes is refused, not expanded)."""
    try:
        return read_value(text, source, budget)
    except NotYAML:
        return text


def without_faults(scenario: Scenario) -> Scenario:
    """The same scenario with every injected fault removed: the cost baseline. Its
    services keep their latency but have no limit, no degradation and no outage, so
    the load a run puts on them is measured against the load the task itself needs."""
    return validated(fault_free(data_of(scenario)))


def fault_free(data: dict[str, object]) -> dict[str, object]:
    """`without_faults` on a scenario's plain data, in place (a stored run's too: a
    report finds the baseline a sweep's cells shared by it); `data`."""
    tools = data.get("tools")
    for tool in tools.values() if isinstance(tools, dict) else ():
        if isinstance(tool, dict):
            tool["faults"] = []
    agents = data.get("agents")
    for agent in agents.values() if isinstance(agents, dict) else ():
        if isinstance(agent, dict) and agent.get("faults"):
            agent["faults"] = []
    data.pop("bus", None)  # bus faults too (its resend settings only matter with them)
    services = data.get("services")
    if isinstance(services, dict):
        for name, service in list(services.items()):
            if isinstance(service, dict):
                services[name] = {"latency_s": service.get("latency_s")}
    return data


def with_settings(
    scenario: Scenario,
    *,
    trials: int | None = None,
    seed: int | None = None,
    propagation: str | None = None,
) -> Scenario:
    """The scenario with the run settings a command line or a caller gives (None: keep
    the scenario's). The one place trials, seed and propagation are applied. Always
    validated (a scenario built in Python meets the file's checks before it runs);
    the scenario itself is returned when no setting changes it."""
    update = {
        key: value
        for key, value in (("trials", trials), ("seed", seed), ("propagation", propagation))
        if value is not None
    }
    result = validated({**data_of(scenario), **update}, f"<scenario {scenario.name}>")
    return result if update else scenario
