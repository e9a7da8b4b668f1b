"""Strict types in the blocks the scenario model validates as free data.

The model itself is validated strictly (the loader passes `strict=True`: `trials: true`
or `trials: "5"` is an error, not 1 or 5). An agent's policy block and a simulated
model's `params` are validated by their own models (errorflow.policies, the model
profiles), which convert leniently: `max_attempts: true` would build a policy of one
attempt. This check compares what was written with what was built and reports every
value that only passed by conversion, worded like the model's own type errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pydantic import ValidationError

from errorflow.scenario.checks.wording import found
from errorflow.scenario.problems import (
    Marks,
    NodePath,
    Problem,
    problem_at,
)
from errorflow.scenario.provenance.profile_file import is_profile_path
from errorflow.scenario.spec.model import AgentSpec, Scenario
from errorflow.scenario.spec.profiles import PROFILES

Conversion = tuple[NodePath, str]


def coercion_problems(scenario: Scenario, marks: Marks) -> list[Problem]:
    problems: list[Problem] = []
    for name, agent in scenario.agents.items():
        for at, message in _agent_conversions(name, agent):
            problems.append(problem_at(marks, at, message))
    return problems


def _agent_conversions(name: str, agent: AgentSpec) -> Iterator[Conversion]:
    policy = agent.policy
    at: NodePath = ("agents", name, "policy")
    yield from converted(policy.written, policy.config.model_dump(mode="json"), at)
    model = agent.model
    known = model.profile in PROFILES or is_profile_path(model.profile)
    if model.backend != "simulated" or not known:
        return
    try:
        built = model.tendencies().model_dump(mode="json")
    except (ValidationError, ValueError):
        return  # reported by the second pass's model checks
    yield from converted(model.params, built, ("agents", name, "model", "params"))


def converted(written: object, built: object, at: NodePath = ()) -> Iterator[Conversion]:
    """Where a written value was converted to another type (true -> 1, "3" -> 3, 2.0 ->
    2, 1 -> true): each such path, and what was expected there. An integer written for
    a number is no conversion."""
    if isinstance(written, Mapping) and isinstance(built, Mapping):
        for key, value in written.items():
            if key in built:
                yield from converted(value, built[key], (*at, str(key)))
    elif isinstance(written, list) and isinstance(built, list) and len(written) == len(built):
        for i, (value, result) in enumerate(zip(written, built, strict=True)):
            yield from converted(value, result, (*at, i))
    else:
        expected = _expected(written, built)
        if expected is not None:
            yield at, f"expected {expected}, found {found(written)}"


def _expected(written: object, built: object) -> str | None:
    """What a conversion from `written` to `built` says was expected; None for none."""
    if isinstance(built, bool):
        return None if isinstance(written, bool) else "true or false"
    if isinstance(built, int):
        return None if type(written) is int else "an integer"
    if isinstance(built, float):
        return None if type(written) in (int, float) else "a number"
    return None
