"""The scenario a command line describes: the file, then its `--set` overrides, then the
run settings (`--trials`, `--seed`, `--propagation`).

Everything the command line changes is checked the way `errorflow validate` checks a
file (same wording: expected, found, the closest valid name) before anything runs, and
a problem names the option that caused it: `--set agents.researcher.policy.strategy=
clasify: unknown strategy 'clasify'; did you mean 'classify'?`. The scenario itself is
then built by `apply` and `with_settings` exactly as before (they are the one place
overrides and settings are applied).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from errorflow.cli.errors import UsageError
from errorflow.scenario.bundled import resolve
from errorflow.scenario.loader import ScenarioError, load, load_text
from errorflow.scenario.model import Scenario
from errorflow.scenario.overrides import OverrideError, apply, parse_value, set_path, with_settings
from errorflow.scenario.problems import Problem

SETTINGS = ("trials", "seed", "propagation")
INVALID = "invalid scenario"  # as `validate` heads the problems of a file


@dataclass(frozen=True)
class Override:
    """One `--set PATH=VALUE` (or one `--vary` value): where it came from, and what it sets."""

    option: str  # as the user wrote it, e.g. `--set trials=5`
    path: str
    value: object


@dataclass(frozen=True)
class RunSettings:
    """The run settings of a command line (None: the scenario's own)."""

    trials: int | None = None
    seed: int | None = None
    propagation: str | None = None

    def given(self) -> dict[str, object]:
        return {k: v for k in SETTINGS if (v := getattr(self, k)) is not None}


def load_ref(ref: str) -> Scenario:
    """A scenario by path or bundled name."""
    return load(resolve(ref))


def parse_sets(specs: Sequence[str] | None) -> list[Override]:
    overrides = []
    for spec in specs or []:
        path, sep, value = spec.partition("=")
        if not sep or not path:
            raise UsageError(f"expected PATH=VALUE, found {spec!r}", where="--set")
        overrides.append(Override(f"--set {spec}", path, parse_value(value)))
    return overrides


def scenario_from(
    ref: str, sets: Sequence[Override] = (), settings: RunSettings | None = None
) -> Scenario:
    """The scenario file `ref`, with its overrides, then the run settings; a problem any
    of them causes is a `UsageError` naming the option."""
    return configure(load_ref(ref), sets, settings or RunSettings())


def configure(scenario: Scenario, sets: Sequence[Override], settings: RunSettings) -> Scenario:
    check(scenario, sets, settings)
    if sets:
        scenario = apply(scenario, {o.path: o.value for o in sets})
    return with_settings(
        scenario, trials=settings.trials, seed=settings.seed, propagation=settings.propagation
    )


def check(scenario: Scenario, sets: Sequence[Override], settings: RunSettings) -> None:
    """Refuse, as `validate` would, a scenario the overrides and settings would give."""
    if not sets and not settings.given():
        return
    data = scenario.model_dump(mode="json", exclude_none=True)
    # The sweep block is checked by `validate` against the file; a run does not use it.
    data.pop("sweep", None)
    for o in sets:
        try:
            set_path(data, o.path, copy.deepcopy(o.value))
        except OverrideError as exc:
            raise UsageError(str(exc).removeprefix(f"{o.path}: "), where=o.option) from None
    data.update(settings.given())
    try:
        # YAML text, so the file's own checks run (marks are of this text: not shown)
        load_text(yaml.safe_dump(data, sort_keys=False), "<command line>")
    except ScenarioError as exc:
        raise _blame(exc.problems, sets, settings) from None


def _blame(problems: list[Problem], sets: Sequence[Override], settings: RunSettings) -> UsageError:
    """The first problem, charged to the option that caused it."""
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    message, path = first.message + more, first.path
    if path in settings.given():
        where, path = f"--{path} {settings.given()[path]}", ""
    else:
        where = " ".join(o.option for o in sets) or "the run settings"  # several at once
        for o in reversed(sets):  # the last override of a field is the one that counts
            if path == o.path or _within(path, o.path) or _within(o.path, path):
                where, path = o.option, "" if path == o.path else path
                break
    return UsageError(message, where=where, path=path, heading=INVALID)


def _within(inner: str, outer: str) -> bool:
    return inner.startswith(outer + ".")


def check_axis(scenario: Scenario, where: str, values: Mapping[str, Mapping[str, object]]) -> None:
    """Every value of a sweep axis (its overrides by value label), applied alone, must give
    a valid scenario; `where` names the axis (`--vary PATH`, `sweep: NAME`)."""
    for label, overrides in values.items():
        cell = [Override(f"{where}={label}", path, v) for path, v in overrides.items()]
        check(scenario, cell, RunSettings())
