"""Read a scenario and turn every problem into a ScenarioError a person can act on.

Theory of operation
-------------------
Every source of a scenario goes through one pipeline, `validate_data`: a file
(`load`, read safely by errorflow.scenario.scenario_file), YAML text (`load_text`),
JSON (`load_json`: a stored run, a roll call), and the plain data an override or a run
setting gives (errorflow.scenario.overrides). A file is read with its marks
(errorflow.scenario.marked_yaml: the line and column of every node, by path), so any
error path can be pointed back at the line that caused it. Validation happens in
passes, and every problem of a pass is reported at once:

1. the pydantic `Scenario` model, strictly (`trials: true` is an error, not 1): shapes,
   types, bounds, unknown keys, and the cross-references of the model;
2. the checks the model cannot make, `SECOND_PASS`: the policy blocks, the simulated
   model's profile and params, need arguments against the tool kind's schema and the
   size limits documented in scenarios/FORMAT.md ("Limits")
   (errorflow.scenario.checks.scenario_checks), strict types inside the free blocks
   (errorflow.scenario.coercions), URLs (errorflow.scenario.checks.url_checks), and
   whether the roll call that carries the scenario fits on the bus
   (errorflow.scenario.checks.bus_fit);
3. each value of the `sweep:` block, applied alone, must give a valid scenario (for a
   scenario as written; an override or a setting leaves the block as it was checked).

Every `Problem` renders as one line, `FILE:LINE:COL: PATH: MESSAGE`, and messages say
what was expected and what was found, with the closest valid name for a typo
(errorflow.scenario.checks.explain words pydantic's errors).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from errorflow.scenario.checks.bus_fit import bus_problems
from errorflow.scenario.checks.explain import problems_from
from errorflow.scenario.checks.references import modelling_warnings
from errorflow.scenario.checks.scenario_checks import (
    PolicyProblems,
    prebuilt_policies,
    semantic_problems,
)
from errorflow.scenario.checks.url_checks import url_problems
from errorflow.scenario.checks.wording import found
from errorflow.scenario.coercions import coercion_problems
from errorflow.scenario.marked_yaml import parse_yaml
from errorflow.scenario.paths import OverrideError, set_path
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
    problem_at,
)
from errorflow.scenario.provenance.inline import inline_profiles
from errorflow.scenario.python_ref import resolve_agent_paths, resolve_tool_paths
from errorflow.scenario.scenario_file import MAX_SCENARIO_BYTES, read_text
from errorflow.scenario.spec.mcp_model import resolve_mcp_paths
from errorflow.scenario.spec.model import Scenario

__all__ = [
    "MAX_SCENARIO_BYTES",
    "SECOND_PASS",
    "Problem",
    "ScenarioError",
    "load",
    "load_json",
    "load_scenario",
    "load_text",
    "validate_data",
]

#: One check of the second pass: the problems of a scenario the model accepted.
Check = Callable[[Scenario, Marks], Iterable[Problem]]


def _semantic(policies: PolicyProblems) -> Check:
    return lambda scenario, marks: semantic_problems(scenario, policies, marks)


#: The second pass after errorflow.scenario.checks.scenario_checks (which also reports the policy
#: blocks' problems held back from the first): add a check here and every source of
#: a scenario runs it.
SECOND_PASS: tuple[Check, ...] = (coercion_problems, url_problems, bus_problems)


def load(path: str | Path) -> Scenario:
    """Read, parse and validate a scenario file; every problem raises ScenarioError."""
    file = str(path)
    text = read_text(Path(path), file)
    if not text.strip():
        raise file_error(file, "the file is empty; expected a scenario mapping")
    data, marks = parse_yaml(text, file)
    # A Python tool's or agent's `file.py:callable` and an MCP server's `cwd` are
    # relative to the scenario file.
    base = Path(path).parent
    data = resolve_mcp_paths(resolve_agent_paths(resolve_tool_paths(data, base), base), base)
    return validate_data(data, file, marks, base_dir=base)


def load_scenario(path: str | Path) -> Scenario:
    return load(path)


def load_text(text: str, file: str = "<string>") -> Scenario:
    """Parse and validate scenario YAML held in a string (the same limits as a file)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_SCENARIO_BYTES:
        msg = f"expected at most {MAX_SCENARIO_BYTES} bytes, found {size} ({LIMITS_HINT})"
        raise file_error(file, msg)
    data, marks = parse_yaml(text, file)
    return validate_data(data, file, marks)


