"""Dotted-path overrides of a scenario: `agents.researcher.policy.strategy=classify`.

Used by sweeps (`errorflow sweep --vary PATH=V1,V2`), by the scenario `sweep:` block,
and by the fault-free baseline. The result is validated again as a whole scenario, so
an override can never produce a scenario `errorflow validate` would refuse.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import yaml

from errorflow.scenario.model import Scenario


class OverrideError(ValueError):
    pass


def set_path(data: dict[str, object], path: str, value: object) -> None:
    parts = path.split(".")
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        nxt = _child(node, part, path)
        if nxt is None:
            nxt = {}
            if isinstance(node, dict):
                node[part] = nxt
            else:
                raise OverrideError(f"{path}: {'.'.join(parts[: i + 1])} does not exist")
        node = nxt
    last = parts[-1]
    if isinstance(node, list):
        index = _index(last, node, path)
        node[index] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise OverrideError(f"{path}: cannot set a field inside {type(node).__name__}")


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list):
        return node[_index(part, node, path)]
    raise OverrideError(f"{path}: {part!r} is inside a {type(node).__name__}, not a mapping")


def _index(part: str, node: list[Any], path: str) -> int:
    try:
        index = int(part)
    except ValueError:
        raise OverrideError(f"{path}: {part!r} is not a list index") from None
    if not -len(node) <= index < len(node):
        raise OverrideError(f"{path}: index {index} out of range (list of {len(node)})")
    return index


def apply(scenario: Scenario, overrides: Mapping[str, object]) -> Scenario:
    data = copy.deepcopy(scenario.model_dump(mode="json", exclude_none=True))
    for path, value in overrides.items():
        set_path(data, path, value)
    try:
        return Scenario.model_validate(data)
    except ValueError as exc:
        raise OverrideError(
            f"override {dict(overrides)} gives an invalid scenario: {exc}"
        ) from None


def parse_value(text: str) -> object:
    """A value as YAML reads it: `3` is an int, `0.5` a float, `[a, b]` a list."""
    try:
        value: object = yaml.safe_load(text)
        return value
    except yaml.YAMLError:
        return text


def without_faults(scenario: Scenario) -> Scenario:
    """The same scenario with every injected fault removed: the cost baseline."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    for tool in data.get("tools", {}).values():
        tool["faults"] = []
    return Scenario.model_validate(data)


def with_settings(
    scenario: Scenario,
    *,
    trials: int | None = None,
    seed: int | None = None,
    propagation: str | None = None,
) -> Scenario:
    """The scenario with the run settings a command line or a caller gives (None: keep
    the scenario's). The one place trials, seed and propagation are applied."""
    update: dict[str, object] = {}
    if trials is not None:
        update["trials"] = trials
    if seed is not None:
        update["seed"] = seed
    if propagation is not None:
        update["propagation"] = propagation
    return Scenario.model_validate({**scenario.model_dump(), **update}) if update else scenario
