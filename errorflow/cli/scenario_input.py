"""The scenario a command line describes: the file, then its `--set` overrides, then the
run settings (`--trials`, `--seed`, `--propagation`).

The overrides and then the settings are applied by `apply` and `with_settings`
(errorflow.scenario.overrides: the one place each is applied), which send the result
through the loader's pipeline, so everything the command line changes is checked as
`errorflow validate` checks a file: the same checks and limits, the same wording
(expected, found, the closest valid name). Each problem is one line naming the option
that caused it: `--set agents.researcher.policy.strategy=clasify: unknown strategy
'clasify'; did you mean 'classify'?`, and the command exits 2 before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from errorflow.cli.errors import UsageError, shown
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import ScenarioError, load
from errorflow.scenario.marked_yaml import MAX_YAML_DEPTH, ValueBudget
from errorflow.scenario.overrides import (
    OverrideError,
    apply,
    parse_value,
    with_settings,
)
from errorflow.scenario.problems import Problem
from errorflow.scenario.run_plan import RunSettings
from errorflow.scenario.spec.model import Scenario

INVALID = "invalid scenario"  # as `validate` heads the problems of a file


@dataclass(frozen=True)
class Override:
    """One `--set PATH=VALUE` (or one `--vary` value): where it came from, and what it sets."""

    option: str  # as the user wrote it, e.g. `--set trials=5`
    path: str
    value: object


def load_ref(ref: str) -> Scenario:
    """A scenario by path or bundled name."""
    return load(resolve(ref))


def parse_sets(specs: Sequence[str] | None) -> list[Override]:
    """The `--set PATH=VALUE` options, each value read as YAML within a file's limits."""
    overrides, budget = [], ValueBudget()
    for spec in specs or []:
        path, sep, value = spec.partition("=")
        if not sep or not path:
            raise UsageError(f"expected PATH=VALUE, found {shown(spec)}", where="--set")
        option = f"--set {spec}"
        checked = checked_path(path, option)
        overrides.append(Override(option, checked, read(value, option, budget)))
    return overrides


def read(text: str, option: str, budget: ValueBudget) -> object:
    """A value of `option` as YAML reads it; a value over a file's limits (an alias bomb,
    nesting, integer digits, characters) or over what the command line's values may hold
    together (`budget`) is a UsageError naming the option."""
    try:
        return parse_value(text, option, budget)
    except ScenarioError as exc:
        first = exc.problems[0]
        where = _shown(option)
        raise UsageError(first.message, where, path=first.path, heading=INVALID) from None


def checked_path(path: str, option: str) -> str:
    """A dotted field path no deeper than a file may nest."""
    fields = path.count(".") + 1
    if fields > MAX_YAML_DEPTH:
        raise UsageError(
            f"expected a path of at most {MAX_YAML_DEPTH} fields, found {fields:,}",
            where=_shown(option),
        )
    return path


def scenario_from(
    ref: str, sets: Sequence[Override] = (), settings: RunSettings | None = None
) -> Scenario:
    """The scenario file `ref`, with its overrides, then the run settings; a problem any
    of them causes is a `UsageError` naming the option."""
    return configure(load_ref(ref), sets, settings or RunSettings(), folder_of(ref))


def folder_of(ref: str) -> Path:
    """The folder of the scenario file `ref` names (a bundled name's too): where a path
    an override gives is read from, as the file's own paths are."""
    return resolve(ref).resolve().parent


def configure(
    scenario: Scenario,
    sets: Sequence[Override],
    settings: RunSettings,
    base_dir: Path | None = None,
) -> Scenario:
    """The overrides (their paths read against `base_dir`, the file's folder), then the
    run settings, each checked as a whole scenario."""
    if sets:
        try:
            scenario = apply(scenario, {o.path: o.value for o in sets}, base_dir)
        except ScenarioError as exc:
            raise _blame(exc.problems, sets, RunSettings()) from None
        except OverrideError as exc:  # a path that cannot be set
            option = next((o.option for o in sets if o.path == exc.path), "--set")
            message = str(exc).removeprefix(f"{exc.path}: ")
            raise UsageError(message, where=_shown(option)) from None
    if not settings.given():
        return scenario
    try:
        return with_settings(
            scenario, trials=settings.trials, seed=settings.seed, propagation=settings.propagation
        )
    except ScenarioError as exc:
        raise _blame(exc.problems, (), settings) from None


def check(
    scenario: Scenario,
    sets: Sequence[Override],
    settings: RunSettings,
    base_dir: Path | None = None,
) -> None:
    """Refuse, as `validate` would, a scenario the overrides and settings would give."""
    configure(scenario, sets, settings, base_dir)


def _blame(problems: list[Problem], sets: Sequence[Override], settings: RunSettings) -> UsageError:
    """Every problem, one a line, each charged to the option that caused it."""
    charge = _Charges(sets, settings)
    lines = [charge(p) for p in problems]
    where, path, message = lines[0]
    rest = [Problem(p, None, None, m).render(w) for w, p, m in lines[1:]]
    return UsageError("\n".join([message, *rest]), where=where, path=path, heading=INVALID)


class _Charges:
    """Which option a problem is charged to: the setting of its field, else the last
    override of the field, of a field it is inside or of one inside it (looked up by
    path, so thousands of `--set`s and problems take no quadratic time)."""

    def __init__(self, sets: Sequence[Override], settings: RunSettings) -> None:
        self.sets, self.given = sets, settings.given()
        self.at: dict[str, int] = {}  # a field's path: the last override of it
        self.below: dict[str, int] = {}  # a field's path: the last override inside it
        for i, o in enumerate(sets):
            self.at[o.path] = i
            parts = o.path.split(".")
            for cut in range(1, len(parts)):
                self.below[".".join(parts[:cut])] = i
        # A problem of several at once (a reference between two fields) names them all.
        self.everywhere = " ".join(_shown(o.option) for o in sets) or "the run settings"

    def __call__(self, problem: Problem) -> tuple[str, str, str]:
        """(the option at fault, the field path left to say, the message)."""
        path = problem.path
        if path in self.given:
            return f"--{path} {self.given[path]}", "", problem.message
        parts = path.split(".")
        found = [self.at.get(".".join(parts[:cut]), -1) for cut in range(1, len(parts) + 1)]
        last = max([*found, self.below.get(path, -1)])
        if last < 0:
            return self.everywhere, path, problem.message
        o = self.sets[last]
        return _shown(o.option), "" if path == o.path else path, problem.message


def _shown(option: str, limit: int = 80) -> str:
    """An option as a problem names it: a value of 70 KB is not repeated in full."""
    return option if len(option) <= limit else option[: limit - 3] + "..."


def check_axis(
    scenario: Scenario,
    where: str,
    values: Mapping[str, Mapping[str, object]],
    base_dir: Path | None = None,
) -> None:
    """Every value of a sweep axis (its overrides by value label), applied alone, must give
    a valid scenario; `where` names the axis (`--vary PATH`, `sweep: NAME`); a path a value
    names is read against `base_dir`, the scenario file's folder."""
    for label, overrides in values.items():
        cell = [Override(f"{where}={label}", path, v) for path, v in overrides.items()]
        check(scenario, cell, RunSettings(), base_dir)
