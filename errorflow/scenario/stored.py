"""A stored run's scenario, read back by what reads a run (reports, the TUI, exports).

The store keeps the scenario redacted: secrets, and the absolute paths of Python tools'
code, are gone from it. Reading a run needs the scenario's structure (agents, tools,
services, needs), never its code, and must not run that code: so a stored scenario is
validated by its model alone. The checks that import a Python tool were made when the
run was written; `--resume` loads the scenario from its file again
(errorflow.cli.resume), and a run's ground truth is stored with it
(errorflow.store.runs `truth_json`).
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from errorflow.scenario.checks.explain import problems_from
from errorflow.scenario.checks.scenario_checks import prebuilt_policies
from errorflow.scenario.problems import ScenarioError, by_position, file_error
from errorflow.scenario.spec.model import Scenario


def load_stored(text: str | bytes, file: str) -> Scenario:
    """The scenario a run stored, as its model validates it (no code imported)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise file_error(file, f"not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise file_error(file, "expected a mapping of scenario fields at top level")
    prepared, _ = prebuilt_policies(data, {})
    try:
        return Scenario.model_validate(prepared, strict=True)
    except ValidationError as exc:
        raise ScenarioError(file, by_position(problems_from(exc, data, {}, Scenario))) from None
