"""Read a scenario file and turn every problem into a ScenarioError a person can act on.

Theory of operation
-------------------
The file is read with its marks (errorflow.scenario.marked_yaml: the line and column of
every node, by path), so any error path can be pointed back at the line that caused
it. Validation happens in passes, and every problem of a pass is reported at once:

1. the pydantic `Scenario` model: shapes, types, bounds, unknown keys, and the
   cross-references of `Scenario._references` (which reports each one at its own path);
2. the checks the model cannot make (errorflow.scenario.checks): the policy blocks,
   the simulated model's profile and params, need arguments against the tool kind's
   schema, and the size limits documented in scenarios/FORMAT.md ("Limits");
3. each value of the `sweep:` block, applied alone, must give a valid scenario.

Every `Problem` renders as one line, `FILE:LINE:COL: PATH: MESSAGE`, and messages say
what was expected and what was found, with the closest valid name for a typo
(errorflow.scenario.explain words pydantic's errors).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from errorflow.scenario.bundled import bundled
from errorflow.scenario.checks import prebuilt_policies, semantic_problems
from errorflow.scenario.explain import problems_from
from errorflow.scenario.marked_yaml import parse_yaml
from errorflow.scenario.model import Scenario
from errorflow.scenario.overrides import OverrideError, set_path
from errorflow.scenario.problems import (
    LIMITS_HINT,
    Marks,
    NodePath,
    Problem,
    ScenarioError,
    by_position,
    dotted,
    file_error,
    nearest_mark,
)
from errorflow.scenario.wording import found

__all__ = ["MAX_SCENARIO_BYTES", "Problem", "ScenarioError", "load", "load_scenario", "load_text"]

#: Files larger than this are refused before parsing (documented limit).
MAX_SCENARIO_BYTES = 1_000_000


def load(path: Path) -> Scenario:
    """Read, parse and validate a scenario file; every problem raises ScenarioError."""
    file = str(path)
    text = _read_text(path, file)
    if not text.strip():
        raise file_error(file, "the file is empty; expected a scenario mapping")
    data, marks = parse_yaml(text, file)
    return _validate(data, marks, file)


def load_scenario(path: str | Path) -> Scenario:
    return load(Path(path))


def load_text(text: str, file: str = "<string>") -> Scenario:
    """Parse and validate scenario YAML held in a string."""
    data, marks = parse_yaml(text, file)
    return _validate(data, marks, file)


def _read_text(path: Path, file: str) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise file_error(file, _not_found()) from None
    except IsADirectoryError:
        raise file_error(file, "is a directory; expected a scenario file (YAML)") from None
    except OSError as exc:
        raise file_error(file, f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_SCENARIO_BYTES:
        msg = f"expected at most {MAX_SCENARIO_BYTES} bytes, found {len(raw)} ({LIMITS_HINT})"
        raise file_error(file, msg)
    if b"\x00" in raw:
        raise file_error(file, "binary file (contains NUL bytes); expected a YAML text file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        msg = f"expected UTF-8 text, found byte 0x{raw[exc.start]:02x} (a binary file?)"
        raise file_error(file, msg, line, col) from None


def _not_found() -> str:
    msg = "no such file; expected a scenario file"
    try:
        names = ", ".join(bundled())
    except OSError:
        names = ""
    return msg + (f" or a bundled scenario name ({names})" if names else "")


def _validate(data: object, marks: Marks, file: str) -> Scenario:
    if not isinstance(data, dict):
        msg = f"expected a mapping of scenario fields at top level, found {found(data)}"
        raise file_error(file, msg, 1, 1)
    prepared, policy_problems = prebuilt_policies(data, marks)
    try:
        scenario = Scenario.model_validate(prepared)
    except ValidationError as exc:
        raise ScenarioError(file, by_position(problems_from(exc, data, marks, Scenario))) from None
    problems = semantic_problems(scenario, policy_problems, marks) or _sweep_problems(
        scenario, data, marks
    )
    if problems:
        raise ScenarioError(file, by_position(problems))
    return scenario


def _sweep_problems(s: Scenario, data: Mapping[str, object], marks: Marks) -> list[Problem]:
    """Each sweep value applied alone to the scenario must give a valid scenario."""
    problems: list[Problem] = []
    if s.sweep is None:
        return problems
    for i, axis in enumerate(s.sweep.axes):
        for label, overrides in axis.values.items():
            for key, value in overrides.items():
                at: NodePath = ("sweep", "axes", i, "values", label, key)
                line, col = nearest_mark(marks, at) or (None, None)
                problem = _cell_problem(data, key, value)
                if problem is not None:
                    problems.append(Problem(dotted(at), line, col, problem))
    return problems


def _cell_problem(data: Mapping[str, object], key: str, value: object) -> str | None:
    """What is wrong with the scenario `data` once `key` is set to `value`, if anything."""
    cell = copy.deepcopy({k: v for k, v in data.items() if k != "sweep"})
    try:
        set_path(cell, key, value)
        _validate(cell, {}, "<sweep>")
    except OverrideError as exc:
        return f"cannot apply: {str(exc).removeprefix(f'{key}: ')}"
    except ScenarioError as exc:
        inner = exc.problems[0]
        more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
        where = f"{inner.path}: " if inner.path else ""
        return f"this override gives an invalid scenario: {where}{inner.message}{more}"
    return None