def load_json(text: str | bytes, file: str = "<json>") -> Scenario:
    """Validate a scenario held as JSON (a stored run's, a roll call's); it runs as it
    is, so its `sweep:` block, checked when it was written, is not checked again."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise file_error(file, f"not valid JSON: {str(exc)[:200]}") from None
    return validate_data(data, file, sweep=False)


def validate_data(
    data: object,
    file: str = "<data>",
    marks: Marks | None = None,
    *,
    sweep: bool = True,
    base_dir: Path | None = None,
) -> Scenario:
    """The scenario the plain `data` describes, through every pass; `file` names the
    source in problems, `marks` (if any) point them at lines. `sweep=False` skips the
    third pass (for a scenario made from one already checked). Profile files are read
    relative to `base_dir` (default: the working directory)."""
    marks = marks or {}
    if not isinstance(data, dict):
        msg = f"expected a mapping of scenario fields at top level, found {found(data)}"
        raise file_error(file, msg, *(marks.get(()) or (None, None)))
    unread = inline_profiles(data, base_dir, marks)
    if unread:
        raise ScenarioError(file, by_position(unread))
    prepared, policies = prebuilt_policies(data, marks)
    try:
        scenario = Scenario.model_validate(prepared, strict=True)
    except ValidationError as exc:
        raise ScenarioError(file, by_position(problems_from(exc, data, marks, Scenario))) from None
    problems: list[Problem] = []
    for check in (_semantic(policies), *SECOND_PASS):
        problems.extend(check(scenario, marks))
    if not problems and sweep:
        problems = _sweep_problems(scenario, data, marks)
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
        validate_data(cell, "<sweep>", sweep=False)
    except OverrideError as exc:
        return f"cannot apply: {str(exc).removeprefix(f'{key}: ')}"
    except ScenarioError as exc:
        inner = exc.problems[0]
        more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
        where = f"{inner.path}: " if inner.path else ""
        return f"this override gives an invalid scenario: {where}{inner.message}{more}"
    return None


def in_file(exc: ScenarioError, path: str | Path) -> ScenarioError:
    """A problem found once the scenario was loaded (its MCP servers' tools, a tool's
    ground truth), said of `<scenario>`: pointed at the lines of the file it was loaded
    from, as a problem of loading is. `exc` as it is when the file cannot be read."""
    file = str(path)
    try:
        _, marks = parse_yaml(read_text(Path(path), file), file)
    except (OSError, ScenarioError):
        return exc
    problems = [
        problem_at(marks, _node_path(p.path, marks), p.message) if p.line is None else p
        for p in exc.problems
    ]
    return ScenarioError(file, by_position(problems))


def _node_path(dotted_path: str, marks: Marks | None = None) -> NodePath:
    """`task.needs.0.args` → ("task", "needs", 0, "args"); with the file's `marks`, the
    path the file has: a key with dots in it (a tool `web.search`) or of digits only is
    one key there, not several or an index."""
    parts = dotted_path.split(".")
    plain = tuple(int(part) if part.isdigit() else part for part in parts)
    if not marks or plain in marks:
        return plain
    path: NodePath = ()
    while parts:  # at each level, the longest run of parts that is a key the file has
        found = next(
            (
                (end, step)
                for end in range(len(parts), 0, -1)
                for step in _keys(".".join(parts[:end]))
                if (*path, step) in marks
            ),
            None,
        )
        if found is None:
            return (*path, *(int(p) if p.isdigit() else p for p in parts))
        end, step = found
        path, parts = (*path, step), parts[end:]
    return path


def _keys(key: str) -> tuple[str | int, ...]:
    """What a part of a dotted path may be in the file: an index or a key of digits."""
    return (int(key), key) if key.isdigit() else (key,)


def warnings_for(
    scenario: Scenario,
    path: str | Path | None = None,
    more: Sequence[tuple[NodePath, str]] = (),
) -> list[str]:
    """What is allowed but probably not meant (a tool nobody calls; `more` found by the
    caller), each line worded like a problem, at its `file:line:col` when `path` is the
    scenario's file."""
    found = [*modelling_warnings(scenario), *more]
    if not found:
        return []
    marks: Marks = {}
    file = "<scenario>"
    if path is not None and Path(path).is_file():
        file = str(path)
        _, marks = parse_yaml(read_text(Path(path), file), file)
    return [problem_at(marks, loc, message).render(file) for loc, message in found]
